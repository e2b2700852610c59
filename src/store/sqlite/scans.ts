/**
 * Scans of the SQLite engine (item-store.ts scan / changeMark / scanChangedSince), on the columns of
 * schema.ts: the whole table in (PK, SK) order; a segment through the index (phash, PK, SK); the rows
 * changed since a mark through the index on wseq, in (wseq, PK, SK) order, so a row written again while
 * the pages are read moves behind the cursor and is returned again rather than missed.
 */
import type Database from 'better-sqlite3';
import { InvalidInput } from '../../core/errors.ts';
import type { Item, Page, ScanOptions } from '../item-store.ts';
import { hashRange, inSegment, partitionHash, type Segment, scanCursorScope, scanSegment } from '../scan-options.ts';
import { decodeCursor, encodeCursor, pageLimit } from '../semantics.ts';
import { hasChangeColumns, instanceId } from './schema.ts';

export type Row = { PK: string; SK: string; GSI1PK: string | null; GSI1SK: string | null; attrs: string };
type SeqRow = Row & { wseq: number };

const COLUMNS = 'PK, SK, GSI1PK, GSI1SK, attrs';
/** The statements of segments and change scans (test/store/sqlite-changes.test.ts checks their plans). */
export const SCAN_SQL = {
  segFirst: `SELECT ${COLUMNS} FROM items INDEXED BY items_phash WHERE phash >= ? AND phash < ? ORDER BY phash, PK, SK LIMIT ?`,
  segNext: `SELECT ${COLUMNS} FROM items INDEXED BY items_phash WHERE phash >= ? AND phash < ? AND (phash, PK, SK) > (?, ?, ?) ORDER BY phash, PK, SK LIMIT ?`,
  changed: `SELECT ${COLUMNS}, wseq FROM items INDEXED BY items_wseq WHERE wseq > ? AND (wseq, PK, SK) > (?, ?, ?) ORDER BY wseq, PK, SK LIMIT ?`,
};
const MARK = /^sqlite:([A-Za-z0-9_-]*):(\d{1,15})$/;

export function toItem(row: Row): Item {
  const item = JSON.parse(row.attrs) as Item;
  item.PK = row.PK;
  item.SK = row.SK;
  if (row.GSI1PK !== null) item.GSI1PK = row.GSI1PK;
  if (row.GSI1SK !== null) item.GSI1SK = row.GSI1SK;
  return item;
}

export class SqliteScans {
  /** Whether the file has the version 2 columns (a read-only store of an older file may not). */
  private readonly indexed: boolean;
  private readonly instance: string;
  private readonly stmts: ReturnType<SqliteScans['prepare']>;

  constructor(private readonly db: Database.Database) {
    this.indexed = hasChangeColumns(db);
    this.instance = instanceId(db);
    this.stmts = this.prepare();
  }

  private prepare() {
    const db = this.db;
    const seq = this.indexed;
    return {
      first: db.prepare<[number], Row>(`SELECT ${COLUMNS} FROM items ORDER BY PK, SK LIMIT ?`),
      next: db.prepare<[string, string, number], Row>(`SELECT ${COLUMNS} FROM items WHERE (PK, SK) > (?, ?) ORDER BY PK, SK LIMIT ?`),
      from: db.prepare<[string, string], Row>(`SELECT ${COLUMNS} FROM items WHERE (PK, SK) > (?, ?) ORDER BY PK, SK`),
      segFirst: seq ? db.prepare<[number, number, number], Row>(SCAN_SQL.segFirst) : undefined,
      segNext: seq ? db.prepare<[number, number, number, string, string, number], Row>(SCAN_SQL.segNext) : undefined,
      changed: seq ? db.prepare<[number, number, string, string, number], SeqRow>(SCAN_SQL.changed) : undefined,
      counter: seq ? db.prepare<[], { value: number }>("SELECT value FROM alp_meta WHERE name = 'wseq'") : undefined,
    };
  }

  scan(opts: ScanOptions): Page {
    const limit = pageLimit(opts.limit);
    const seg = scanSegment(opts);
    const scope = scanCursorScope(seg);
    const last = opts.cursor === undefined ? undefined : decodeCursor(opts.cursor, scope, 'SCAN');
    let rows: Row[];
    if (!seg) {
      rows = last ? this.stmts.next.all(key(last.PK), key(last.SK), limit + 1) : this.stmts.first.all(limit + 1);
    } else if (this.stmts.segFirst && this.stmts.segNext) {
      const { lo, hi } = hashRange(seg);
      rows = last
        ? this.stmts.segNext.all(lo, hi, partitionHash(key(last.PK)), key(last.PK), key(last.SK), limit + 1)
        : this.stmts.segFirst.all(lo, hi, limit + 1);
    } else {
      rows = this.filteredSegment(seg, last, limit + 1);
    }
    return page(rows, limit, (item) => encodeCursor({ pk: scope, index: 'SCAN', last: { PK: item.PK, SK: item.SK } }));
  }

  /** A segment of a file without the hash column: the whole table read in order, filtered here. */
  private filteredSegment(seg: Segment, last: Record<string, string> | undefined, want: number): Row[] {
    const rows: Row[] = [];
    const source = last ? this.stmts.from.iterate(key(last.PK), key(last.SK)) : this.stmts.first.iterate(Number.MAX_SAFE_INTEGER);
    for (const row of source) {
      if (!inSegment(row.PK, seg)) continue;
      rows.push(row);
      if (rows.length >= want) break;
    }
    return rows;
  }

  changeMark(): string {
    const value = this.stmts.counter?.get()?.value ?? 0;
    return `sqlite:${this.instance}:${value}`;
  }

  scanChangedSince(mark: string, opts: ScanOptions): Page {
    const parsed = typeof mark === 'string' ? MARK.exec(mark) : null;
    if (!parsed) throw new InvalidInput('not a change mark of the SQLite engine');
    // A mark of another database, a file without the sequence column, or a mark ahead of the counter
    // (the file was replaced by an older copy of itself): every item is "changed since" it, conservatively.
    const since = Number(parsed[2]);
    const foreign = parsed[1] !== this.instance || this.instance === '';
    if (!this.stmts.changed || foreign || since > (this.stmts.counter?.get()?.value ?? 0)) return this.scan(opts);
    const limit = pageLimit(opts.limit);
    const seg = scanSegment(opts);
    const scope = scanCursorScope(seg, mark);
    const last = opts.cursor === undefined ? undefined : decodeCursor(opts.cursor, scope, 'CHANGED');
    const range = seg ? hashRange(seg) : undefined;
    const rows: SeqRow[] = [];
    let after = last ? { W: seqOf(last.W), PK: key(last.PK), SK: key(last.SK) } : { W: since, PK: '', SK: '' };
    // Rows of other segments are skipped here; each batch is read through the index on wseq.
    for (;;) {
      const batch = this.stmts.changed.all(since, after.W, after.PK, after.SK, limit + 1);
      for (const row of batch) {
        if (range && !inRange(partitionHash(row.PK), range)) continue;
        rows.push(row);
        if (rows.length > limit) break;
      }
      const end = batch[batch.length - 1];
      if (rows.length > limit || batch.length <= limit || !end) break;
      after = { W: end.wseq, PK: end.PK, SK: end.SK };
    }
    return page(rows, limit, (item, row) =>
      encodeCursor({ pk: scope, index: 'CHANGED', last: { W: String((row as SeqRow).wseq), PK: item.PK, SK: item.SK } }),
    );
  }
}

function page(rows: Row[], limit: number, cursorOf: (item: Item, row: Row) => string): Page {
  const kept = rows.slice(0, limit);
  const items = kept.map(toItem);
  const out: Page = { items };
  const lastRow = kept[kept.length - 1];
  const lastItem = items[items.length - 1];
  if (rows.length > limit && lastRow && lastItem) out.cursor = cursorOf(lastItem, lastRow);
  return out;
}

function inRange(h: number, r: { lo: number; hi: number }): boolean {
  return h >= r.lo && h < r.hi;
}

function key(v: string | undefined): string {
  if (typeof v !== 'string') throw new InvalidInput('invalid cursor for this query');
  return v;
}

function seqOf(v: string | undefined): number {
  const n = Number(key(v));
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidInput('invalid cursor for this query');
  return n;
}
