/**
 * A staged object's temp file, held by its descriptor and driven through the callback API: each call
 * is one trip through the I/O pool, without a FileHandle's promise bookkeeping (a 4 KiB creation makes
 * ~10 such calls). Once its fsync has succeeded a temp file holds nothing dirty, so closing it is a
 * microsecond syscall, done on this thread (`closeSynced`) rather than through the pool; a file that
 * may still hold unwritten pages (a refused or discarded stage) is closed in the pool (`closeInPool`):
 * some file systems (NFS) write them back on close.
 */
import { close, closeSync, fdatasync, fsync, open, write } from 'node:fs';

export function openTempFile(file: string, flags: number, mode: number): Promise<number> {
  return new Promise((resolve, reject) => open(file, flags, mode, (e, fd) => (e ? reject(e) : resolve(fd))));
}

/** Writes `length` bytes of `buf` from `offset` at `position`; resolves with the bytes written (may be fewer). */
export function writeAt(fd: number, buf: Uint8Array, offset: number, length: number, position: number): Promise<number> {
  return new Promise((resolve, reject) => write(fd, buf, offset, length, position, (e, n) => (e ? reject(e) : resolve(n))));
}

/** A data sync started while the file is still being written (core/fsync.ts WritebackAhead). */
export function datasyncFile(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fdatasync(fd, (e) => (e ? reject(e) : resolve())));
}

export function fsyncFile(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fsync(fd, (e) => (e ? reject(e) : resolve())));
}

/**
 * Closes a file whose fsync has succeeded. Never throws: its bytes are durable already, and Linux
 * releases the descriptor even when close reports an error (so it must never be closed again).
 */
export function closeSynced(fd: number): void {
  try {
    closeSync(fd);
  } catch {}
}

/** Closes a file that may hold unwritten pages; never fails (the caller is already failing or discarding). */
export function closeInPool(fd: number): Promise<void> {
  return new Promise((resolve) => close(fd, () => resolve()));
}
