/**
 * The SQLite engine's change log (schema.ts `alp_changes`): the append of each write transaction, its
 * pruning, and scanChangedSince (item-store.ts) read from it.
 *
 * A change scan de-duplicates the log's keys after the mark into a temporary table of the reading
 * connection (key → seq of its last write; temporary storage is a file: bounded memory), built once per
 * mark and brought up to date before each page with only the log rows written since, and joins each
 * key's current item (a deleted one drops out), in (last seq, PK, SK) order: a key written again while
 * the pages are read moves behind the cursor and comes again rather than being missed. So a scan of N
 * changed keys groups each log row once (before: every page grouped the log from its cursor on, N² /
 * page size). When the mark cannot be answered from the log (another database's, older than the oldest
 * kept row, ahead of the log) or the changes since it are more keys than a whole scan is worth
 * (`maxChangedKeys`), the scan is instead the whole table (optionally one segment) followed by the
 * changes since a mark taken before it started: conservative, and still every write after the mark is
 * in the pages.
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
  /** Above this many keys written since the mark a change scan reads the whole table (default 2,000,000). */
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
  /** A scan's set of changed keys: each key once, with the seq of its last write. */
  create: (t: string) => [
    `CREATE TEMP TABLE ${t} (kp TEXT NOT NULL, ks TEXT NOT NULL, W INTEGER NOT NULL, PRIMARY KEY (kp, ks)) WITHOUT ROWID`,
    `CREATE INDEX temp.${t}_w ON ${t} (W, kp, ks)`,
  ],
  /** Folds the log rows after a seq into the set (a key's W only grows). */
  collect: (t: string) => `INSERT INTO temp.${t} (kp, ks, W)
    SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), max(c.seq)
    FROM main.alp_changes c, json_each(c.keys) j WHERE c.seq > ? GROUP BY 1, 2
    ON CONFLICT (kp, ks) DO UPDATE SET W = max(W, excluded.W)`,
  page: (t: string, segment: boolean) => `SELECT k.W AS W, i.PK, i.SK, i.GSI1PK, i.GSI1SK, i.attrs
    FROM temp.${t} k JOIN main.items i ON i.PK = k.kp AND i.SK = k.ks
    WHERE (k.W, k.kp, k.ks) > (?, ?, ?)${segment ? ` AND ${HASH_FUNCTION}(k.kp, ?, ?)` : ''}
    ORDER BY k.W, k.kp, k.ks LIMIT ?`,
};

/** Sets of changed keys a connection keeps at once (a scan's set is rebuilt when it was dropped). */
const MAX_CHANGED_SETS = 4;

/** The changed keys after `since`, as of the log's `upto`, in a temporary table of the reader. */
interface ChangedSet {
  since: number;
  upto: number;
  table: string;
  collect: Database.Statement<[number]>;
  page: Database.Statement<[number, string, string, number], SeqRow>;
  pageSegment: Database.Statement<[number, string, string, number, number, number], SeqRow>;
}

export class ChangeLog {
  private readonly logged: boolean;
  private readonly instance: string;
  private readonly o: Required<ChangeLogOptions>;
  private readonly stmts: ReturnType<ChangeLog['prepare']> | undefined;
  /** The reader's sets of changed keys, least recently used first. */
  private sets: ChangedSet[] = [];
  private setCount = 0;

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
      maxChangedKeys: opts.maxChangedKeys ?? 2_000_000,
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
    // The log pruned past what the set holds while the pages are read: the rest is the whole table,
    // then the changes after it.
    const set = this.stmts ? this.changedSet(since) : undefined;
    if (!set) return this.full(scope, seg, limit, this.head(), undefined);
    const from = after ?? { W: since, PK: '', SK: '' };
    const range = seg ? hashRange(seg) : undefined;
    const rows = range
      ? set.pageSegment.all(from.W, from.PK, from.SK, range.lo, range.hi, limit + 1)
      : set.page.all(from.W, from.PK, from.SK, limit + 1);
    return page(rows, limit, (item, row) =>
      encodeCursor({
        pk: scope,
        index: 'CHANGED',
        last: { P: 'C', S: String(since), W: String((row as SeqRow).W), PK: item.PK, SK: item.SK },
      }),
    );
  }

  /**
   * The set of keys changed after `since`, brought up to the log's newest row; undefined when log rows
   * it still needs were pruned. Kept per connection (a cursor of another connection or process, or of
   * a set dropped meanwhile, rebuilds it from `since`).
   */
  private changedSet(since: number): ChangedSet | undefined {
    const newest = this.head();
    const lo = this.stmts?.oldest.get()?.seq ?? newest + 1;
    let set = this.sets.find((s) => s.since === since);
    if (set) this.sets = [...this.sets.filter((s) => s !== set), set];
    if (set && set.upto >= newest) return set;
    const from = set?.upto ?? since;
    if (from < lo - 1) return undefined;
    set ??= this.newSet(since);
    const collect = set.collect;
    this.writingTemp(() => collect.run(from));
    set.upto = newest;
    return set;
  }

  private newSet(since: number): ChangedSet {
    const table = `alp_changed_${++this.setCount}`;
    this.writingTemp(() => {
      for (const ddl of CHANGE_SQL.create(table)) this.reader.exec(ddl);
    });
    const set: ChangedSet = {
      since,
      upto: since,
      table,
      collect: this.reader.prepare(CHANGE_SQL.collect(table)),
      page: this.reader.prepare(CHANGE_SQL.page(table, false)),
      pageSegment: this.reader.prepare(CHANGE_SQL.page(table, true)),
    };
    this.sets.push(set);
    while (this.sets.length > MAX_CHANGED_SETS) {
      const old = this.sets.shift() as ChangedSet;
      this.writingTemp(() => this.reader.exec(`DROP TABLE temp.${old.table}`));
    }
    return set;
  }

  /** Runs `fn` with the reader allowed to write (its temporary tables only: it holds no write lock). */
  private writingTemp(fn: () => void): void {
    const guarded = this.reader.pragma('query_only', { simple: true }) === 1;
    if (guarded) this.reader.pragma('query_only = OFF');
    try {
      fn();
    } finally {
      if (guarded) this.reader.pragma('query_only = ON');
    }
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
