import { Transform, type TransformCallback } from 'node:stream';
import { type Digest, DigestAccumulator } from '../core/digest.ts';
import { IntegrityError } from '../core/errors.ts';

export interface VerifyOptions {
  key: string;
  expectedDigest: Digest;
  expectedSize?: number | undefined;
  start?: number | undefined;
  end?: number | undefined;
  onFailure?: ((e: IntegrityError) => void) | undefined;
}

/**
 * The verification rule of every read, whoever hashes: chunks arrive in order, the requested range
 * is cut from them, and the last chunk of the range is held back until the whole object has been
 * hashed and matched its digest and size. On a mismatch nothing more is released, so a consumer never
 * receives the tail and cannot mistake wrong bytes for a complete object. `tag` lets a caller that
 * reuses buffers know which one is still held.
 */
export class HeldRange {
  private held: { chunk: Buffer; tag: number } | undefined;
  private offset = 0;
  private readonly rangeStart: number;
  private readonly rangeEnd: number;

  constructor(private readonly opts: VerifyOptions) {
    this.rangeStart = opts.start ?? 0;
    this.rangeEnd = opts.end ?? Number.POSITIVE_INFINITY;
  }

  /** The tag of the chunk held back now, if any. */
  get heldTag(): number | undefined {
    return this.held?.tag;
  }

  /** Takes the next chunk read; returns the chunk that may be released now (the one held before), if any. */
  next(chunk: Buffer, tag = 0): { chunk: Buffer; tag: number } | undefined {
    const chunkStart = this.offset;
    this.offset += chunk.length;
    if (this.opts.expectedSize !== undefined && this.offset > this.opts.expectedSize) {
      throw this.fail(`object ${this.opts.key} is longer than its recorded ${this.opts.expectedSize} bytes`);
    }
    const from = Math.max(this.rangeStart, chunkStart);
    const to = Math.min(this.rangeEnd + 1, this.offset);
    if (to <= from) return undefined;
    const release = this.held;
    this.held = { chunk: chunk.subarray(from - chunkStart, to - chunkStart), tag };
    return release;
  }

  /** After the last chunk: the held tail when the digest and size match; an IntegrityError otherwise. */
  finish(actual: Digest): Buffer | undefined {
    const size = this.offset;
    if (actual !== this.opts.expectedDigest || (this.opts.expectedSize !== undefined && size !== this.opts.expectedSize)) {
      throw this.fail(
        `object ${this.opts.key} does not match its digest: expected ${this.opts.expectedDigest}, read ${actual} (${size} bytes)`,
      );
    }
    const tail = this.held?.chunk;
    this.held = undefined;
    return tail;
  }

  /** Drops the held chunk and reports the failure. */
  private fail(message: string): IntegrityError {
    this.held = undefined;
    const err = new IntegrityError(message, { key: this.opts.key, expected: this.opts.expectedDigest });
    this.opts.onFailure?.(err);
    return err;
  }
}

/**
 * Hashes every byte that passes, forwards only the requested range, and holds the last forwarded
 * chunk back until the whole object has been hashed (HeldRange): on a mismatch the stream errors and
 * the consumer never receives the tail.
 */
export class VerifyingStream extends Transform {
  private readonly acc = new DigestAccumulator();
  private readonly range: HeldRange;

  constructor(opts: VerifyOptions) {
    super({ highWaterMark: 1 << 20 });
    this.range = new HeldRange(opts);
    // A small object can be fully read and fail verification before the consumer attaches; the error
    // stays on the stream (`errored`) and is thrown to whoever reads it, instead of crashing the process.
    this.on('error', () => {});
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.acc.update(chunk);
    try {
      const release = this.range.next(chunk);
      if (release) this.push(release.chunk);
    } catch (e) {
      cb(e as Error);
      return;
    }
    cb();
  }

  override _flush(cb: TransformCallback): void {
    try {
      const tail = this.range.finish(this.acc.digest());
      if (tail) this.push(tail);
    } catch (e) {
      cb(e as Error);
      return;
    }
    cb();
  }
}
