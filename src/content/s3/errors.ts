/**
 * How the S3 engine reads an SDK error: the predicates its operations branch on (a refused condition,
 * a missing object, an endpoint lacking an operation) and `mapS3Error`, which turns everything else
 * into the ContentStore contract's typed errors. No caller outside this engine looks at S3 error names.
 */
import { AlpError, ArchivedCold, InternalError, NotFound, storageFailureOf, Throttled } from '../../core/errors.ts';

interface S3Error extends Error {
  Code?: string;
  code?: string;
  $metadata?: { httpStatusCode?: number };
}

export function errorCode(e: unknown): string | undefined {
  const err = e as S3Error | undefined;
  return err?.Code ?? err?.name;
}

/** A conditional write refused: 412 PreconditionFailed, or 409 ConditionalRequestConflict (one in flight). */
export function isConditionFailure(e: unknown): boolean {
  const code = errorCode(e);
  const status = (e as S3Error)?.$metadata?.httpStatusCode;
  return (
    code === 'PreconditionFailed' ||
    code === 'ConditionalRequestConflict' ||
    status === 412 ||
    (status === 409 && code === 'ConditionalRequestConflict')
  );
}

export function isMissing(e: unknown): boolean {
  const code = errorCode(e);
  return code === 'NotFound' || code === 'NoSuchKey' || code === 'NoSuchUpload' || (e as S3Error)?.$metadata?.httpStatusCode === 404;
}

/** 501 NotImplemented / 405 MethodNotAllowed: the endpoint lacks the operation (s3rver). */
export function isUnsupported(e: unknown): boolean {
  const code = errorCode(e);
  const status = (e as S3Error)?.$metadata?.httpStatusCode;
  return code === 'NotImplemented' || code === 'MethodNotAllowed' || status === 501 || status === 405;
}

const THROTTLE_CODES = new Set(['SlowDown', 'Throttling', 'ThrottlingException', 'RequestLimitExceeded']);

/** The contract error for a failed S3 request about `key` (after the SDK's own retries). */
export function mapS3Error(e: unknown, key: string, bucket: string): Error {
  if (e instanceof AlpError) return e;
  const code = errorCode(e);
  const status = (e as S3Error).$metadata?.httpStatusCode;
  if (code === 'NoSuchKey' || code === 'NotFound') return new NotFound(`no object at ${key}`);
  if (code === 'NoSuchBucket') return new InternalError(`S3 bucket ${bucket} does not exist`, { cause: e });
  // GetObject (and CopyObject's source) of a GLACIER / DEEP_ARCHIVE object that was not restored.
  if (code === 'InvalidObjectState') return new ArchivedCold(key, { bucket });
  if ((code !== undefined && THROTTLE_CODES.has(code)) || status === 503) {
    return new Throttled(`S3 asked to slow down (${code}); retry later`, { key }, { cause: e });
  }
  if (code === 'AccessDenied' || code === 'InvalidAccessKeyId' || code === 'SignatureDoesNotMatch') {
    return new InternalError(`S3 refused access to ${bucket}: ${code}`, { cause: e });
  }
  const network = networkFailure(e, bucket);
  if (network) return network;
  const message = e instanceof Error ? e.message : String(e);
  return new InternalError(`S3 request for ${key} in ${bucket} failed: ${code ?? ''} ${message}`.trim(), { cause: e });
}

/**
 * No answer from S3: a refused connection never reached it (Throttled, as on the ItemStore: retry
 * later, check the endpoint); a timeout or a lost connection may have applied a write (StorageFailure).
 */
function networkFailure(e: unknown, bucket: string): Error | undefined {
  const errno = (e as S3Error).code;
  if (errno === 'ECONNREFUSED') {
    return new Throttled(`the S3 endpoint of bucket ${bucket} refused the connection (is the endpoint right?)`, { bucket }, { cause: e });
  }
  return storageFailureOf(e);
}
