/**
 * The plan's working set (issue 17 "bounded memory"): the observations of the content root and the
 * observation writes the plan decided (grace starts, resets), in a scratch SQLite database on disk
 * (system/scratch.ts), never in a Map of every observation. Lookups are indexed, lists are paged.
 */
import { OBSERVATION_SK_PREFIX, observationPartitions } from '../core/keys.ts';
import { cond, type ItemStore, type TransactOp } from '../store/item-store.ts';
import { openScratch, type Scratch } from '../system/scratch.ts';
import { GRACE_MS, keyOfObservation, type Observation, QUARANTINE_MS, type RetentionAction } from './model.ts';

/** A pending observation write: a reset (delete) or a grace start (put), conditioned on the state the plan saw. */
export interface ObservationUpdate {
  kind: 'reset' | 'start';
  key: string;
  PK: string;
  SK: string;
  /** The state the plan saw (the write's condition); null: there was no observation. */
  prior: string | null;
  /** Why the reset: 'referenced' | 'gone' | 'changed'. */
  why?: string;
  item?: Observation;
}

const PAGE = 500;

export class ObservationWorkset {
  private readonly scratch: Scratch;
  private readonly stmts;
  /** The pins recorded by interrupted (PREPARED) purges: few, kept in memory. */
  readonly recordedPins = new Set<string>();
  count = 0;
  private resets = 0;

  constructor() {
    this.scratch = openScratch('retention-plan');
    const db = this.scratch.db;
    db.exec(`CREATE TABLE obs (key TEXT PRIMARY KEY, state TEXT NOT NULL, first_ms INTEGER NOT NULL, quarantined_ms INTEGER, item TEXT NOT NULL);
      CREATE INDEX obs_order ON obs (state, first_ms, key);
      CREATE TABLE upd (key TEXT PRIMARY KEY, kind TEXT NOT NULL, pk TEXT NOT NULL, sk TEXT NOT NULL, prior TEXT, why TEXT, item TEXT);`);
    this.stmts = {
      putObs: db.prepare('INSERT OR REPLACE INTO obs (key, state, first_ms, quarantined_ms, item) VALUES (?, ?, ?, ?, ?)'),
      getObs: db.prepare('SELECT item FROM obs WHERE key = ?').pluck(),
      stateObs: db.prepare('SELECT state FROM obs WHERE key = ?').pluck(),
      anyChanged: db.prepare("SELECT 1 FROM upd WHERE kind = 'reset' AND why = 'changed' LIMIT 1").pluck(),
      delObs: db.prepare('DELETE FROM obs WHERE key = ?'),
      pageObs: db.prepare('SELECT item FROM obs WHERE key > ? ORDER BY key LIMIT ?').pluck(),
      putUpd: db.prepare('INSERT OR REPLACE INTO upd (key, kind, pk, sk, prior, why, item) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      getUpd: db.prepare('SELECT key, kind, pk AS PK, sk AS SK, prior, why, item FROM upd WHERE key = ?'),
      delUpd: db.prepare('DELETE FROM upd WHERE key = ?'),
      pageUpd: db.prepare('SELECT key, kind, pk AS PK, sk AS SK, prior, why, item FROM upd WHERE key > ? ORDER BY key LIMIT ?'),
      countUpd: db.prepare('SELECT kind, count(*) AS n FROM upd GROUP BY kind'),
      eligibleQ: db.prepare(`SELECT item FROM obs WHERE state = 'GRACE' AND first_ms <= ? ORDER BY first_ms, key LIMIT ? OFFSET ?`).pluck(),
      eligibleP: db
        .prepare(
          `SELECT item FROM obs WHERE state = 'PREPARED' OR (state = 'QUARANTINED' AND quarantined_ms <= ?)
         ORDER BY state = 'PREPARED' DESC, first_ms, key LIMIT ? OFFSET ?`,
        )
        .pluck(),
    };
  }

  /** Streams every observation of the root (every shard, page by page) into the working set. */
  async load(items: ItemStore, root: string, shards: number): Promise<void> {
    for (const pk of observationPartitions(root, shards)) {
      let cursor: string | undefined;
      do {
        const page = await items.query({ pk, sk: { beginsWith: OBSERVATION_SK_PREFIX }, consistent: true, ...(cursor ? { cursor } : {}) });
        this.scratch.db.transaction(() => {
          for (const o of page.items as Observation[]) {
            this.put(o);
            if (o.state === 'PREPARED' && Array.isArray(o.pins)) for (const p of o.pins as string[]) this.recordedPins.add(p);
          }
        })();
        this.count += page.items.length;
        cursor = page.cursor;
      } while (cursor);
    }
  }

  /** Runs `fn` in one transaction of the working set (batches of writes). */
  tx<T>(fn: () => T): T {
    return this.scratch.db.transaction(fn)();
  }

  put(o: Observation): void {
    const q = o.quarantined_at ? Date.parse(o.quarantined_at) : null;
    this.stmts.putObs.run(o.key, o.state, Date.parse(o.first_observed_at), q, JSON.stringify(o));
  }

  get(key: string): Observation | undefined {
    const s = this.stmts.getObs.get(key) as string | undefined;
    return s === undefined ? undefined : (JSON.parse(s) as Observation);
  }

  /** The state of the observation in force for `key`, if any (no parse of the item). */
  stateOf(key: string): string | undefined {
    return this.stmts.stateObs.get(key) as string | undefined;
  }

  /** Whether any reset so far was for changed bytes (most plans: none, and no per-key look-up is needed). */
  anyChangedReset(): boolean {
    return this.stmts.anyChanged.get() !== undefined;
  }

  /** The observation leaves the set in force (reset, or missing and left for an operator). */
  drop(key: string): void {
    this.stmts.delObs.run(key);
  }

  /** Every observation in key order, a page at a time (writes between pages are safe). */
  *all(): Iterable<Observation[]> {
    let after = '';
    for (;;) {
      const page = (this.stmts.pageObs.all(after, PAGE) as string[]).map((s) => JSON.parse(s) as Observation);
      if (page.length === 0) return;
      yield page;
      after = (page[page.length - 1] as Observation).key;
    }
  }

  /**
   * Records a reset of `o` (delete, conditioned on its state) and drops it from the set in force
   * (`keepRow`: not yet, while eligible() is being paged, whose offsets must not shift).
   */
  reset(o: Observation, why: string, keepRow = false): void {
    this.resets++;
    this.stmts.putUpd.run(o.key, 'reset', o.PK, o.SK, o.state, why, null);
    if (!keepRow) this.drop(o.key);
  }

  /** Records a grace start (replacing a reset of the same key, whose condition it keeps). */
  start(item: Observation, priorState: string | null): void {
    // Only a reset leaves a condition a start must keep (most plans make none: no look-up per start).
    const pending = this.resets > 0 ? this.update(item.key) : undefined;
    const prior = pending?.kind === 'reset' ? pending.prior : priorState;
    this.stmts.putUpd.run(item.key, 'start', item.PK, item.SK, prior, pending?.why ?? null, JSON.stringify(item));
  }

  update(key: string): ObservationUpdate | undefined {
    const row = this.stmts.getUpd.get(key) as (Omit<ObservationUpdate, 'item'> & { item: string | null }) | undefined;
    return row ? rowToUpdate(row) : undefined;
  }

  forget(key: string): void {
    this.stmts.delUpd.run(key);
  }

  /** The pending writes in key order, a page at a time. */
  *updates(): Iterable<ObservationUpdate[]> {
    let after = '';
    for (;;) {
      const rows = this.stmts.pageUpd.all(after, PAGE) as Array<Omit<ObservationUpdate, 'item'> & { item: string | null }>;
      if (rows.length === 0) return;
      yield rows.map(rowToUpdate);
      after = (rows[rows.length - 1] as { key: string }).key;
    }
  }

  counts(): { starts: number; resets: number } {
    const out = { starts: 0, resets: 0 };
    for (const r of this.stmts.countUpd.all() as Array<{ kind: string; n: number }>) {
      if (r.kind === 'start') out.starts = r.n;
      else out.resets = r.n;
    }
    return out;
  }

  /** Observations in force an action may take at `now`, in plan order, `limit` from `offset`. */
  eligible(action: RetentionAction, now: number, limit: number, offset: number): Observation[] {
    const rows =
      action === 'QUARANTINE'
        ? (this.stmts.eligibleQ.all(now - GRACE_MS, limit, offset) as string[])
        : (this.stmts.eligibleP.all(now - QUARANTINE_MS, limit, offset) as string[]);
    return rows.map((s) => JSON.parse(s) as Observation);
  }

  close(): void {
    this.scratch.close();
  }
}

function rowToUpdate(row: Omit<ObservationUpdate, 'item'> & { item: string | null; why?: string | null }): ObservationUpdate {
  const { item, why, ...rest } = row;
  return { ...rest, ...(why ? { why } : {}), ...(item ? { item: JSON.parse(item) as Observation } : {}) };
}

/** The write an update commits: its condition is the state the plan saw, so a change since then fails it. */
export function updateOp(u: ObservationUpdate): TransactOp {
  const condition = u.prior === null ? cond.notExists() : cond.eq('state', u.prior);
  if (u.kind === 'reset') return { op: 'delete', key: keyOfObservation(u), condition };
  return { op: 'put', item: u.item as Observation, condition };
}
