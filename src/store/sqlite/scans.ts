/**
 * Whole-table scans of the SQLite engine (item-store.ts scan), in (PK, SK) order. A segment is the
 * same ordered read filtered by the partition hash in SQL (schema.ts alp_in_hash_range): no column or
 * index to maintain on writes, O(table) per segment — on one SQLite file, segments add no parallelism
 * (ItemStore.scanSegments is 1 here), they exist so callers need no engine branch.
 */
import type Database from 'better-sqlite3';
import { InvalidInput } from '../../core/errors.ts';
import type { Item, ItemKey, Page, ScanOptions } from '../item-store.ts';
import { hashRange, type Segment, scanCursorScope, scanSegment } from '../scan-options.ts';
import { decodeCursor, encodeCursor, pageLimit } from '../semantics.ts';
import { HASH_FUNCTION } from './schema.ts';

export type Row = { PK: string; SK: string; GSI1PK: string | null; GSI1SK: string | null; attrs: string };

const COLUMNS = 'PK, SK, GSI1PK, GSI1SK, attrs';
const IN_SEGMENT = `${HASH_FUNCTION}(PK, ?, ?)`;
/** The statements of scans (test/store/sqlite-changes.test.ts checks their plans). */
export const SCAN_SQL = {
  first: `SELECT ${COLUMNS} FROM items ORDER BY PK, SK LIMIT ?`,
  next: `SELECT ${COLUMNS} FROM items WHERE (PK, SK) > (?, ?) ORDER BY PK, SK LIMIT ?`,
  segFirst: `SELECT ${COLUMNS} FROM items WHERE ${IN_SEGMENT} ORDER BY PK, SK LIMIT ?`,
  segNext: `SELECT ${COLUMNS} FROM items WHERE (PK, SK) > (?, ?) AND ${IN_SEGMENT} ORDER BY PK, SK LIMIT ?`,
};

export function toItem(row: Row): Item {
  const item = JSON.parse(row.attrs) as Item;
  item.PK = row.PK;
  item.SK = row.SK;
  if (row.GSI1PK !== null) item.GSI1PK = row.GSI1PK;
  if (row.GSI1SK !== null) item.GSI1SK = row.GSI1SK;
  return item;
}

export class SqliteScans {
  private readonly stmts: ReturnType<SqliteScans['prepare']>;

  constructor(private readonly db: Database.Database) {
    this.stmts = this.prepare();
  }

  private prepare() {
    const db = this.db;
    return {
      first: db.prepare<[number], Row>(SCAN_SQL.first),
      next: db.prepare<[string, string, number], Row>(SCAN_SQL.next),
      segFirst: db.prepare<[number, number, number], Row>(SCAN_SQL.segFirst),
      segNext: db.prepare<[string, string, number, number, number], Row>(SCAN_SQL.segNext),
    };
  }

  scan(opts: ScanOptions): Page {
    const limit = pageLimit(opts.limit);
    const seg = scanSegment(opts);
    const scope = scanCursorScope(seg);
    const c = opts.cursor === undefined ? undefined : decodeCursor(opts.cursor, scope, 'SCAN');
    const rows = this.rows(seg, c ? { PK: key(c.PK), SK: key(c.SK) } : undefined, limit + 1);
    return page(rows, limit, (item) => encodeCursor({ pk: scope, index: 'SCAN', last: { PK: item.PK, SK: item.SK } }));
  }

  /** Up to `want` rows of the table (or of a segment) after `last`, in (PK, SK) order. */
  rows(seg: Segment | undefined, last: ItemKey | undefined, want: number): Row[] {
    if (!seg) return last ? this.stmts.next.all(last.PK, last.SK, want) : this.stmts.first.all(want);
    const { lo, hi } = hashRange(seg);
    return last ? this.stmts.segNext.all(last.PK, last.SK, lo, hi, want) : this.stmts.segFirst.all(lo, hi, want);
  }
}

/** A page of at most `limit` of `rows` (one more than the limit was read: then a cursor). */
export function page(rows: Row[], limit: number, cursorOf: (item: Item, row: Row) => string): Page {
  const kept = rows.slice(0, limit);
  const items = kept.map(toItem);
  const out: Page = { items };
  const lastRow = kept[kept.length - 1];
  const lastItem = items[items.length - 1];
  if (rows.length > limit && lastRow && lastItem) out.cursor = cursorOf(lastItem, lastRow);
  return out;
}

function key(v: string | undefined): string {
  if (typeof v !== 'string') throw new InvalidInput('invalid cursor for this query');
  return v;
}
