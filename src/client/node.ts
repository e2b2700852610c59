/**
 * Node-only helpers of the client (`alp/client/node` is not imported by the browser-facing modules):
 * node:crypto hashing, uploads from a file path or a Node stream, a verified download as a Node
 * Readable that errors before its end when the bytes do not match, and saving one to a file that
 * appears only once every byte is verified.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as NodeWebStream } from 'node:stream/web';
import type { UploadSource } from './body.ts';
import { AlpClient, type AlpClientOptions } from './client.ts';
import type { Digest } from './digest.ts';
import type { VerifiedDownload } from './download.ts';
import type { Sha256Factory } from './sha256.ts';

export const nodeSha256: Sha256Factory = () => {
  const h = createHash('sha256');
  return { update: (chunk) => void h.update(chunk), hex: () => h.digest('hex') };
};

/** An AlpClient hashing with node:crypto. */
export function createNodeClient(opts: AlpClientOptions): AlpClient {
  return new AlpClient({ sha256: nodeSha256, ...opts });
}

const CHUNK = 1 << 20;

/** A file as an upload: hashed first (so the request carries Repr-Digest), then streamed; re-sent on a retry. */
export async function fileBody(path: string): Promise<UploadSource> {
  const { size } = await stat(path);
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: CHUNK })) h.update(chunk as Buffer);
  const digest: Digest = `sha256:${h.digest('hex')}`;
  return { open: () => createReadStream(path, { highWaterMark: CHUNK }), size, digest, replayable: true };
}

/** A Node stream (or any async iterable of bytes) as an upload: read once, so never retried. */
export function streamBody(stream: AsyncIterable<Uint8Array>, opts: { digest?: Digest; size?: number } = {}): UploadSource {
  let opened = false;
  return {
    open: () => {
      if (opened) throw new Error('a stream body can be sent once');
      opened = true;
      return stream;
    },
    size: opts.size,
    digest: opts.digest,
    replayable: false,
  };
}

/** The download as a Node Readable: it errors (IntegrityError) before its end if the bytes do not match. */
export function toNodeReadable(download: VerifiedDownload): Readable {
  return Readable.fromWeb(download.stream() as unknown as NodeWebStream<Uint8Array>);
}

/** Writes the verified bytes to `file`: a temporary file beside it, renamed only once every byte matched. */
export async function saveToFile(download: VerifiedDownload, file: string): Promise<void> {
  const temp = `${file}.partial-${randomBytes(6).toString('hex')}`;
  try {
    await pipeline(toNodeReadable(download), createWriteStream(temp, { flags: 'wx' }));
    await rename(temp, file);
  } catch (e) {
    await rm(temp, { force: true });
    throw e;
  }
}

/** Every byte of a Node stream into one buffer (small bodies, tests). */
export async function collect(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  await pipeline(
    stream,
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        parts.push(chunk);
        cb();
      },
    }),
  );
  return Buffer.concat(parts);
}
