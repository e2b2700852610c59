/**
 * How the DynamoDB engine reads an SDK error: `classify` decides whether a failed request may be
 * retried (see the retry rules in dynamodb-item-store.ts), `toContractError` turns what is left after
 * the retries into the ItemStore contract's typed errors. No caller outside this engine looks at SDK
 * error names.
 */
import { ConditionFailed, InternalError, InvalidInput, StorageFailure, Throttled, TransactionConflict } from '../../core/errors.ts';
import type { TransactOp } from '../item-store.ts';

/** throttle and conflict did not apply the request; ambiguous may have; fatal is not retried. */
export type Classified = 'throttle' | 'conflict' | 'ambiguous' | 'fatal';

export interface AwsError extends Error {
  code?: string;
  $metadata?: { httpStatusCode?: number };
  CancellationReasons?: Array<{ Code?: string; Message?: string }>;
}

export interface CallContext {
  /** May the request be repeated after an ambiguous failure? */
  idempotent: boolean;
  /** Maps a non-retryable service error to a contract error (ConditionFailed and friends). */
  mapError?: (e: AwsError) => Error | undefined;
}

/** Which request failed, for messages and details. */
interface Attempted {
  operation: string;
  table: string;
  attempts: number;
}

const THROTTLE_ERRORS = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'Throttling',
  'RequestLimitExceeded',
  'TooManyRequestsException',
  'LimitExceededException',
]);
const THROTTLE_REASONS = new Set(['ThrottlingError', 'ProvisionedThroughputExceeded', 'RequestLimitExceeded']);
const AMBIGUOUS_NETWORK = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const AMBIGUOUS_NAMES = new Set(['InternalServerError', 'ServiceUnavailable', 'TimeoutError', 'RequestTimeout']);

export function classify(e: AwsError): Classified {
  const name = e.name ?? '';
  if (THROTTLE_ERRORS.has(name)) return 'throttle';
  if (name === 'TransactionConflictException' || name === 'TransactionInProgressException') return 'conflict';
  if (name === 'TransactionCanceledException') return classifyCancellation(e);
  const status = e.$metadata?.httpStatusCode;
  if (status !== undefined && status >= 500) return 'ambiguous';
  if (AMBIGUOUS_NAMES.has(name)) return 'ambiguous';
  // A refused connection never reached DynamoDB: retried like throttling.
  if (e.code === 'ECONNREFUSED') return 'throttle';
  if (e.code && AMBIGUOUS_NETWORK.has(e.code)) return 'ambiguous';
  return 'fatal';
}

function classifyCancellation(e: AwsError): Classified {
  const codes = cancellationCodes(e);
  if (codes.includes('ConditionalCheckFailed') || codes.includes('ValidationError')) return 'fatal';
  if (codes.some((c) => THROTTLE_REASONS.has(c))) return 'throttle';
  if (codes.includes('TransactionConflict')) return 'conflict';
  return 'fatal';
}

function cancellationCodes(e: AwsError): string[] {
  return (e.CancellationReasons ?? []).map((r) => r.Code ?? 'None');
}

/** The contract error for a request that failed for good (after the retries its class allows). */
export function toContractError(e: AwsError, kind: Classified, at: Attempted, ctx: CallContext): Error {
  const mapped = ctx.mapError?.(e);
  if (mapped) return mapped;
  const detail = `${e.name}${e.code && e.code !== e.name ? ` ${e.code}` : ''}: ${e.message}`;
  switch (kind) {
    case 'throttle':
      return throttled(e, at, detail);
    case 'conflict':
      return new TransactionConflict(
        `${at.operation} on ${at.table} conflicted with concurrent transactions ${at.attempts} times (${detail})`,
        { operation: at.operation, attempts: at.attempts },
      );
    case 'ambiguous':
      return ambiguous(e, at, detail, ctx.idempotent);
    default:
      return fatal(e, at, detail);
  }
}

function throttled(e: AwsError, at: Attempted, detail: string): Throttled {
  const details = { operation: at.operation, attempts: at.attempts };
  if (e.code === 'ECONNREFUSED') {
    return new Throttled(`DynamoDB refused connections ${at.attempts} times (is the endpoint right?): ${detail}`, details, { cause: e });
  }
  return new Throttled(`DynamoDB throttled ${at.operation} on ${at.table} ${at.attempts} times; retry later (${detail})`, details, {
    cause: e,
  });
}

function ambiguous(e: AwsError, at: Attempted, detail: string, idempotent: boolean): Error {
  if (idempotent) {
    return new Throttled(
      `DynamoDB ${at.operation} on ${at.table} kept failing after ${at.attempts} attempts (${detail})`,
      { operation: at.operation, attempts: at.attempts },
      { cause: e },
    );
  }
  return new StorageFailure(`DynamoDB ${at.operation} on ${at.table} failed and the write may or may not have been applied: ${detail}`, {
    cause: e,
  });
}

function fatal(e: AwsError, at: Attempted, detail: string): Error {
  if (e.name === 'ConditionalCheckFailedException') return new ConditionFailed(`condition failed on ${at.operation}`);
  if (e.name === 'ResourceNotFoundException') {
    return new InternalError(`DynamoDB table ${at.table} (or its index GSI1) does not exist: run alp init to create it (${detail})`, {
      cause: e,
    });
  }
  if (e.name === 'ValidationException' || e.name === 'ItemCollectionSizeLimitExceededException' || isMarshallError(e)) {
    return new InvalidInput(`DynamoDB refused ${at.operation}: ${e.message}`, { operation: at.operation });
  }
  if (e.name === 'TransactionCanceledException') {
    return new InternalError(`DynamoDB cancelled the transaction: ${cancellationCodes(e).join(', ')}`, { cause: e });
  }
  return new InternalError(`DynamoDB ${at.operation} on ${at.table} failed: ${detail}`, { cause: e });
}

function isMarshallError(e: AwsError): boolean {
  return (
    e.$metadata === undefined &&
    /numeric value|SAFE_INTEGER|Unsupported type|removeUndefinedValues|convertClassInstanceToMap/.test(e.message)
  );
}

/** mapError of a conditional single-item write. */
export function conditionFailed(message: string): (e: AwsError) => Error | undefined {
  return (e) => (e.name === 'ConditionalCheckFailedException' ? new ConditionFailed(message) : undefined);
}

/** mapError of TransactWriteItems: a failed condition names its operation; a reused token is refused. */
export function transactionRefused(e: AwsError, ops: TransactOp[], token: string | undefined): Error | undefined {
  if (e.name === 'IdempotentParameterMismatchException') {
    return new InvalidInput('the transaction token was already used, within the last 10 minutes, for different operations', { token });
  }
  if (e.name !== 'TransactionCanceledException') return undefined;
  const reasons = e.CancellationReasons ?? [];
  const failed = reasons.findIndex((r) => r.Code === 'ConditionalCheckFailed');
  if (failed >= 0) {
    const op = ops[failed] as TransactOp;
    const key = op.op === 'put' ? op.item : op.key;
    return new ConditionFailed(`transaction cancelled: condition of operation ${failed} (${op.op} ${key.PK}/${key.SK}) failed`, failed);
  }
  const invalid = reasons.findIndex((r) => r.Code === 'ValidationError' || r.Code === 'ItemCollectionSizeLimitExceeded');
  if (invalid >= 0) {
    return new InvalidInput(`transaction refused: operation ${invalid}: ${reasons[invalid]?.Message ?? 'invalid'}`, {
      failedIndex: invalid,
    });
  }
  return undefined;
}
