/** Durability of directory entries: the one fsync of a directory every writer uses. */
import { constants as C, closeSync, fsync, openSync } from 'node:fs';

/**
 * Makes the entries of `dir` (files created, linked, renamed or removed in it) durable. Opening and
 * closing a directory are microsecond syscalls; only the fsync goes to the thread pool.
 */
export async function fsyncDir(dir: string): Promise<void> {
  const fd = openSync(dir, C.O_RDONLY | C.O_DIRECTORY);
  try {
    await new Promise<void>((resolve, reject) => fsync(fd, (e) => (e ? reject(e) : resolve())));
  } finally {
    closeSync(fd);
  }
}
