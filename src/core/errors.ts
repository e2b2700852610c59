/**
 * The error hierarchy. Every error that can leave ALP carries a stable `code`, the CLI exit code of
 * docs/design.md §1 and the HTTP status an API adapter should answer with. Entry points render these; they
 * never invent codes of their own.
 */
export const ExitCode = {
  OK: 0,
  INTERNAL: 1,
  USAGE: 2,
  NOT_FOUND: 3,
  CONFLICT: 4,
  INTEGRITY: 5,
  AUTH: 6,
} as const;

export type ErrorCode =
  | 'INTERNAL'
  | 'USAGE'
  | 'INVALID'
  | 'TOO_LARGE'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'CONDITION_FAILED'
  | 'TRANSACTION_CONFLICT'
  | 'ILLEGAL_TRANSITION'
  | 'STALE_EPOCH'
  | 'RESTORE_HELD'
  | 'ARCHIVED_COLD'
  | 'MAINTENANCE'
  | 'THROTTLED'
  | 'STORAGE'
  | 'INTEGRITY'
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN';

/** What a code means to each entry point: the CLI's exit code, the HTTP status, the problem title. */
export interface ErrorCodeInfo {
  exit: number;
  http: number;
  title: string;
}

/**
 * THE error table. The CLI (exit codes), the HTTP adapter (api/problem.ts: status and title) and the
 * OpenAPI error list (api/schemas.ts) all read it; no other table of codes exists.
 */
export const ERROR_TABLE: Readonly<Record<ErrorCode, Readonly<ErrorCodeInfo>>> = {
  INTERNAL: { exit: ExitCode.INTERNAL, http: 500, title: 'Internal error' },
  THROTTLED: { exit: ExitCode.INTERNAL, http: 503, title: 'Storage is busy, retry later' },
  STORAGE: { exit: ExitCode.INTERNAL, http: 503, title: 'Storage failure' },
  USAGE: { exit: ExitCode.USAGE, http: 400, title: 'Invalid usage' },
  INVALID: { exit: ExitCode.USAGE, http: 400, title: 'Invalid input' },
  TOO_LARGE: { exit: ExitCode.USAGE, http: 413, title: 'Content too large' },
  NOT_FOUND: { exit: ExitCode.NOT_FOUND, http: 404, title: 'Not found' },
  CONFLICT: { exit: ExitCode.CONFLICT, http: 409, title: 'Conflict' },
  CONDITION_FAILED: { exit: ExitCode.CONFLICT, http: 409, title: 'Condition failed' },
  TRANSACTION_CONFLICT: { exit: ExitCode.CONFLICT, http: 409, title: 'Transaction conflict' },
  ILLEGAL_TRANSITION: { exit: ExitCode.CONFLICT, http: 409, title: 'Illegal transition' },
  STALE_EPOCH: { exit: ExitCode.CONFLICT, http: 409, title: 'Stale epoch' },
  RESTORE_HELD: { exit: ExitCode.CONFLICT, http: 409, title: 'Restore hold in force' },
  // 409, not S3's own 403: the request is allowed, the object's state (cold) conflicts with it and the
  // client can change that (restore, then retry); a 403 reads as "not allowed" and is never retried.
  ARCHIVED_COLD: { exit: ExitCode.CONFLICT, http: 409, title: 'Archived object must be restored first' },
  MAINTENANCE: { exit: ExitCode.CONFLICT, http: 503, title: 'Maintenance in progress' },
  INTEGRITY: { exit: ExitCode.INTEGRITY, http: 502, title: 'Integrity failure' },
  UNAUTHENTICATED: { exit: ExitCode.AUTH, http: 401, title: 'Unauthenticated' },
  FORBIDDEN: { exit: ExitCode.AUTH, http: 403, title: 'Forbidden' },
};

/** Every stable code, in the order of the table above. */
export const ERROR_CODES = Object.keys(ERROR_TABLE) as ErrorCode[];

/** The HTTP status a code answers with unless the HTTP adapter knows better. */
export function httpStatusOfCode(code: ErrorCode): number {
  return ERROR_TABLE[code].http;
}

export class AlpError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }

  get exitCode(): number {
    return ERROR_TABLE[this.code].exit;
  }

  get httpStatus(): number {
    return ERROR_TABLE[this.code].http;
  }

  get title(): string {
    return ERROR_TABLE[this.code].title;
  }
}

export class UsageError extends AlpError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('USAGE', message, details);
  }
}

export class InvalidInput extends AlpError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('INVALID', message, details);
  }
}

export class TooLarge extends AlpError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('TOO_LARGE', message, details);
  }
}

export class NotFound extends AlpError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('NOT_FOUND', message, details);
  }
}

export class Conflict extends AlpError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('CONFLICT', message, details);
  }
}

/**
 * A read of an object in a cold storage class (S3 GLACIER / DEEP_ARCHIVE): S3 must restore a temporary
 * copy first (RestoreObject, `aws s3api restore-object`), then the same read succeeds. Nothing is wrong
 * with the object; the message says how (details.key, details.restoreRequired).
 */
export class ArchivedCold extends AlpError {
  constructor(key: string, details?: Record<string, unknown>) {
    super(
      'ARCHIVED_COLD',
      `object ${key} is in a cold archive storage class and must be restored before it can be read: ` +
        'restore it (S3 RestoreObject, e.g. `aws s3api restore-object --bucket B --key K --restore-request Days=7`), ' +
        'wait until HeadObject shows ongoing-request="false", then retry',
      { key, restoreRequired: true, ...details },
    );
  }
}

export class IllegalTransition extends AlpError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('ILLEGAL_TRANSITION', message, details);
  }
}

/** A write's condition did not hold. In a transaction, `failedIndex` names the operation. */
export class ConditionFailed extends AlpError {
  readonly failedIndex: number | undefined;
  constructor(message: string, failedIndex?: number, details?: Record<string, unknown>) {
    super('CONDITION_FAILED', message, { ...details, ...(failedIndex === undefined ? {} : { failedIndex }) });
    this.failedIndex = failedIndex;
  }
}

/** Another transaction touched the same items at the same time; retrying may succeed. */
export class TransactionConflict extends AlpError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('TRANSACTION_CONFLICT', message, details);
  }
}

/** The storage engine asked us to slow down (DynamoDB throttling, SQLite busy past its timeout). */
export class Throttled extends AlpError {
  constructor(message: string, details?: Record<string, unknown>, options?: ErrorOptions) {
    super('THROTTLED', message, details, options);
  }
}

/**
 * The storage itself failed (disk full, I/O error, a timeout or lost connection whose write may or
 * may not have taken effect). Not a bug of ALP: the message says what failed and is safe to show.
 */
export class StorageFailure extends AlpError {
  constructor(message: string, options?: ErrorOptions) {
    super('STORAGE', message, undefined, options);
  }
}

export class IntegrityError extends AlpError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('INTEGRITY', message, details);
  }
}

export class Unauthenticated extends AlpError {
  constructor(message = 'a valid bearer token is required') {
    super('UNAUTHENTICATED', message);
  }
}

export class Forbidden extends AlpError {
  constructor(message: string, details?: Record<string, unknown>) {
    super('FORBIDDEN', message, details);
  }
}

export class StaleEpoch extends AlpError {
  constructor(given: number, current: number) {
    super('STALE_EPOCH', `epoch ${given} is stale: the installation is at epoch ${current}`, { given, current });
  }
}

export class RestoreHeld extends AlpError {
  constructor(message = 'a restore hold is in force: reconcile and activate the restore first') {
    super('RESTORE_HELD', message);
  }
}

export class MaintenanceInProgress extends AlpError {
  constructor(message = 'maintenance is in progress: writers are fenced until it ends', details?: Record<string, unknown>) {
    super('MAINTENANCE', message, details);
  }
}

export class InternalError extends AlpError {
  constructor(message: string, options?: ErrorOptions) {
    super('INTERNAL', message, undefined, options);
  }
}

const STORAGE_FAILURES: Record<string, string> = {
  ENOSPC: 'no space left on device',
  EIO: 'input/output error',
  EDQUOT: 'disk quota exceeded',
  EROFS: 'read-only file system',
  SQLITE_FULL: 'the database or disk is full',
  SQLITE_IOERR: 'the database hit an input/output error',
  SQLITE_READONLY: 'the database is read-only',
};
const LOST_CONNECTION = new Set(['ETIMEDOUT', 'ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/**
 * Anything that is not an AlpError is an internal failure; its message is kept, its stack is not shown.
 * Storage failures say which (disk full, I/O error), and a timeout or a lost connection says that the
 * operation may have taken effect, so that nobody retries a change blindly.
 */
export function toAlpError(e: unknown): AlpError {
  if (e instanceof AlpError) return e;
  const storage = storageFailureOf(e);
  if (storage) return storage;
  const message = e instanceof Error ? e.message : String(e);
  return new InternalError(message, { cause: e });
}

/**
 * The StorageFailure an errno or SQLite error stands for (disk full, I/O error, read-only storage, a
 * timeout or lost connection), or undefined when it is not a storage failure. Engines call this to map
 * their errors inside the engine; toAlpError is the same rule for anything that reaches an entry point.
 */
export function storageFailureOf(e: unknown): StorageFailure | undefined {
  if (e instanceof StorageFailure) return e;
  const err = e as (NodeJS.ErrnoException & { name?: string }) | undefined;
  const code = typeof err?.code === 'string' ? err.code : undefined;
  const family = code === undefined ? undefined : Object.keys(STORAGE_FAILURES).find((k) => code === k || code.startsWith(`${k}_`));
  const storage = family === undefined ? undefined : STORAGE_FAILURES[family];
  if (code && storage) return new StorageFailure(`storage failure: ${code} (${storage})`, { cause: e });
  if ((code && LOST_CONNECTION.has(code)) || err?.name === 'TimeoutError') {
    return new StorageFailure(
      `storage ${code === 'ETIMEDOUT' || err?.name === 'TimeoutError' ? 'timeout' : 'connection lost'} (${code ?? err?.name}): the operation may or may not have taken effect; check before retrying`,
      { cause: e },
    );
  }
  return undefined;
}
