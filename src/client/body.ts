/**
 * Upload bodies. Bytes, text and Blobs are hashed before they are sent, so the request carries
 * `Repr-Digest` (RFC 9530) and the server stores nothing unless the bytes it received match; they can
 * be sent again, so a create is retried safely. A stream (a Node stream or file, client/node.ts, or a
 * web ReadableStream) is sent as it is read: with a digest given up front it carries `Repr-Digest`
 * too; without one it is hashed on its way out and the digest the server recorded is compared with it
 * afterwards. A stream is read once, so a request with one is not retried.
 */
import { type Digest, digestOfBytes } from './digest.ts';
import type { Sha256Factory } from './sha256.ts';

export type BodyChunks = Uint8Array | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

/** Where an upload's bytes come from, for each attempt. */
export interface UploadSource {
  /** The bytes for one attempt; called again for a retry when `replayable`. */
  open(): BodyChunks | Promise<BodyChunks>;
  /** The number of bytes, when known. */
  size?: number | undefined;
  /** Their sha256, when known before sending (sent as `Repr-Digest`). */
  digest?: Digest | undefined;
  replayable: boolean;
}

export type UploadBody = Uint8Array | ArrayBuffer | string | Blob | ReadableStream<Uint8Array> | UploadSource;

function isSource(b: UploadBody): b is UploadSource {
  return typeof (b as UploadSource).open === 'function' && typeof (b as UploadSource).replayable === 'boolean';
}

export async function uploadSource(body: UploadBody, hasher: Sha256Factory): Promise<UploadSource> {
  if (isSource(body)) return body;
  if (typeof body === 'string' || body instanceof Uint8Array || body instanceof ArrayBuffer) {
    const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body instanceof ArrayBuffer ? new Uint8Array(body) : body;
    return { open: () => bytes, size: bytes.length, digest: digestOfBytes(bytes, hasher), replayable: true };
  }
  if (typeof Blob !== 'undefined' && body instanceof Blob) {
    const h = hasher();
    for await (const chunk of chunksOf(body.stream())) h.update(chunk);
    return { open: () => body, size: body.size, digest: `sha256:${h.hex()}`, replayable: true };
  }
  const stream = body as ReadableStream<Uint8Array>;
  return { open: () => stream, replayable: false };
}

export async function* chunksOf(source: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  if (Symbol.asyncIterator in source) {
    for await (const c of source as AsyncIterable<Uint8Array>) yield c;
    return;
  }
  const reader = (source as ReadableStream<Uint8Array>).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

/** One attempt's request body, and the digest of what it sent (known up front, or hashed on the way). */
export interface PreparedBody {
  body: Uint8Array | Blob | ReadableStream<Uint8Array>;
  streamed: boolean;
  sent(): Digest | undefined;
}

export async function bodyOf(source: UploadSource, hasher: Sha256Factory): Promise<PreparedBody> {
  const opened = await source.open();
  if (opened instanceof Uint8Array || (typeof Blob !== 'undefined' && opened instanceof Blob)) {
    return { body: opened, streamed: false, sent: () => source.digest };
  }
  const h = source.digest ? undefined : hasher();
  let finished: Digest | undefined;
  const it = chunksOf(opened as ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>);
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await it.next();
      if (done) {
        if (h) finished = `sha256:${h.hex()}`;
        controller.close();
        return;
      }
      // A Node Buffer may share a pooled ArrayBuffer: send a view of exactly its bytes.
      const chunk = new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
      h?.update(chunk);
      controller.enqueue(chunk);
    },
    async cancel() {
      await it.return(undefined);
    },
  });
  return { body, streamed: true, sent: () => source.digest ?? finished };
}
