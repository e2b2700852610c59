/**
 * The SQLite engine's change log (schema.ts `alp_changes`): the append of each write transaction, its
 * pruning, and scanChangedSince (item-store.ts) read from it.
 *
 * A change scan de-duplicates the log's keys after the mark in SQL (GROUP BY over json_each, in the
 * connection's temporary storage, which is a file: bounded memory) and joins each key's current item
 * (a deleted one drops out), in (last seq, PK, SK) order: a key written again while the pages are read
 * moves behind the cursor and comes again rather than being missed. When the mark cannot be answered
 * from the log (another database's, older than the oldest kept row, ahead of the log) or the changes
 * since it are many (more than `maxChangedKeys` keys written), the scan is instead the whole table
 * (optionally one segment) followed by the changes since a mark taken before it started: conservative,
 * and still every write after the mark is in the pages.
 */
import type Database from 'better-sqlite3';
import { InvalidInput } from '../../core/errors.ts';
import type { ItemKey, Page, ScanOptions } from '../item-store.ts';
import { hashRange, type Segment, scanCursorScope, scanSegment } from '../scan-options.ts';
import { decodeCursor, encodeCursor, pageLimit } from '../semantics.ts';
import { page, type Row, type SqliteScans } from './scans.ts';
import { HASH_FUNCTION, hasChangeLog, instanceId } from './schema.ts';

export interface ChangeLogOptions {
  /** Rows kept at most (default 1,000,000). */
  keepRows?: number;
  /** Rows older than this are pruned (default 24 h). */
  keepMs?: number;
  /** A prune runs in the write transaction whose seq is a multiple of this (default 1024). */
  pruneEvery?: number;
  /** Rows a prune deletes at most (default 2048). */
  pruneBatch?: number;
  /** Above this many keys written since the mark a change scan reads the whole table (default 50,000). */
  maxChangedKeys?: number;
  /** The clock of the rows' `at` (default Date.now). */
  now?: () => number;
}

const MARK = /^sqlite:([A-Za-z0-9_-]*):(\d{1,15})$/;
type SeqRow = Row & { W: number };

/** The statements of change scans (test/store/sqlite-changes.test.ts checks their plans). */
export const CHANGE_SQL = {
  keysAfter: 'SELECT coalesce(sum(n), 0) AS n FROM alp_changes WHERE seq > ?',
  // Apart: SQLite answers a lone min() or max() of the rowid from one end of the b-tree, both at once by a scan.
  oldest: 'SELECT min(seq) AS seq FROM alp_changes',
  newest: 'SELECT max(seq) AS seq FROM alp_changes',
  changed: changedSql(false),
  changedSegment: changedSql(true),
};

function changedSql(segment: boolean): string {
  return `WITH k AS (
    SELECT json_extract(j.value, '$[0]') AS kp, json_extract(j.value, '$[1]') AS ks, max(c.seq) AS W
    FROM alp_changes c, json_each(c.keys) j WHERE c.seq > ? GROUP BY kp, ks)
  SELECT k.W AS W, i.PK, i.SK, i.GSI1PK, i.GSI1SK, i.attrs FROM k JOIN items i ON i.PK = k.kp AND i.SK = k.ks
  WHERE (k.W, k.kp, k.ks) > (?, ?, ?)${segment ? ` AND ${HASH_FUNCTION}(k.kp, ?, ?)` : ''}
  ORDER BY k.W, k.kp, k.ks LIMIT ?`;
}

export class ChangeLog {
  private readonly logged: boolean;
  private readonly instance: string;
  private readonly o: Required<ChangeLogOptions>;
  private readonly stmts: ReturnType<ChangeLog['prepare']> | undefined;

  /**
   * `writer` appends and prunes inside the write transaction; `reader` answers marks and change scans
   * from committed rows only (the store's two connections, sqlite-item-store.ts).
   */
  constructor(
    private readonly writer: Database.Database,
    private readonly reader: Database.Database,
    private readonly scans: SqliteScans,
    opts: ChangeLogOptions = {},
  ) {
    this.logged = hasChangeLog(reader);
    this.instance = instanceId(reader);
    this.o = {
      keepRows: opts.keepRows ?? 1_000_000,
      keepMs: opts.keepMs ?? 24 * 3600_000,
      pruneEvery: opts.pruneEvery ?? 1024,
      pruneBatch: opts.pruneBatch ?? 2048,
      maxChangedKeys: opts.maxChangedKeys ?? 50_000,
      now: opts.now ?? Date.now,
    };
    this.stmts = this.logged ? this.prepare() : undefined;
  }

  private prepare() {
    const w = this.writer;
    const db = this.reader;
    return {
      append: w.prepare<[number, number, string]>('INSERT INTO alp_changes (at, n, keys) VALUES (?, ?, ?)'),
      head: w.prepare<[number], { seq: number; at: number }>('SELECT seq, at FROM alp_changes ORDER BY seq LIMIT ?'),
      prune: w.prepare<[number]>('DELETE FROM alp_changes WHERE seq < ?'),
      oldest: db.prepare<[], { seq: number | null }>(CHANGE_SQL.oldest),
      newest: db.prepare<[], { seq: number | null }>(CHANGE_SQL.newest),
      keysAfter: db.prepare<[number], { n: number }>(CHANGE_SQL.keysAfter),
      changed: db.prepare<[number, number, string, string, number], SeqRow>(CHANGE_SQL.changed),
      changedSegment: db.prepare<[number, number, string, string, number, number, number], SeqRow>(CHANGE_SQL.changedSegment),
    };
  }

  /** Appends the keys one write transaction (a group commit's batch) put or updated, inside it; prunes now and then. */
  append(keys: ItemKey[]): void {
    if (!this.stmts || keys.length === 0) return;
    const json = JSON.stringify(keys.map((k) => [k.PK, k.SK]));
    const seq = Number(this.stmts.append.run(this.o.now(), keys.length, json).lastInsertRowid);
    if (seq % this.o.pruneEvery === 0) this.prune(seq);
  }

  /** Deletes a prefix of the log (never the newest row): rows beyond keepRows or older than keepMs. */
  prune(newest: number): number {
    if (!this.stmts) return 0;
    const byCount = newest - this.o.keepRows;
    const byTime = this.o.now() - this.o.keepMs;
    let bound: number | undefined;
    for (const row of this.stmts.head.iterate(this.o.pruneBatch)) {
      if (row.seq >= newest || (row.seq > byCount && row.at >= byTime)) break;
      bound = row.seq + 1;
    }
    return bound === undefined ? 0 : this.stmts.prune.run(bound).changes;
  }

  mark(): string {
    return `sqlite:${this.instance}:${this.head()}`;
  }

  scanChangedSince(mark: string, opts: ScanOptions): Page {
    const parsed = typeof mark === 'string' ? MARK.exec(mark) : null;
    if (!parsed) throw new InvalidInput('not a change mark of the SQLite engine');
    const seg = scanSegment(opts);
    const scope = scanCursorScope(seg, mark);
    const limit = pageLimit(opts.limit);
    if (opts.cursor === undefined) {
      const since = Number(parsed[2]);
      const answerable = parsed[1] === this.instance && this.instance !== '' && this.answerable(since);
      return answerable ? this.changed(scope, seg, limit, since, undefined) : this.full(scope, seg, limit, this.head(), undefined);
    }
    const c = decodeCursor(opts.cursor, scope, 'CHANGED');
    if (c.P === 'F') return this.full(scope, seg, limit, seqOf(c.M), c.PK === undefined ? undefined : { PK: key(c.PK), SK: key(c.SK) });
    if (c.P !== 'C') throw new InvalidInput('invalid cursor for this query');
    return this.changed(scope, seg, limit, seqOf(c.S), { W: seqOf(c.W), PK: key(c.PK), SK: key(c.SK) });
  }

  /** Whether scanChangedSince(mark) would read the log after it (not the whole table). */
  answers(mark: string): boolean {
    const parsed = typeof mark === 'string' ? MARK.exec(mark) : null;
    return parsed !== null && parsed[1] === this.instance && this.instance !== '' && this.answerable(Number(parsed[2]));
  }

  private head(): number {
    return this.stmts?.newest.get()?.seq ?? 0;
  }

  /** Whether every write after `since` is in the log, and they are at most `most` keys to group. */
  private answerable(since: number, most = this.o.maxChangedKeys): boolean {
    const lo = this.stmts?.oldest.get()?.seq;
    const hi = this.stmts?.newest.get()?.seq;
    if (!this.stmts || typeof lo !== 'number' || typeof hi !== 'number') return false;
    if (since < lo - 1 || since > hi) return false;
    return (this.stmts.keysAfter.get(since)?.n ?? 0) <= most;
  }

  private changed(
    scope: string,
    seg: Segment | undefined,
    limit: number,
    since: number,
    after: { W: number; PK: string; SK: string } | undefined,
  ): Page {
    const stmts = this.stmts;
    if (!stmts) return this.full(scope, seg, limit, 0, undefined);
    const from = after ?? { W: since, PK: '', SK: '' };
    // A key whose last write is at or after the cursor's seq appears in a row at or after it: the
    // rows before it need no grouping, so each page groups only the log from its cursor on.
    const rowsAfter = Math.max(since, from.W - 1);
    // Those rows pruned meanwhile, or very many writes while the pages are read: the rest is the
    // whole table, then the changes after it.
    if (after && !this.answerable(rowsAfter, 4 * this.o.maxChangedKeys)) return this.full(scope, seg, limit, this.head(), undefined);
    const range = seg ? hashRange(seg) : undefined;
    const rows = range
      ? stmts.changedSegment.all(rowsAfter, from.W, from.PK, from.SK, range.lo, range.hi, limit + 1)
      : stmts.changed.all(rowsAfter, from.W, from.PK, from.SK, limit + 1);
    return page(rows, limit, (item, row) =>
      encodeCursor({
        pk: scope,
        index: 'CHANGED',
        last: { P: 'C', S: String(since), W: String((row as SeqRow).W), PK: item.PK, SK: item.SK },
      }),
    );
  }

  /** The whole table (or segment) from `last`; at its end, a cursor to the changes since `mark`. */
  private full(scope: string, seg: Segment | undefined, limit: number, mark: number, last: ItemKey | undefined): Page {
    const rows = this.scans.rows(seg, last, limit + 1);
    const out = page(rows, limit, (item) =>
      encodeCursor({ pk: scope, index: 'CHANGED', last: { P: 'F', M: String(mark), PK: item.PK, SK: item.SK } }),
    );
    if (!out.cursor && this.stmts) {
      out.cursor = encodeCursor({ pk: scope, index: 'CHANGED', last: { P: 'C', S: String(mark), W: String(mark), PK: '', SK: '' } });
    }
    return out;
  }
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
