/**
 * The verified read of one file (FsContentStore.get): a Readable for any consumer, and a DirectRead
 * (direct-read.ts) for the transfers that move bytes to a socket or a file. Objects above
 * WORKER_MIN_BYTES (hash-pool.ts) are read into pooled SharedArrayBuffer slots and hashed on the worker thread
 * (hash-pool.ts) while the same bytes are written out; smaller ones are read in one buffer and hashed
 * here, where a trip to the worker would cost more than it saves. Either way HeldRange holds the
 * last chunk until the digest matched.
 */
import type { FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { DigestAccumulator } from '../../core/digest.ts';
import type { ChunkWrite, DirectRead } from '../direct-read.ts';
import { HashSession, SLOT_BYTES, SLOTS, WORKER_MIN_BYTES } from '../hash-pool.ts';
import { HeldRange, type VerifyOptions } from '../verify-stream.ts';

const MIN_READ = 16 * 1024;

export class VerifiedFileStream extends Readable implements DirectRead {
  private started = false;
  private demand: (() => void) | undefined;

  constructor(
    private readonly fh: FileHandle,
    private readonly size: number,
    private readonly opts: VerifyOptions,
  ) {
    super({ highWaterMark: SLOT_BYTES });
    // As VerifyingStream: an error before anyone reads stays on the stream for its reader.
    this.on('error', () => {});
  }

  sendTo(write: ChunkWrite): Promise<void> {
    this.started = true;
    return this.pump(write, false);
  }

  override _read(): void {
    if (this.started) {
      const wake = this.demand;
      this.demand = undefined;
      wake?.();
      return;
    }
    this.started = true;
    this.pump((chunk) => this.deliver(chunk), true).then(
      () => this.push(null),
      (e: unknown) => this.destroy(e as Error),
    );
  }

  override _destroy(err: Error | null, cb: (error?: Error | null) => void): void {
    const wake = this.demand;
    this.demand = undefined;
    wake?.();
    if (!this.started) {
      this.started = true;
      this.fh.close().catch(() => {});
    }
    cb(err);
  }

  private async deliver(chunk: Buffer): Promise<void> {
    if (this.destroyed) throw new Error('the read was destroyed');
    if (!this.push(chunk)) await new Promise<void>((r) => (this.demand = r));
  }

  private async pump(write: ChunkWrite, copySlots: boolean): Promise<void> {
    const range = new HeldRange(this.opts);
    const session = this.size > WORKER_MIN_BYTES ? HashSession.open() : undefined;
    try {
      if (!session) await this.pumpHere(range, write);
      // A Readable's consumer keeps its chunks: it gets copies, the slots stay the pump's.
      else await this.pumpShared(session, range, copySlots ? (c) => write(Buffer.from(c)) : write);
    } finally {
      session?.close();
      await this.fh.close().catch(() => {});
    }
  }

  /** Hashes on this thread; a buffer is read into until full, so a small object's EOF read needs no second one. */
  private async pumpHere(range: HeldRange, write: ChunkWrite): Promise<void> {
    const acc = new DigestAccumulator();
    const bufferBytes = Math.min(SLOT_BYTES, Math.max(MIN_READ, this.size + 1));
    let buf = Buffer.allocUnsafe(bufferBytes);
    let used = 0;
    for (let position = 0; ; ) {
      if (used === buf.length) {
        buf = Buffer.allocUnsafe(bufferBytes);
        used = 0;
      }
      const n = (await this.fh.read(buf, used, buf.length - used, position)).bytesRead;
      if (n === 0) break;
      const chunk = buf.subarray(used, used + n);
      position += n;
      used += n;
      acc.update(chunk);
      const release = range.next(chunk);
      if (release) await write(release.chunk);
    }
    const tail = range.finish(acc.digest());
    if (tail) await write(tail);
  }

  /**
   * Reads slot after slot; each is hashed on the worker while the previous one is written out, and is
   * read into again only when both its hash and its write have settled (never while it is held back).
   */
  private async pumpShared(session: HashSession, range: HeldRange, write: ChunkWrite): Promise<void> {
    const busy: Promise<unknown>[] = session.slots.map(() => Promise.resolve());
    const track = (slot: number, work: Promise<unknown>) => {
      const p = Promise.all([busy[slot], work]);
      // Awaited when the slot comes round again or at the end; never an unhandled rejection meanwhile.
      p.catch(() => {});
      busy[slot] = p;
    };
    try {
      let slot = 0;
      for (let position = 0; ; slot = (slot + 1) % SLOTS) {
        if (slot === range.heldTag) slot = (slot + 1) % SLOTS;
        await busy[slot];
        const buf = session.slots[slot] as Buffer;
        const n = (await this.fh.read(buf, 0, SLOT_BYTES, position)).bytesRead;
        if (n === 0) break;
        position += n;
        track(slot, session.hash(slot, n));
        const release = range.next(buf.subarray(0, n), slot);
        if (release) track(release.tag, write(release.chunk));
      }
      const tail = range.finish(await session.digest());
      if (tail) await write(tail);
      await Promise.all(busy);
    } finally {
      // The slots go back to the pool only when nothing reads, hashes or writes them any more.
      await Promise.allSettled(busy);
    }
  }
}
