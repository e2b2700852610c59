/**
 * The merged history of an artifact: every chain entry in sequence order, read from the base table
 * and from the packed history segments the partition's `history_segment` items name (see
 * compaction.ts). This is the single place that reads chains: `alp history`, `audit verify` and
 * compaction all go through loadChain, so packed history is read transparently.
 */
import { gunzipSync } from 'node:zlib';
import { canonicalJson } from '../core/canonical-json.ts';
import type { Digest } from '../core/digest.ts';
import { AlpError, IntegrityError, NotFound } from '../core/errors.ts';
import { artifactPk, HEAD_SK } from '../core/keys.ts';
import type { HeadItem } from '../core/model.ts';
import { type Item, queryAll } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertReadable } from '../system/fence.ts';
import { hashedPart, isAuditType } from './chain.ts';

export const SEGMENT_TYPE = 'history_segment';

/** The item that records one packed segment (ART#{id} / SEG#{first_seq:10}). */
export interface SegmentItem extends Item {
  type: typeof SEGMENT_TYPE;
  artifact_id: string;
  first_seq: number;
  last_seq: number;
  entries: number;
  key: string;
  digest: Digest;
  /** Bytes of the gzip object. */
  size: number;
  /** Bytes of the JSON Lines before compression. */
  raw_bytes: number;
  /** prev_hash of the first packed entry and hash of the last: where the segment joins the chain. */
  first_prev_hash: string | null;
  last_hash: string;
  before: string;
  created_at: string;
}

export interface LoadedSegment {
  item: SegmentItem;
  /** The packed entries, in seq order (empty when the segment could not be read). */
  entries: Item[];
  /** Why the segment cannot be trusted, if it cannot. */
  problem?: string;
}

export interface LoadedChain {
  head: HeadItem | undefined;
  /** Audit entries ordered by seq: packed and hot merged, one per seq (the hot copy wins). */
  entries: Item[];
  /** Every other item of the partition (versions, hot audit items, segment items, ...). */
  live: Item[];
  segments: LoadedSegment[];
  /** Seqs held both hot and packed whose recorded parts differ (a copy was altered). */
  conflicts: Array<{ seq: number; hot: Item; packed: Item }>;
}

export function isSegmentItem(item: Item): item is SegmentItem {
  return item.type === SEGMENT_TYPE;
}

/** The JSON Lines a segment holds: the full items, canonical JSON, one per line. */
export function segmentLines(entries: Item[]): Buffer {
  return Buffer.from(entries.map((e) => `${canonicalJson(e)}\n`).join(''), 'utf8');
}

/**
 * Bounds on what a segment may hold, so that a damaged or hostile segment (a compression bomb, one
 * enormous line) fails with IntegrityError instead of exhausting memory or time. Compaction writes at
 * most 2,000 entries and 32 MiB of JSON Lines per segment (compaction.ts), each entry one table item
 * (DynamoDB: at most 400 KB); readers allow twice that.
 */
export const MAX_SEGMENT_OBJECT_BYTES = 64 * 1024 * 1024;
export const MAX_SEGMENT_RAW_BYTES = 64 * 1024 * 1024;
export const MAX_SEGMENT_LINE_BYTES = 1024 * 1024;

/**
 * Reads a segment object through the content store (digest verified while streaming, nothing parsed
 * before it verified) and parses it. `rawBytes` (the segment item's `raw_bytes`) is what the JSON Lines
 * must decompress to exactly; decompression stops one byte past it (or past MAX_SEGMENT_RAW_BYTES).
 */
export async function readSegmentObject(
  ctx: ServiceContext,
  key: string,
  digest: Digest,
  size?: number,
  rawBytes?: number,
): Promise<Item[]> {
  if (size !== undefined && !(Number.isSafeInteger(size) && size >= 0 && size <= MAX_SEGMENT_OBJECT_BYTES))
    throw new IntegrityError(`segment ${key} is recorded as ${String(size)} bytes; a segment is at most ${MAX_SEGMENT_OBJECT_BYTES}`);
  const stream = await ctx.content.get(key, digest, size === undefined ? {} : { expectedSize: size });
  const chunks: Buffer[] = [];
  let read = 0;
  for await (const c of stream) {
    read += (c as Uint8Array).length;
    if (read > MAX_SEGMENT_OBJECT_BYTES) {
      stream.destroy();
      throw new IntegrityError(`segment ${key} is larger than ${MAX_SEGMENT_OBJECT_BYTES} bytes`);
    }
    chunks.push(Buffer.from(c as Uint8Array));
  }
  const known = rawBytes !== undefined && Number.isSafeInteger(rawBytes) && rawBytes >= 0;
  const limit = Math.min(MAX_SEGMENT_RAW_BYTES, known ? rawBytes : MAX_SEGMENT_RAW_BYTES);
  let raw: Buffer;
  try {
    raw = gunzipSync(Buffer.concat(chunks), { maxOutputLength: limit + 1 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || e instanceof RangeError)
      throw new IntegrityError(`segment ${key} expands beyond ${limit} bytes${known ? ' (its recorded size)' : ''}; refusing it`);
    throw new IntegrityError(`segment ${key} is not valid gzip: ${(e as Error).message}`);
  }
  if (raw.length > limit || (known && raw.length !== rawBytes))
    throw new IntegrityError(
      `segment ${key} holds ${raw.length} bytes of JSON Lines where ${limit}${known ? ' are recorded' : ' at most are allowed'}`,
    );
  if (raw.length > 0 && raw[raw.length - 1] !== 0x0a) throw new IntegrityError(`segment ${key} does not end with a newline`);
  const items: Item[] = [];
  for (let start = 0, n = 1; start < raw.length; n++) {
    const end = raw.indexOf(0x0a, start);
    if (end - start > MAX_SEGMENT_LINE_BYTES)
      throw new IntegrityError(`segment ${key} line ${n} is ${end - start} bytes; a packed entry is at most ${MAX_SEGMENT_LINE_BYTES}`);
    const line = raw.toString('utf8', start, end);
    start = end + 1;
    try {
      const item = JSON.parse(line) as Item;
      if (typeof item !== 'object' || item === null || Array.isArray(item) || typeof item.PK !== 'string') throw new Error('not an item');
      items.push(item);
    } catch (e) {
      throw new IntegrityError(`segment ${key} line ${n} is not an item: ${(e as Error).message.slice(0, 200)}`);
    }
  }
  return items;
}

/** Loads and checks one segment: its object, and that it holds exactly the entries its item says. */
export async function loadSegment(ctx: ServiceContext, seg: SegmentItem): Promise<LoadedSegment> {
  try {
    const entries = await readSegmentObject(ctx, seg.key, seg.digest, seg.size, seg.raw_bytes);
    const expected = seg.last_seq - seg.first_seq + 1;
    if (entries.length !== expected || entries.length !== seg.entries)
      return { item: seg, entries: [], problem: `segment holds ${entries.length} entries where its item says ${seg.entries}` };
    for (const [i, e] of entries.entries()) {
      if (e.PK !== seg.PK || e.seq !== seg.first_seq + i || !isAuditType(e.type))
        return { item: seg, entries: [], problem: `segment line ${i + 1} is not audit entry ${seg.first_seq + i} of ${seg.PK}` };
    }
    if ((entries[0]?.prev_hash ?? null) !== seg.first_prev_hash)
      return { item: seg, entries, problem: 'first packed entry does not link where the segment item says' };
    if (entries[entries.length - 1]?.hash !== seg.last_hash)
      return { item: seg, entries, problem: 'last packed entry is not the hash the segment item records' };
    return { item: seg, entries };
  } catch (e) {
    if (e instanceof NotFound) return { item: seg, entries: [], problem: `segment object ${seg.key} is missing` };
    if (e instanceof AlpError && e.code === 'INTEGRITY') return { item: seg, entries: [], problem: e.message };
    throw e;
  }
}

/**
 * Reads an artifact's partition and its packed segments. By default a segment that is missing, does
 * not match its digest or does not hold what its item says fails with IntegrityError; with
 * `tolerant` (audit verify) it is reported in `segments[].problem` and its entries are left out.
 */
export async function loadChain(ctx: ServiceContext, artifactId: string, opts: { tolerant?: boolean } = {}): Promise<LoadedChain> {
  const all = await queryAll(ctx.items, { pk: artifactPk(artifactId), consistent: true });
  const head = all.find((i) => i.SK === HEAD_SK) as HeadItem | undefined;
  const segments: LoadedSegment[] = [];
  for (const seg of all.filter(isSegmentItem).sort((a, b) => a.first_seq - b.first_seq)) {
    const loaded = await loadSegment(ctx, seg);
    if (loaded.problem && !opts.tolerant) throw new IntegrityError(`history of ${artifactId}: ${loaded.problem}`, { segment: seg.SK });
    segments.push(loaded);
  }
  const bySeq = new Map<number, Item>();
  for (const s of segments) for (const e of s.entries) if (!bySeq.has(e.seq as number)) bySeq.set(e.seq as number, e);
  const conflicts: LoadedChain['conflicts'] = [];
  const hot = all.filter((i) => isAuditType(i.type));
  for (const e of hot) {
    const seq = e.seq as number;
    const packed = bySeq.get(seq);
    if (packed && packed !== e && canonicalJson(hashedPart(packed)) !== canonicalJson(hashedPart(e)))
      conflicts.push({ seq, hot: e, packed });
    bySeq.set(seq, e);
  }
  const entries = [...bySeq.values()].sort((a, b) => (a.seq as number) - (b.seq as number));
  const live = all.filter((i) => i.SK !== HEAD_SK);
  return { head, entries, live, segments, conflicts };
}

/** A readable entry: its type, sequence, time, actor and the fields that say what happened. */
export function entryView(e: Item): Record<string, unknown> {
  const { PK: _p, SK: _s, GSI1PK: _g, GSI1SK: _h, artifact_id: _a, prev_hash: _prev, ...rest } = e;
  return rest;
}

/** The entry as it was recorded (without view fields that change later), plus its hash. */
export function recordedView(e: Item): Record<string, unknown> {
  return { ...entryView(hashedPart(e) as Item), hash: e.hash };
}

/** A user's read of a history (packed segments are content reads: refused while readers are fenced). */
export async function history(ctx: ServiceContext, artifactId: string): Promise<Record<string, unknown>[]> {
  await assertReadable(ctx, { kind: 'artifacts', ids: [artifactId] });
  const { head, entries } = await loadChain(ctx, artifactId);
  if (!head) throw new NotFound(`no artifact ${artifactId}`);
  return entries.map(recordedView);
}
