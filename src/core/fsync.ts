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

/**
 * Starts the writeback of a large file while it is still being written: after every `every` bytes a
 * data sync is issued in the background (one at a time, never awaited by the writer), so the final
 * fsync — which the durability rules still require before the file is used — finds most pages clean
 * instead of flushing the whole file serially after the transfer (issue 18: 512 MiB through the CLI).
 * A background sync's failure is kept and reported by `settle`: the file is not durable then.
 */
export class WritebackAhead {
  private sinceLast = 0;
  private inFlight: Promise<void> | undefined;
  private failure: unknown;

  constructor(
    private readonly datasync: () => Promise<void>,
    private readonly every = 16 * 1024 * 1024,
  ) {}

  wrote(bytes: number): void {
    this.sinceLast += bytes;
    if (this.sinceLast < this.every || this.inFlight) return;
    this.sinceLast = 0;
    this.inFlight = this.datasync()
      .catch((e: unknown) => {
        this.failure ??= e;
      })
      .finally(() => {
        this.inFlight = undefined;
      });
  }

  /** Waits for the sync in flight; throws what any background sync failed with. */
  async settle(): Promise<void> {
    await this.inFlight;
    if (this.failure !== undefined) throw this.failure;
  }
}
