/** How the fs engine's failures reach callers: the contract's NotFound / InvalidInput / IntegrityError / StorageFailure. */
import type { Stats } from 'node:fs';
import { AlpError, IntegrityError, InvalidInput, NotFound, StorageFailure, storageFailureOf } from '../../core/errors.ts';

export function mapFsError(e: unknown, key: string): Error {
  if (e instanceof AlpError) return e;
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'ENOTDIR') return new NotFound(`no object at ${key}`);
  if (code === 'ELOOP') return new InvalidInput(`refusing symlink inside the content root at ${key}`);
  // ENXIO: a socket (or a FIFO without a reader, opened for writing) at the path.
  if (code === 'ENXIO') return new IntegrityError(`${key} is not a regular file (a socket or device); refusing to read it`, { key });
  return diskError(e, key);
}

/**
 * A failing disk or directory as the contract's StorageFailure (disk full, I/O error, read-only file
 * system, no permission); the message keeps the errno. Anything else stays as it is (internal).
 */
export function diskError(e: unknown, key?: string): Error {
  if (e instanceof AlpError) return e;
  const storage = storageFailureOf(e);
  if (storage) return storage;
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'EACCES' || code === 'EPERM') {
    return new StorageFailure(`storage failure: ${code} (permission denied in the content root${key ? ` at ${key}` : ''})`, { cause: e });
  }
  return e as Error;
}

export function notRegular(key: string, stat: Stats): IntegrityError {
  const kind = stat.isFIFO()
    ? 'FIFO'
    : stat.isSocket()
      ? 'socket'
      : stat.isCharacterDevice() || stat.isBlockDevice()
        ? 'device'
        : 'special file';
  return new IntegrityError(`${key} is not a regular file (a ${kind}); refusing to read it`, { key, kind });
}
