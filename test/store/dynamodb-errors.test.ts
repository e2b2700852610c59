/**
 * The DynamoDB engine's error classification, retry policy and contract mapping, on SDK-shaped errors
 * (no server needed; test/store/dynamodb.test.ts drives the same code through DynamoDB Local and a
 * fault proxy).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConditionFailed, InternalError, InvalidInput, StorageFailure, Throttled, TransactionConflict } from '../../src/core/errors.ts';
import { type AwsError, classify, toContractError, transactionRefused } from '../../src/store/dynamodb/errors.ts';
import { backoffDelay, mayRetry, retryPolicy } from '../../src/store/dynamodb/retry.ts';

function aws(name: string, extra: Partial<AwsError> = {}): AwsError {
  return Object.assign(new Error(`${name} happened`), { name }, extra);
}

const at = { operation: 'PutItem', table: 't', attempts: 3 };

describe('DynamoDB engine: classification, retry policy, contract errors', () => {
  it('classifies throttling, conflicts, ambiguous and fatal failures', () => {
    assert.equal(classify(aws('ProvisionedThroughputExceededException')), 'throttle');
    assert.equal(classify(aws('Error', { code: 'ECONNREFUSED' })), 'throttle');
    assert.equal(classify(aws('TransactionConflictException')), 'conflict');
    assert.equal(
      classify(aws('TransactionCanceledException', { CancellationReasons: [{ Code: 'None' }, { Code: 'TransactionConflict' }] })),
      'conflict',
    );
    assert.equal(classify(aws('TransactionCanceledException', { CancellationReasons: [{ Code: 'ThrottlingError' }] })), 'throttle');
    assert.equal(classify(aws('TransactionCanceledException', { CancellationReasons: [{ Code: 'ConditionalCheckFailed' }] })), 'fatal');
    assert.equal(classify(aws('InternalServerError', { $metadata: { httpStatusCode: 500 } })), 'ambiguous');
    assert.equal(classify(aws('Error', { code: 'ECONNRESET' })), 'ambiguous');
    assert.equal(classify(aws('TimeoutError')), 'ambiguous');
    assert.equal(classify(aws('ValidationException', { $metadata: { httpStatusCode: 400 } })), 'fatal');
  });

  it('retries what did not apply always, ambiguous failures only when idempotent, never past the attempts', () => {
    const p = retryPolicy({ maxAttempts: 3 });
    assert.equal(mayRetry(p, 'throttle', false, 1), true);
    assert.equal(mayRetry(p, 'conflict', false, 2), true);
    assert.equal(mayRetry(p, 'throttle', true, 3), false);
    assert.equal(mayRetry(p, 'ambiguous', true, 1), true);
    assert.equal(mayRetry(p, 'ambiguous', false, 1), false);
    assert.equal(mayRetry(p, 'fatal', true, 1), false);
    assert.equal(retryPolicy({ maxAttempts: 0 }).maxAttempts, 1);
    for (let attempt = 1; attempt < 12; attempt++) {
      const d = backoffDelay(retryPolicy({ baseDelayMs: 10, maxDelayMs: 100 }), attempt);
      assert.ok(d >= 0 && d < Math.min(100, 10 * 2 ** (attempt - 1)), `attempt ${attempt}: ${d}`);
    }
  });

  it('maps what is left to the contract: Throttled, TransactionConflict, StorageFailure, ConditionFailed, InvalidInput, InternalError', () => {
    const map = (e: AwsError, idempotent = true) => toContractError(e, classify(e), at, { idempotent });
    assert.ok(map(aws('ThrottlingException')) instanceof Throttled);
    assert.match(map(aws('Error', { code: 'ECONNREFUSED' })).message, /refused connections 3 times/);
    assert.ok(map(aws('TransactionConflictException')) instanceof TransactionConflict);
    assert.ok(map(aws('InternalServerError', { $metadata: { httpStatusCode: 500 } }), true) instanceof Throttled);
    const unknown = map(aws('InternalServerError', { $metadata: { httpStatusCode: 500 } }), false);
    assert.ok(unknown instanceof StorageFailure && /may or may not have been applied/.test(unknown.message));
    assert.ok(map(aws('ConditionalCheckFailedException', { $metadata: { httpStatusCode: 400 } })) instanceof ConditionFailed);
    assert.ok(map(aws('ValidationException', { $metadata: { httpStatusCode: 400 } })) instanceof InvalidInput);
    assert.ok(map(aws('ResourceNotFoundException', { $metadata: { httpStatusCode: 400 } })) instanceof InternalError);
    assert.ok(map(aws('Mystery', { $metadata: { httpStatusCode: 400 } })) instanceof InternalError);
  });

  it('a cancelled transaction names the operation whose condition failed', () => {
    const ops = [
      { op: 'put' as const, item: { PK: 'a', SK: '1' } },
      { op: 'check' as const, key: { PK: 'b', SK: '2' }, condition: { kind: 'exists' as const } },
    ];
    const e = transactionRefused(
      aws('TransactionCanceledException', { CancellationReasons: [{ Code: 'None' }, { Code: 'ConditionalCheckFailed' }] }),
      ops,
      undefined,
    );
    assert.ok(e instanceof ConditionFailed && e.failedIndex === 1 && /check b\/2/.test(e.message));
    assert.ok(transactionRefused(aws('IdempotentParameterMismatchException'), ops, 'tok') instanceof InvalidInput);
    assert.equal(transactionRefused(aws('ThrottlingException'), ops, undefined), undefined);
  });
});
