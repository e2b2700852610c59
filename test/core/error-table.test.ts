import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AlpError, ERROR_CODES, ERROR_TABLE, ExitCode, httpStatusOfCode } from '../../src/core/errors.ts';

describe('the error table', () => {
  it('gives every code an exit code, an HTTP status and a title, and every error reads them from it', () => {
    const exits = new Set<number>(Object.values(ExitCode));
    assert.ok(ERROR_CODES.length >= 17);
    for (const code of ERROR_CODES) {
      const row = ERROR_TABLE[code];
      assert.ok(exits.has(row.exit) && row.exit !== ExitCode.OK, `${code} exit ${row.exit}`);
      assert.ok(row.http >= 400 && row.http < 600, `${code} http ${row.http}`);
      assert.ok(row.title.length > 0);
      const e = new AlpError(code, 'x');
      assert.deepEqual([e.exitCode, e.httpStatus, e.title], [row.exit, row.http, row.title]);
      assert.equal(httpStatusOfCode(code), row.http);
    }
  });

  it('keeps the codes the CLI and the API promised', () => {
    assert.deepEqual(Object.fromEntries(ERROR_CODES.map((c) => [c, [ERROR_TABLE[c].exit, ERROR_TABLE[c].http]])), {
      INTERNAL: [1, 500],
      THROTTLED: [1, 503],
      STORAGE: [1, 503],
      USAGE: [2, 400],
      INVALID: [2, 400],
      TOO_LARGE: [2, 413],
      NOT_FOUND: [3, 404],
      CONFLICT: [4, 409],
      CONDITION_FAILED: [4, 409],
      TRANSACTION_CONFLICT: [4, 409],
      ILLEGAL_TRANSITION: [4, 409],
      STALE_EPOCH: [4, 409],
      RESTORE_HELD: [4, 409],
      ARCHIVED_COLD: [4, 409],
      MAINTENANCE: [4, 503],
      INTEGRITY: [5, 502],
      UNAUTHENTICATED: [6, 401],
      FORBIDDEN: [6, 403],
    });
  });
});
