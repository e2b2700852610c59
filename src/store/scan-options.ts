/**
 * The engine-independent parts of segmented scans and change marks (item-store.ts, ScanOptions and
 * scanChangedSince): argument checks, the cursor namespace of a segment, and the hash that places a
 * partition in a segment on engines that compute it themselves (SQLite).
 */
import { InvalidInput } from '../core/errors.ts';
import { type ItemStore, MAX_SCAN_SEGMENTS, type ScanOptions } from './item-store.ts';

export interface Segment {
  segment: number;
  total: number;
}

/** The segment a scan asks for (undefined: the whole table); InvalidInput for bad arguments. */
export function scanSegment(opts: ScanOptions): Segment | undefined {
  const { segment, totalSegments: total } = opts;
  if (segment === undefined && total === undefined) return undefined;
  if (segment === undefined || total === undefined) throw new InvalidInput('a segmented scan needs both segment and totalSegments');
  if (!Number.isInteger(total) || total < 1 || total > MAX_SCAN_SEGMENTS) {
    throw new InvalidInput(`totalSegments must be an integer from 1 to ${MAX_SCAN_SEGMENTS}, got ${String(total)}`);
  }
  if (!Number.isInteger(segment) || segment < 0 || segment >= total) {
    throw new InvalidInput(`segment must be an integer from 0 to ${total - 1}, got ${String(segment)}`);
  }
  return { segment, total };
}

/**
 * The `pk` a scan's cursor is bound to (semantics.ts encodeCursor / decodeCursor): the whole table is
 * '*', a segment names itself, and a change scan names its mark, so a cursor of another scan is refused.
 */
export function scanCursorScope(seg: Segment | undefined, mark?: string): string {
  const base = seg ? `*seg:${seg.segment}/${seg.total}` : '*';
  return mark === undefined ? base : `${base}@${mark}`;
}

/** ItemStore.scanSegments, or 1 for a store (a wrapper, a proxy) that does not say. */
export function scanParallelism(items: Pick<ItemStore, 'scanSegments'>): number {
  const n = (items as { scanSegments?: unknown }).scanSegments;
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 ? Math.min(n, MAX_SCAN_SEGMENTS) : 1;
}

/** 2^32: partition hashes are unsigned 32-bit integers. */
export const HASH_SPACE = 0x1_0000_0000;

/**
 * A stable, well-spread 32-bit hash of a partition key: FNV-1a over its UTF-16 code units, then
 * MurmurHash3's finaliser (fmix32) to spread it. The SQLite engine computes it as it reads a segment
 * (nothing stored; DynamoDB has its own segments); kept stable all the same, so a segment's members
 * never change between versions. About 0.3 µs for a key (SHA-256 through node:crypto: about 3 µs).
 */
export function partitionHash(pk: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < pk.length; i++) {
    h ^= pk.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The half-open range [lo, hi) of partition hashes that segment `segment` of `total` holds. */
export function hashRange(seg: Segment): { lo: number; hi: number } {
  return { lo: Math.floor((seg.segment * HASH_SPACE) / seg.total), hi: Math.floor(((seg.segment + 1) * HASH_SPACE) / seg.total) };
}

export function inSegment(pk: string, seg: Segment): boolean {
  const { lo, hi } = hashRange(seg);
  const h = partitionHash(pk);
  return h >= lo && h < hi;
}
