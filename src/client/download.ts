/**
 * Verified downloads. The server sends the digest of the whole representation (`Repr-Digest`, RFC
 * 9530; `ETag` is the quoted `sha256:{hex}`); the client hashes every byte again as it reads and
 * holds the last chunk back until the digest and the length matched, so a reader never sees the end
 * of wrong bytes: the stream errors with an IntegrityError instead. A body cut off early (the server
 * aborts a download whose stored bytes fail its own check) is refused the same way.
 */
import { IntegrityError } from '../core/errors.ts';
import { type Digest, fromReprDigest } from './digest.ts';
import type { Sha256Factory } from './sha256.ts';

/** What the headers of a content or output answer say. */
export interface RepresentationInfo {
  /** The digest of the whole representation. */
  digest: Digest;
  /** Its size in bytes. */
  size: number;
  etag: string | undefined;
  /** The recorded filename (from Content-Disposition), when given. */
  filename: string | undefined;
}

export function representationOf(res: Response): RepresentationInfo {
  const digest = fromReprDigest(res.headers.get('repr-digest'));
  if (!digest) throw new IntegrityError('the answer carries no sha-256 Repr-Digest: its bytes cannot be verified', { status: res.status });
  const range = /\/(\d+)\s*$/.exec(res.headers.get('content-range') ?? '');
  const size = Number(range ? range[1] : (res.headers.get('content-length') ?? Number.NaN));
  const cd = /filename\*=UTF-8''([^;]+)/i.exec(res.headers.get('content-disposition') ?? '');
  return { digest, size, etag: res.headers.get('etag') ?? undefined, filename: cd?.[1] ? safeDecode(cd[1]) : undefined };
}

function safeDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/** A whole download, verified as it is read. Read it once: `stream()`, `bytes()` or `text()`. */
export class VerifiedDownload implements RepresentationInfo {
  readonly digest: Digest;
  readonly size: number;
  readonly etag: string | undefined;
  readonly filename: string | undefined;
  private used = false;

  constructor(
    private readonly res: Response,
    private readonly hasher: Sha256Factory,
    expected?: Digest,
  ) {
    const info = representationOf(res);
    if (expected && expected !== info.digest) {
      void res.body?.cancel().catch(() => {});
      throw new IntegrityError(`the server announces ${info.digest}, not the expected ${expected}`, { expected, announced: info.digest });
    }
    this.digest = info.digest;
    this.size = info.size;
    this.etag = info.etag;
    this.filename = info.filename;
  }

  get headers(): Headers {
    return this.res.headers;
  }

  /** The bytes as a web stream that errors (IntegrityError) instead of delivering its last chunk when they do not match. */
  stream(): ReadableStream<Uint8Array> {
    if (this.used) throw new Error('the download was already read');
    this.used = true;
    return verifying(this.res.body ?? emptyStream(), this.digest, this.size, this.hasher);
  }

  /** Every byte, once they are verified. */
  async bytes(): Promise<Uint8Array> {
    const out = new Uint8Array(this.size);
    let at = 0;
    const reader = this.stream().getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return out;
      out.set(value, at);
      at += value.length;
    }
  }

  async text(): Promise<string> {
    return new TextDecoder().decode(await this.bytes());
  }

  /** Drops the body unread. */
  async cancel(): Promise<void> {
    this.used = true;
    await this.res.body?.cancel().catch(() => {});
  }
}

function emptyStream(): ReadableStream<Uint8Array> {
  return new ReadableStream({ start: (c) => c.close() });
}

/** Passes `body` through, hashing it and holding the latest chunk back until the end is verified. */
export function verifying(
  body: ReadableStream<Uint8Array>,
  expected: Digest,
  size: number,
  hasher: Sha256Factory,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const h = hasher();
  let held: Uint8Array | undefined;
  let received = 0;
  const refuse = (message: string, details: Record<string, unknown>) =>
    new IntegrityError(message, { expected, size, received, ...details });
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        let next: Awaited<ReturnType<typeof reader.read>>;
        try {
          next = await reader.read();
        } catch (e) {
          const why = 'the server aborts a download whose stored bytes fail verification';
          controller.error(
            refuse(`the download was cut off after ${received} of ${size} bytes (${why}); nothing is verified`, { cause: String(e) }),
          );
          return;
        }
        if (next.done) {
          const actual: Digest = `sha256:${h.hex()}`;
          if (received !== size) controller.error(refuse(`received ${received} bytes, expected ${size}`, { actual }));
          else if (actual !== expected) controller.error(refuse(`the bytes received hash to ${actual}, not ${expected}`, { actual }));
          else {
            if (held) controller.enqueue(held);
            controller.close();
          }
          return;
        }
        const chunk = next.value;
        if (chunk.length === 0) continue;
        h.update(chunk);
        received += chunk.length;
        if (received > size) {
          await reader.cancel().catch(() => {});
          controller.error(refuse(`received more than the ${size} bytes announced`, {}));
          return;
        }
        const release = held;
        held = chunk;
        if (release) {
          controller.enqueue(release);
          return;
        }
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
}
