/**
 * Finds `sha256:` + 64 lowercase hex strings in a byte stream read in 64 KiB chunks, including matches
 * that straddle two chunks, and inside gzip members (decompressed with a bound, so a compression bomb
 * fails the scan instead of exhausting memory or time).
 */

import { once } from 'node:events';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { IntegrityError, InvalidInput } from '../core/errors.ts';

export const SCAN_CHUNK_BYTES = 64 * 1024;
/** A match is 71 bytes; keeping the last 70 of a chunk finds one that straddles the boundary. */
const CARRY = 'sha256:'.length + 64 - 1;
const PATTERN = /sha256:[0-9a-f]{64}/g;
export const MAX_DECOMPRESSED_BYTES = 1024 * 1024 * 1024;

/** Collects digests from chunks of any size, re-cut to 64 KiB reads. */
export class DigestScanner {
  private carry = '';
  readonly found = new Set<string>();
  bytes = 0;

  push(chunk: Buffer): void {
    for (let off = 0; off < chunk.length; off += SCAN_CHUNK_BYTES) {
      const part = chunk.subarray(off, Math.min(chunk.length, off + SCAN_CHUNK_BYTES));
      this.bytes += part.length;
      // latin1 maps every byte to one code unit, so offsets and the ASCII pattern stay exact.
      const text = this.carry + part.toString('latin1');
      PATTERN.lastIndex = 0;
      for (let m = PATTERN.exec(text); m; m = PATTERN.exec(text)) this.found.add(m[0]);
      this.carry = text.slice(-CARRY);
    }
  }
}

function isGzip(head: Buffer): boolean {
  return head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b;
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
  const unreadable = (why: string) =>
    new IntegrityError(`${what} ${why}; the references inside it cannot be read, so nothing is reclaimed`, { object: what });
  const raw = new DigestScanner();
  let gunzip: ReturnType<typeof createGunzip> | undefined;
  let inflated: DigestScanner | undefined;
  let inflating: Promise<void> | undefined;
  let first = true;
  for await (const c of source) {
    const chunk = Buffer.isBuffer(c) ? c : Buffer.from(c);
    if (first && requireGzip && !isGzip(chunk)) throw unreadable('is not gzip');
    if (first && isGzip(chunk)) {
      gunzip = createGunzip();
      const scanner = new DigestScanner();
      inflated = scanner;
      const g = gunzip;
      inflating = (async () => {
        for await (const d of g as AsyncIterable<Buffer>) {
          scanner.push(d);
          if (scanner.bytes > maxDecompressed) {
            const bomb = new InvalidInput(
              `${what} expands beyond ${maxDecompressed} bytes when decompressed; refusing to scan it, so the references inside it cannot be known and nothing is reclaimed`,
              { object: what, limit: maxDecompressed },
            );
            g.destroy(bomb);
            throw bomb;
          }
        }
      })();
      inflating.catch(() => {});
    }
    first = false;
    raw.push(chunk);
    if (gunzip && !gunzip.destroyed && !gunzip.write(chunk)) {
      // once() rejects if the inflater fails (a bomb, bad data) instead of waiting for 'drain' forever.
      await Promise.race([once(gunzip, 'drain'), inflating]).catch(async (e: unknown) => {
        if (e instanceof InvalidInput) throw e;
      });
    }
  }
  if (first && requireGzip) throw unreadable('is empty');
  if (gunzip && inflating && inflated) {
    gunzip.end();
    try {
      await inflating;
    } catch (e) {
      gunzip.destroy();
      // Not valid gzip after all: the raw scan stands (unless gzip is required). A bomb is an error.
      if (e instanceof InvalidInput) throw e;
      if (requireGzip) throw unreadable(`is not valid gzip (${(e as Error).message})`);
    }
    for (const d of inflated.found) raw.found.add(d);
  }
  return raw.found;
}

export function scanBuffer(data: Buffer): Promise<Set<string>> {
  return scanForDigests(Readable.from([data]));
}
