/**
 * The S3 engine's upload loop: a body of at most one part is one PutObject sent after the body ended;
 * a larger one is a multipart upload whose CompleteMultipartUpload is sent only after the body ended
 * cleanly (hashed, size and digest checked: s3-content-store.ts), so a failed put never leaves an
 * object. Replaces @aws-sdk/lib-storage Upload, whose part size is fixed for the whole upload.
 *
 * PART SIZES, so that uploads up to S3's 5 TiB object limit fit its 10,000 parts of 5 MiB–5 GiB:
 * - declared size (Content-Length, `--size`, a file): every part is partSizeFor(size) = max(base,
 *   ceil(size / maxParts) rounded up to 1 MiB): 8 MiB up to 78 GiB, 105 MiB for 1 TiB, 525 MiB for 5 TiB.
 * - unknown size (a stream): the part size doubles every maxParts / 10 parts (growingPartSize):
 *   1,000 parts of 8 MiB, then 1,000 of 16 MiB, … up to 4 GiB: 10,000 parts hold 7.99 TiB. A body
 *   that still does not fit fails with TOO_LARGE and its upload is aborted.
 * Memory: at most `queueSize` parts in flight plus the one being filled (for a 1 TiB stream the parts
 * near its end are 1 GiB: declare the size to keep them at 105 MiB).
 */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { TooLarge } from '../../core/errors.ts';
import type { StorageClass } from '../content-store.ts';

export const MiB = 1024 * 1024;
/** S3's limits: 10,000 parts, each 5 MiB–5 GiB (except the last), 5 TiB an object. */
export const S3_MAX_PARTS = 10_000;
export const S3_MAX_PART_BYTES = 5 * 1024 * MiB;
export const S3_MAX_OBJECT_BYTES = 5 * 1024 * 1024 * MiB;

export interface PartPlan {
  /** The smallest part (default 8 MiB; S3 needs at least 5 MiB). */
  base: number;
  /** Parts an upload may have (S3: 10,000). */
  maxParts: number;
  /** Declared-size parts are rounded up to a multiple of this (1 MiB). */
  align: number;
}

export const DEFAULT_PART_PLAN: PartPlan = { base: 8 * MiB, maxParts: S3_MAX_PARTS, align: MiB };

/** The part size for a body of a declared size: max(base, ceil(size / maxParts) rounded up to `align`). */
export function partSizeFor(size: number, plan: PartPlan = DEFAULT_PART_PLAN): number {
  const even = Math.ceil(size / plan.maxParts);
  return Math.max(plan.base, Math.ceil(even / plan.align) * plan.align);
}

/** The size of part `index` (0-based) of a body of unknown size: base doubled every maxParts / 10 parts. */
export function growingPartSize(index: number, plan: PartPlan = DEFAULT_PART_PLAN): number {
  const step = Math.max(1, Math.floor(plan.maxParts / 10));
  return Math.min(plan.base * 2 ** Math.floor(index / step), Math.max(plan.base, S3_MAX_PART_BYTES));
}

export interface UploadTarget {
  client: S3Client;
  params: { Bucket: string; Key: string; ContentType: string; StorageClass?: StorageClass; IfNoneMatch?: string };
  queueSize: number;
  plan: PartPlan;
  /** The declared size, when known: fixed parts of partSizeFor(size). */
  size?: number | undefined;
  signal?: AbortSignal;
}

function sendOpts(t: UploadTarget): { abortSignal?: AbortSignal } {
  return t.signal ? { abortSignal: t.signal } : {};
}

/** Collects the body into parts of the planned sizes; yields each full part and the last (maybe short). */
async function* parts(body: AsyncIterable<Buffer>, sizeOf: (i: number) => number): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let length = 0;
  let index = 0;
  for await (const chunk of body) {
    pending.push(chunk);
    length += chunk.length;
    for (let want = sizeOf(index); length >= want; want = sizeOf(index)) {
      const all = Buffer.concat(pending);
      yield all.subarray(0, want);
      const rest = all.subarray(want);
      pending = rest.length ? [rest] : [];
      length = rest.length;
      index++;
    }
  }
  if (length > 0 || index === 0) yield Buffer.concat(pending);
}

/** Uploads `body` (which ends cleanly only when it verified) to the target; see the module comment. */
export async function uploadBody(t: UploadTarget, body: AsyncIterable<Buffer>): Promise<void> {
  const sizeOf = t.size === undefined ? (i: number) => growingPartSize(i, t.plan) : () => partSizeFor(t.size as number, t.plan);
  const source = parts(body, sizeOf)[Symbol.asyncIterator]();
  const first = await source.next();
  const firstPart = first.done ? Buffer.alloc(0) : first.value;
  const second = await source.next();
  if (second.done) {
    await t.client.send(new PutObjectCommand({ ...t.params, Body: firstPart, ContentLength: firstPart.length }), sendOpts(t));
    return;
  }
  const { Bucket, Key } = t.params;
  const created = await t.client.send(
    new CreateMultipartUploadCommand({
      Bucket,
      Key,
      ContentType: t.params.ContentType,
      ...(t.params.StorageClass ? { StorageClass: t.params.StorageClass } : {}),
    }),
    sendOpts(t),
  );
  const UploadId = created.UploadId as string;
  try {
    const done = await uploadParts(t, UploadId, [firstPart, second.value], source);
    await t.client.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key,
        UploadId,
        MultipartUpload: { Parts: done },
        ...(t.params.IfNoneMatch ? { IfNoneMatch: t.params.IfNoneMatch } : {}),
      }),
      sendOpts(t),
    );
  } catch (e) {
    await t.client.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId })).catch(() => undefined);
    throw e;
  }
}

async function uploadParts(
  t: UploadTarget,
  UploadId: string,
  head: Buffer[],
  rest: AsyncIterator<Buffer>,
): Promise<Array<{ ETag: string; PartNumber: number }>> {
  const done: Array<{ ETag: string; PartNumber: number }> = [];
  const inFlight = new Set<Promise<void>>();
  let failure: unknown;
  let n = 0;
  const send = (part: Buffer) => {
    const PartNumber = ++n;
    if (PartNumber > t.plan.maxParts) {
      throw new TooLarge(`the body needs more than ${t.plan.maxParts} parts (S3's limit); declare its size or split it`, {
        parts: PartNumber,
      });
    }
    const p = t.client
      .send(
        new UploadPartCommand({ Bucket: t.params.Bucket, Key: t.params.Key, UploadId, PartNumber, Body: part, ContentLength: part.length }),
        {
          ...sendOpts(t),
        },
      )
      .then((out) => void done.push({ ETag: out.ETag as string, PartNumber }))
      .catch((e: unknown) => void (failure ??= e))
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  };
  const next = async () => {
    while (inFlight.size >= t.queueSize) await Promise.race(inFlight);
    if (failure !== undefined) throw failure;
  };
  for (const part of head) {
    await next();
    send(part);
  }
  for (let r = await rest.next(); !r.done; r = await rest.next()) {
    await next();
    send(r.value);
  }
  await Promise.all(inFlight);
  if (failure !== undefined) throw failure;
  return done.sort((a, b) => a.PartNumber - b.PartNumber);
}
