/**
 * A verified read that hands its chunks straight to the consumer's writes, without stream layers:
 * `sendTo(write)` calls `write` with each chunk in order and reuses the chunk's memory once the
 * promise `write` returned has settled — so `write` must resolve only when it is done with the bytes
 * (a socket write's callback, a file write's completion). The verification rule is the stream's
 * (verify-stream.ts HeldRange): the last chunk is passed only after the whole object matched its
 * digest; on a mismatch `sendTo` rejects with an IntegrityError and the tail is never written.
 * Streams without the capability are read as streams (`sendChunks` does either).
 */
import type { Readable } from 'node:stream';

export type ChunkWrite = (chunk: Buffer) => Promise<void>;

export interface DirectRead {
  sendTo(write: ChunkWrite): Promise<void>;
}

/**
 * Hands every chunk of a verified read to `write`, in order: through the direct capability when the
 * stream has it (`reused`: the chunk's memory is reused once `write` settled), else by reading the
 * stream (the consumer may keep its chunks).
 */
export async function sendChunks(stream: Readable, write: (chunk: Buffer, reused: boolean) => Promise<void>): Promise<void> {
  const direct = directReadOf(stream);
  if (direct) return direct.sendTo((chunk) => write(chunk, true));
  for await (const chunk of stream) await write(chunk as Buffer, false);
}

export function directReadOf(stream: Readable): DirectRead | undefined {
  const candidate = stream as Readable & Partial<DirectRead>;
  return typeof candidate.sendTo === 'function' && !stream.readableDidRead && !stream.destroyed ? (candidate as DirectRead) : undefined;
}
