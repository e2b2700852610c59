/**
 * Argument checks every ContentStore engine applies identically: byte ranges of `get` and the opaque
 * cursors of `listPage`. Engines call these; they never check ranges or cursors their own way.
 */
import { InvalidInput } from '../core/errors.ts';
import { MAX_KEY_BYTES } from '../core/object-keys.ts';
import type { GetOptions } from './content-store.ts';

/** start, end and expectedSize, when given, are non-negative safe integers (checkable before any I/O). */
export function checkRangeArgs(opts: GetOptions): void {
  for (const [name, v] of [
    ['start', opts.start],
    ['end', opts.end],
    ['expectedSize', opts.expectedSize],
  ] as const) {
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 0)) throw new InvalidInput(`${name} must be a non-negative integer`);
  }
}

/**
 * The range fits an object of `size` bytes; otherwise InvalidInput with `rangeNotSatisfiable` (the
 * HTTP adapter answers 416 for it).
 */
export function checkRange(opts: GetOptions, size: number): void {
  checkRangeArgs(opts);
  const { start, end } = opts;
  if (start === undefined && end === undefined) return;
  const s = start ?? 0;
  const e = end ?? size - 1;
  if (s > e || s >= size) {
    throw new InvalidInput(`range ${s}-${e} is not satisfiable for ${size} bytes`, { size, rangeNotSatisfiable: true });
  }
}

/** The cursor of a page whose last key is `lastKey` (a key relative to the store). */
export function encodeListCursor(lastKey: string): string {
  return Buffer.from(lastKey, 'utf8').toString('base64url');
}

/** The last key of the previous page; InvalidInput unless it is a key under `prefix` this store could have returned. */
export function decodeListCursor(cursor: string, prefix: string): string {
  const key = typeof cursor === 'string' && cursor.length <= 4 * MAX_KEY_BYTES ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  if (key.length === 0 || Buffer.byteLength(key) > MAX_KEY_BYTES || !key.startsWith(prefix)) throw new InvalidInput('invalid list cursor');
  return key;
}

/** Objects per listPage: default and maximum. */
const MAX_LIST_LIMIT = 1000;

/** The page size of a listPage call: `limit` rounded down into 1..MAX_LIST_LIMIT. */
export function listLimit(limit: number | undefined): number {
  return Math.min(Math.max(1, Math.floor(limit ?? MAX_LIST_LIMIT)), MAX_LIST_LIMIT);
}
