/**
 * One query over several partitions that together are one logical partition (the index shards of a
 * write-sharded GSI1 key, docs/data-model.md "Write-sharded index keys"), answered in the order and
 * pages a single partition would give: every shard is queried, the pages are merged by the sort order
 * (GSI1: GSI1SK, then PK, then SK; base table: SK, then PK; descending when asked), and the page's cursor
 * is composite and opaque: per shard, the engine cursor its unconsumed part starts at and how many
 * items of that engine page were already consumed (engine cursors can only resume after a page the
 * engine returned, not at an item inside it), or null once the shard is exhausted.
 *
 * Engine-neutral: only the ItemStore contract. With one partition the engine's own page and cursor are
 * returned unchanged, so an unsharded installation's listings are exactly what they were.
 * A cursor is bound to its query (partitions, index, order, key condition): InvalidInput otherwise.
 */
import { createHash } from 'node:crypto';
import { InvalidInput } from '../core/errors.ts';
import { forEachLimited } from '../core/limit.ts';
import { type Item, type ItemKey, type ItemStore, MAX_PAGE_LIMIT, type Page, type QueryInput } from './item-store.ts';

export interface MergedQuery extends Omit<QueryInput, 'pk' | 'cursor'> {
  /** The partitions (shards) of the one logical partition; order does not matter, but must not change between pages. */
  pks: readonly string[];
  cursor?: string | undefined;
}

type Position = [cursor: string | null, skip: number] | null;

interface CursorState {
  v: 1;
  q: string;
  s: Position[];
}

const VERSION = 1;

/** A page of the merged partitions: the single-partition order, at most `limit` items. */
export async function queryMerged(items: ItemStore, q: MergedQuery): Promise<Page> {
  const { pks, cursor, ...rest } = q;
  if (pks.length === 0) throw new InvalidInput('a merged query needs at least one partition');
  if (pks.length === 1) return items.query({ ...rest, pk: pks[0] as string, ...(cursor ? { cursor } : {}) });
  const limit = rest.limit ?? MAX_PAGE_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_LIMIT) throw new InvalidInput(`limit must be 1–${MAX_PAGE_LIMIT}`);
  const fingerprint = queryFingerprint(q);
  const start = cursor ? decodeMergedCursor(cursor, fingerprint, pks.length) : pks.map((): Position => [null, 0]);
  const readers = pks.map((pk, i) => new ShardReader(items, { ...rest, pk }, start[i] ?? null));
  // Every shard's first page at once (the common page needs no second round).
  await Promise.all(readers.map((r) => r.fill(limit)));
  const before = orderOf(q);
  const out: Item[] = [];
  while (out.length < limit) {
    let best: ShardReader | undefined;
    let bestItem: Item | undefined;
    for (const r of readers) {
      const item = await r.peek(limit - out.length);
      if (item && (!bestItem || before(item, bestItem))) {
        best = r;
        bestItem = item;
      }
    }
    if (!best || !bestItem) break;
    best.take();
    out.push(bestItem);
  }
  const positions = readers.map((r) => r.position());
  if (positions.every((p) => p === null)) return { items: out };
  return { items: out, cursor: encode({ v: VERSION, q: fingerprint, s: positions }) };
}

/** Every item of the merged partitions, in order (following the composite cursors). */
export async function queryAllMerged(items: ItemStore, q: Omit<MergedQuery, 'cursor'>): Promise<Item[]> {
  const out: Item[] = [];
  let cursor: string | undefined;
  do {
    const page = await queryMerged(items, { ...q, cursor });
    out.push(...page.items);
    cursor = page.cursor;
  } while (cursor);
  return out;
}

/**
 * The items a listing page names (an index entry pointing at its item), in `keys` order, missing ones
 * left out. Eventually consistent reads, like the index the listing came from (half the cost of a strong
 * read, and no strong read of every listed item by every listing); a miss is read again strongly (the
 * entry and its item are written in one transaction, so only a stale replica misses it).
 */
export async function getListed(items: ItemStore, keys: readonly ItemKey[]): Promise<Array<Item | undefined>> {
  const out: Array<Item | undefined> = new Array(keys.length);
  await forEachLimited([...keys.keys()], 16, async (i) => {
    const key = keys[i] as ItemKey;
    out[i] = (await items.get(key, { consistent: false })) ?? (await items.get(key, { consistent: true }));
  });
  return out;
}

/** Reads one shard from a position, page by page, as the merge consumes it. */
class ShardReader {
  private buf: Item[] = [];
  private pos: number;
  /** The engine cursor `buf` was read from (null: the partition's start). */
  private from: string | null;
  private next: string | undefined;
  private loaded = false;
  private readonly exhaustedAtStart: boolean;

  constructor(
    private readonly items: ItemStore,
    private readonly q: QueryInput,
    at: Position,
  ) {
    this.exhaustedAtStart = at === null;
    this.from = at?.[0] ?? null;
    this.pos = at?.[1] ?? 0;
  }

  /** Loads the first page (the skipped items plus up to `want` more). */
  async fill(want: number): Promise<void> {
    if (this.exhaustedAtStart || this.loaded) return;
    await this.load(this.from, Math.min(MAX_PAGE_LIMIT, this.pos + want));
  }

  private async load(from: string | null, limit: number): Promise<void> {
    const page = await this.items.query({ ...this.q, limit, ...(from ? { cursor: from } : {}) });
    this.from = from;
    this.buf = page.items;
    this.next = page.cursor;
    this.loaded = true;
  }

  /** The next unconsumed item, reading further pages when this one is used up; undefined at the end. */
  async peek(want: number): Promise<Item | undefined> {
    if (this.exhaustedAtStart) return undefined;
    if (!this.loaded) await this.fill(want);
    while (this.pos >= this.buf.length) {
      if (this.next === undefined) return undefined;
      // Skipped items may run past a shorter page (an engine page cut at 1 MB): carry the rest over.
      const carried = this.pos - this.buf.length;
      await this.load(this.next, Math.min(MAX_PAGE_LIMIT, carried + want));
      this.pos = carried;
    }
    return this.buf[this.pos];
  }

  take(): void {
    this.pos += 1;
  }

  /** Where the next page starts in this shard, or null when nothing is left. */
  position(): Position {
    if (this.exhaustedAtStart) return null;
    if (this.pos < this.buf.length) return [this.from, this.pos];
    if (this.next === undefined) return null;
    return [this.next, this.pos - this.buf.length];
  }
}

/** UTF-8 byte order, as both engines compare key strings. */
function compareKeys(a: unknown, b: unknown): number {
  return Buffer.compare(Buffer.from(String(a ?? ''), 'utf8'), Buffer.from(String(b ?? ''), 'utf8'));
}

/** `before(a, b)`: a comes first in the single-partition order of the query. */
function orderOf(q: MergedQuery): (a: Item, b: Item) => boolean {
  const fields = q.index === 'GSI1' ? (['GSI1SK', 'PK', 'SK'] as const) : (['SK', 'PK'] as const);
  const sign = q.descending ? -1 : 1;
  return (a, b) => {
    for (const f of fields) {
      const c = compareKeys(a[f], b[f]);
      if (c !== 0) return sign * c < 0;
    }
    return false;
  };
}

function queryFingerprint(q: MergedQuery): string {
  const material = JSON.stringify([q.index ?? 'TABLE', q.descending === true, q.sk ?? null, q.consistent === true, q.pks]);
  return createHash('sha256').update(material).digest('base64url').slice(0, 16);
}

function encode(state: CursorState): string {
  return Buffer.from(JSON.stringify(state)).toString('base64url');
}

function decodeMergedCursor(cursor: string, fingerprint: string, shards: number): Position[] {
  try {
    if (typeof cursor !== 'string' || cursor.length > 256 * 1024) throw new Error('size');
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as Partial<CursorState>;
    if (v.v !== VERSION || v.q !== fingerprint || !Array.isArray(v.s) || v.s.length !== shards) throw new Error('shape');
    return v.s.map((p: unknown): Position => {
      if (p === null) return null;
      if (!Array.isArray(p) || p.length !== 2) throw new Error('position');
      const [c, k] = p as unknown[];
      if (c !== null && (typeof c !== 'string' || c.length === 0)) throw new Error('cursor');
      if (typeof k !== 'number' || !Number.isInteger(k) || k < 0 || k >= MAX_PAGE_LIMIT) throw new Error('skip');
      return [c, k];
    });
  } catch {
    throw new InvalidInput('invalid cursor for this query');
  }
}
