import { Transform, type TransformCallback } from 'node:stream';
import { type Digest, DigestAccumulator } from '../core/digest.ts';
import { IntegrityError } from '../core/errors.ts';

interface VerifyOptions {
  key: string;
  expectedDigest: Digest;
  expectedSize?: number | undefined;
  start?: number | undefined;
  end?: number | undefined;
  onFailure?: ((e: IntegrityError) => void) | undefined;
}

/**
 * Hashes every byte that passes, forwards only the requested range, and holds the last forwarded
 * chunk back until the whole object has been hashed: on a mismatch the stream errors and the consumer
 * never receives the tail, so it cannot mistake wrong bytes for a complete object.
 */
export class VerifyingStream extends Transform {
  private readonly acc = new DigestAccumulator();
  private held: Buffer | undefined;
  private offset = 0;
  private readonly rangeStart: number;
  private readonly rangeEnd: number;

  constructor(private readonly opts: VerifyOptions) {
    super({ highWaterMark: 1 << 20 });
    this.rangeStart = opts.start ?? 0;
    this.rangeEnd = opts.end ?? Number.POSITIVE_INFINITY;
    // A small object can be fully read and fail verification before the consumer attaches; the error
    // stays on the stream (`errored`) and is thrown to whoever reads it, instead of crashing the process.
    this.on('error', () => {});
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.acc.update(chunk);
    const chunkStart = this.offset;
    this.offset += chunk.length;
    if (this.opts.expectedSize !== undefined && this.offset > this.opts.expectedSize) {
      cb(this.fail(`object ${this.opts.key} is longer than its recorded ${this.opts.expectedSize} bytes`));
      return;
    }
    const from = Math.max(this.rangeStart, chunkStart);
    const to = Math.min(this.rangeEnd + 1, this.offset);
    if (to > from) {
      if (this.held) this.push(this.held);
      this.held = chunk.subarray(from - chunkStart, to - chunkStart);
    }
    cb();
  }

  override _flush(cb: TransformCallback): void {
    const actual = this.acc.digest();
    if (actual !== this.opts.expectedDigest || (this.opts.expectedSize !== undefined && this.acc.size !== this.opts.expectedSize)) {
      cb(
        this.fail(
          `object ${this.opts.key} does not match its digest: expected ${this.opts.expectedDigest}, read ${actual} (${this.acc.size} bytes)`,
        ),
      );
      return;
    }
    if (this.held) this.push(this.held);
    this.held = undefined;
    cb();
  }

  private fail(message: string): IntegrityError {
    this.held = undefined;
    const err = new IntegrityError(message, { key: this.opts.key, expected: this.opts.expectedDigest });
    this.opts.onFailure?.(err);
    return err;
  }
}
