/**
 * Finds `sha256:` + 64 lowercase hex strings in bytes read in 64 KiB chunks, including matches that
 * straddle two chunks, and inside gzip members (decompressed with a bound, so a compression bomb fails
 * the scan instead of exhausting memory or time).
 *
 * `ReferenceScanner` is the push form: bytes are pushed as they stream through a write (the pass that
 * hashes them, system/indexed-content.ts) or a read (`scanForDigests`, the retention scan), in chunks of
 * any size. Both forms find the same digests for the same bytes however they are cut: the gzip decision
 * waits for the first two bytes, and every chunk is re-cut to 64 KiB reads with a 70-byte carry.
 */

import { once } from 'node:events';
import { Readable } from 'node:stream';
import { createGunzip, type Gunzip } from 'node:zlib';
import { IntegrityError, InvalidInput } from './errors.ts';

export const SCAN_CHUNK_BYTES = 64 * 1024;
/** A match is 71 bytes; keeping the last 70 of a chunk finds one that straddles the boundary. */
const CARRY = 'sha256:'.length + 64 - 1;
export const MAX_DECOMPRESSED_BYTES = 1024 * 1024 * 1024;

const NEEDLE = Buffer.from('sha256:', 'latin1');
const HEX_LEN = 64;
/** Byte → whether it is a lowercase hex digit (the pattern's [0-9a-f]). */
const IS_HEX = new Uint8Array(256);
for (const c of Buffer.from('0123456789abcdef', 'latin1')) IS_HEX[c] = 1;

/**
 * Collects digests from chunks of any size, re-cut to 64 KiB reads. Finds what /sha256:[0-9a-f]{64}/g
 * finds over the whole stream (a match cannot overlap another: hex digits hold no "s"), by a native
 * search for "sha256:" and a check of the 64 bytes after it. A match cut by a read's end starts in the
 * last 70 bytes, which are carried and searched again joined to the next read's first 70.
 */
export class DigestScanner {
  private carry: Buffer = Buffer.alloc(0);
  bytes = 0;

  /** `found` may be shared with another scanner (a gzip object's raw and decompressed bytes). */
  constructor(readonly found = new Set<string>()) {}

  push(chunk: Buffer): void {
    for (let off = 0; off < chunk.length; off += SCAN_CHUNK_BYTES) {
      const part = chunk.subarray(off, Math.min(chunk.length, off + SCAN_CHUNK_BYTES));
      this.bytes += part.length;
      if (this.carry.length > 0) {
        // Only matches starting in the carried tail: those inside `part` are found below.
        const joint = Buffer.concat([this.carry, part.subarray(0, CARRY)]);
        this.search(joint, this.carry.length);
      }
      this.search(part, part.length);
      // Copied: the caller may reuse its buffer.
      this.carry =
        part.length >= CARRY
          ? Buffer.from(part.subarray(part.length - CARRY))
          : Buffer.from(Buffer.concat([this.carry, part]).subarray(-CARRY));
    }
  }

  /** Adds every complete match in `buf` that starts before `startsBefore`. */
  private search(buf: Buffer, startsBefore: number): void {
    for (let at = buf.indexOf(NEEDLE); at >= 0 && at < startsBefore; at = buf.indexOf(NEEDLE, at + 1)) {
      const end = at + NEEDLE.length + HEX_LEN;
      if (end > buf.length) return;
      let hex = true;
      for (let i = at + NEEDLE.length; i < end && hex; i++) hex = IS_HEX[buf[i] as number] === 1;
      if (hex) this.found.add(buf.toString('latin1', at, end));
    }
  }
}

function isGzip(head: Buffer): boolean {
  return head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b;
}

function toBuffer(c: Uint8Array): Buffer {
  return Buffer.isBuffer(c) ? c : Buffer.from(c.buffer, c.byteOffset, c.byteLength);
}

export interface ReferenceScannerOptions {
  /** Decompressed bytes of a gzip object past which the scan fails (INVALID): default 1 GiB. */
  maxDecompressed?: number;
  /** What is scanned (the object's key), named in errors. */
  what?: string;
  /** Packed history segments: bytes that are not whole, valid gzip fail with INTEGRITY. */
  requireGzip?: boolean;
  /**
   * Stop collecting past this many distinct digests and report `overflow` (the reference index holds
   * a bounded number per entry). Unset: no limit.
   */
  maxDigests?: number;
}

/**
 * Scans bytes pushed in chunks of any size; when they are gzip, scans the decompressed bytes as well
 * (conservative: both). `push` never throws (a write that tees its body through a scanner must not fail
 * because of the scan): a failure is kept in `failed`, stops the work, and `finish` rejects with it —
 * INVALID for a decompression bomb (the references past the bound cannot be known), INTEGRITY for
 * required gzip that is not. `finish` resolves to every digest found; with `maxDigests` set, check
 * `overflow` first: then the set is incomplete and must not be used as "the digests inside".
 */
export class ReferenceScanner {
  private readonly raw = new DigestScanner();
  private readonly maxDecompressed: number;
  private readonly what: string;
  private readonly requireGzip: boolean;
  private readonly maxDigests: number;
  private head: Buffer[] | undefined = [];
  private headBytes = 0;
  private gunzip: Gunzip | undefined;
  private inflating: Promise<void> | undefined;
  private failure: Error | undefined;
  private overflowed = false;
  private done = false;

  constructor(opts: ReferenceScannerOptions = {}) {
    this.maxDecompressed = opts.maxDecompressed ?? MAX_DECOMPRESSED_BYTES;
    this.what = opts.what ?? 'compressed content';
    this.requireGzip = opts.requireGzip === true;
    this.maxDigests = opts.maxDigests ?? Number.POSITIVE_INFINITY;
  }

  /** The error the scan failed with (then `finish` rejects with it), if it did. */
  get failed(): Error | undefined {
    return this.failure;
  }

  /** More than `maxDigests` distinct digests were found: the result is incomplete. */
  get overflow(): boolean {
    return this.overflowed;
  }

  /** Raw bytes pushed so far. */
  get bytes(): number {
    return this.raw.bytes + this.headBytes;
  }

  async push(chunk: Uint8Array): Promise<void> {
    if (this.done || this.failure || this.overflowed || chunk.length === 0) return;
    const buf = toBuffer(chunk);
    if (this.head) {
      // The gzip decision needs the first two bytes, however the stream is cut.
      this.head.push(buf);
      this.headBytes += buf.length;
      if (this.headBytes < 2) return;
      await this.decide();
      return;
    }
    await this.feed(buf);
  }

  /** Ends the scan: every digest found (see `overflow`), or the scan's failure. */
  async finish(): Promise<Set<string>> {
    if (this.done) throw this.failure ?? new InvalidInput('the scan already finished', { object: this.what });
    if (this.head && this.headBytes > 0) await this.decide();
    else if (this.head && this.requireGzip) this.fail(this.unreadable('is empty'));
    this.done = true;
    if (this.gunzip && this.inflating && !this.failure && !this.overflowed) {
      if (!this.gunzip.destroyed) this.gunzip.end();
      await this.inflating;
    }
    this.gunzip?.destroy();
    if (this.failure) throw this.failure;
    return this.raw.found;
  }

  /** Stops the scan (the write it followed failed): nothing more is decompressed. */
  abort(): void {
    if (this.done) return;
    this.done = true;
    this.fail(new InvalidInput(`the scan of ${this.what} was abandoned`, { object: this.what }));
  }

  private async decide(): Promise<void> {
    const head = Buffer.concat(this.head ?? []);
    this.head = undefined;
    this.headBytes = 0;
    if (this.requireGzip && !isGzip(head)) {
      this.fail(this.unreadable('is not gzip'));
      return;
    }
    if (isGzip(head)) this.startInflating();
    await this.feed(head);
  }

  private startInflating(): void {
    const g = createGunzip();
    // One set for the raw and the decompressed bytes: the result is their union either way.
    const scanner = new DigestScanner(this.raw.found);
    this.gunzip = g;
    this.inflating = (async () => {
      for await (const d of g as AsyncIterable<Buffer>) {
        scanner.push(d);
        if (scanner.bytes > this.maxDecompressed) {
          const bomb = new InvalidInput(
            `${this.what} expands beyond ${this.maxDecompressed} bytes when decompressed; refusing to scan it, so the references inside it cannot be known and nothing is reclaimed`,
            { object: this.what, limit: this.maxDecompressed },
          );
          this.fail(bomb);
          g.destroy(bomb);
          return;
        }
        if (scanner.found.size > this.maxDigests) {
          this.overflowNow();
          return;
        }
      }
    })().catch((e: unknown) => {
      if (this.failure) return;
      // Not valid gzip after all: the raw scan stands, unless gzip is required.
      // (What it decompressed before failing stays among the digests found: conservative.)
      if (this.requireGzip) this.fail(this.unreadable(`is not valid gzip (${(e as Error).message})`));
    });
  }

  private async feed(buf: Buffer): Promise<void> {
    this.raw.push(buf);
    if (this.raw.found.size > this.maxDigests) this.overflowNow();
    const g = this.gunzip;
    if (!g || g.destroyed || this.failure || this.overflowed) return;
    if (!g.write(buf)) {
      // The inflater's end (a bomb, bad data) settles the wait instead of a 'drain' that never comes.
      await Promise.race([once(g, 'drain'), this.inflating]).catch(() => {});
    }
  }

  private overflowNow(): void {
    this.overflowed = true;
    this.gunzip?.destroy();
  }

  private fail(e: Error): void {
    this.failure ??= e;
    this.gunzip?.destroy();
  }

  private unreadable(why: string): IntegrityError {
    return new IntegrityError(`${this.what} ${why}; the references inside it cannot be read, so nothing is reclaimed`, {
      object: this.what,
    });
  }
}

/**
 * Scans a stream's bytes for digests; when the stream is gzip, scans the decompressed bytes as well
 * (conservative: both). Throws INVALID when decompression exceeds `maxDecompressed`, naming `what` (the
 * object's key) so that the operator can find it: the references past the bound cannot be known, so a
 * reference scan that meets such an object fails closed. Content that merely starts like gzip and is
 * not is scanned as it is; but with `requireGzip` (packed history segments, which are always gzip)
 * content that is not whole, valid gzip fails with INTEGRITY, since the references inside are unknown.
 */
export async function scanForDigests(
  source: AsyncIterable<Uint8Array>,
  maxDecompressed = MAX_DECOMPRESSED_BYTES,
  what = 'compressed content',
  requireGzip = false,
): Promise<Set<string>> {
  const scanner = new ReferenceScanner({ maxDecompressed, what, requireGzip });
  try {
    for await (const c of source) {
      await scanner.push(c);
      // Fail early: a bomb or a segment that is not gzip is not read to its end.
      if (scanner.failed) throw scanner.failed;
    }
    return await scanner.finish();
  } finally {
    scanner.abort();
  }
}

export function scanBuffer(data: Buffer): Promise<Set<string>> {
  return scanForDigests(Readable.from([data]));
}
