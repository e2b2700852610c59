/**
 * Writes an upload's body to its temp file and hashes it (FsContentStore.stage). A body that may be
 * larger than one slot is gathered into pooled SharedArrayBuffer slots (hash-pool.ts): each full slot
 * is hashed on the worker while it is written at its offset, and is gathered into again only when both
 * are done — one copy per byte (the gathering), no per-write allocation, no hashing on this thread.
 * A body declared (or, an in-memory array, known) no larger than WORKER_MIN_BYTES is hashed here,
 * written chunk by chunk.
 */
import { type Digest, DigestAccumulator } from '../../core/digest.ts';
import { TooLarge } from '../../core/errors.ts';
import { WritebackAhead } from '../../core/fsync.ts';
import { type Body, knownBodySize, type PutOptions } from '../content-store.ts';
import { HashSession, SLOT_BYTES, SLOTS, WORKER_MIN_BYTES } from '../hash-pool.ts';
import { datasyncFile, writeAt as writeSome } from './temp-file.ts';

export interface Written {
  digest: Digest;
  size: number;
}

type WriteError = (e: unknown) => Error;

export async function writeBody(fd: number, body: Body, opts: PutOptions, diskError: WriteError): Promise<Written> {
  const size = knownBodySize(body, opts);
  const small = size !== undefined && size <= WORKER_MIN_BYTES;
  const session = small ? undefined : HashSession.open();
  if (!session) return writeHashingHere(fd, body, opts, diskError);
  try {
    return await writeHashingOnWorker(session, fd, body, opts, diskError);
  } finally {
    session.close();
  }
}

function checkLimit(size: number, opts: PutOptions): void {
  if (opts.maxBytes !== undefined && size > opts.maxBytes) {
    throw new TooLarge(`content exceeds the limit of ${opts.maxBytes} bytes`, { limit: opts.maxBytes });
  }
}

function asBuffer(chunk: Uint8Array): Buffer {
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

async function writeAt(fd: number, buf: Buffer, position: number): Promise<void> {
  let offset = 0;
  while (offset < buf.length) offset += await writeSome(fd, buf, offset, buf.length - offset, position + offset);
}

async function writeHashingHere(fd: number, body: Body, opts: PutOptions, diskError: WriteError): Promise<Written> {
  const acc = new DigestAccumulator();
  let pending: Promise<void> = Promise.resolve();
  for await (const chunk of body) {
    opts.signal?.throwIfAborted();
    const buf = asBuffer(chunk);
    const at = acc.size;
    acc.update(buf);
    checkLimit(acc.size, opts);
    // Hash the next chunk while the previous one is being written.
    await pending;
    pending = writeAt(fd, buf, at).catch((e: unknown) => {
      throw diskError(e);
    });
  }
  await pending;
  return { digest: acc.digest(), size: acc.size };
}

async function writeHashingOnWorker(
  session: HashSession,
  fd: number,
  body: Body,
  opts: PutOptions,
  diskError: WriteError,
): Promise<Written> {
  const busy: Promise<unknown>[] = session.slots.map(() => Promise.resolve());
  let slot = 0;
  let fill = 0;
  let size = 0;
  let dispatched = 0;
  const writeback = new WritebackAhead(() => datasyncFile(fd));
  const dispatch = async () => {
    const view = (session.slots[slot] as Buffer).subarray(0, fill);
    const write = writeAt(fd, view, dispatched)
      .then(() => writeback.wrote(view.length))
      .catch((e: unknown) => Promise.reject(diskError(e)));
    dispatched += fill;
    const work = Promise.all([session.hash(slot, fill), write]);
    // Awaited when the slot comes round again or at the end; never an unhandled rejection meanwhile.
    work.catch(() => {});
    busy[slot] = work;
    slot = (slot + 1) % SLOTS;
    fill = 0;
    await busy[slot];
  };
  try {
    for await (const chunk of body) {
      opts.signal?.throwIfAborted();
      const buf = asBuffer(chunk);
      size += buf.length;
      checkLimit(size, opts);
      for (let from = 0; from < buf.length; ) {
        const n = Math.min(buf.length - from, SLOT_BYTES - fill);
        buf.copy(session.slots[slot] as Buffer, fill, from, from + n);
        fill += n;
        from += n;
        if (fill === SLOT_BYTES) await dispatch();
      }
    }
    if (fill > 0) await dispatch();
    await Promise.all(busy);
    await writeback.settle().catch((e: unknown) => Promise.reject(diskError(e)));
    return { digest: await session.digest(), size };
  } finally {
    // The slots go back to the pool (and the descriptor to its owner) only when nothing hashes,
    // writes or syncs them any more.
    await Promise.allSettled([...busy, writeback.settle()]);
  }
}
