/**
 * Group commit of the SQLite engine: concurrent callers' writes share one SQLite transaction and one
 * fsync of the WAL, each caller's work in its own SAVEPOINT.
 *
 * Batching rule: the first writer opens BEGIN IMMEDIATE and runs its work at once; the COMMIT is
 * deferred to the end of the current event-loop turn (setImmediate), so every writer that arrives
 * before it (callers interleave at awaits) joins the open transaction with a savepoint of its own.
 * A lone caller pays one setImmediate hop (a few µs); a batch is cut at MAX_BATCH callers.
 *
 * A caller's work that throws (a failed condition, an invalid update) is rolled back to its savepoint
 * and fails that caller only. Every caller's promise settles after the COMMIT of its batch returned
 * (synchronous=FULL: durable), a failed caller's too: its condition saw the writes of the callers
 * before it in the batch, so its error stands only once they are committed. When the COMMIT fails, or SQLite rolled the whole transaction back
 * after an error (disk full, I/O error), every caller of the batch fails with that error and nothing
 * of the batch is visible. A crash before the COMMIT loses only writes nobody was answered for.
 *
 * Reads never go through this connection while a batch is open (the store reads on a connection of
 * its own, sqlite-item-store.ts), so no reader sees a batch's uncommitted writes.
 *
 * At most one batch is open in a process: before BEGIN, a store commits the open batch of any other
 * store of the process. Two stores on one file in one process (tests, tools) would otherwise
 * deadlock: the second's BEGIN IMMEDIATE waits for the lock synchronously (busy_timeout), so the
 * event loop never reaches the first one's deferred COMMIT.
 */
import type Database from 'better-sqlite3';
import type { ItemKey } from '../item-store.ts';

export const MAX_BATCH = 256;

/** The group commits of this process with a batch open (at most one, see the header). */
const openInProcess = new Set<GroupCommit>();

/** The work of one caller: runs inside the batch's transaction; records the keys it put or updated. */
export type Work<T> = (written: ItemKey[]) => T;

interface Caller {
  settle: (error: Error | undefined) => void;
}

interface Batch {
  callers: Caller[];
  written: ItemKey[];
}

export interface GroupCommitHooks {
  /** Runs in the transaction just before COMMIT, with the keys the batch's callers put or updated. */
  beforeCommit(written: ItemKey[]): void;
  /** The contract's error for an error of SQLite (item-store.ts ERRORS). */
  mapError(e: unknown): Error;
}

export class GroupCommit {
  private open: Batch | undefined;
  private readonly stmts: ReturnType<GroupCommit['prepare']>;

  constructor(
    private readonly db: Database.Database,
    private readonly hooks: GroupCommitHooks,
  ) {
    this.stmts = this.prepare();
  }

  private prepare() {
    const db = this.db;
    return {
      begin: db.prepare('BEGIN IMMEDIATE'),
      savepoint: db.prepare('SAVEPOINT alp_caller'),
      release: db.prepare('RELEASE alp_caller'),
      rollbackTo: db.prepare('ROLLBACK TO alp_caller'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
    };
  }

  /** Runs `work` in the open batch (opening one if none) and settles after that batch's COMMIT. */
  submit<T>(work: Work<T>): Promise<T> {
    let batch: Batch;
    try {
      batch = this.open ?? this.begin();
    } catch (e) {
      return Promise.reject(this.hooks.mapError(e));
    }
    const written: ItemKey[] = [];
    let outcome: { out: T } | { failed: Error };
    try {
      this.stmts.savepoint.run();
      outcome = { out: work(written) };
      this.stmts.release.run();
    } catch (e) {
      const error = this.hooks.mapError(e);
      if (!this.undo(batch, error)) return Promise.reject(error);
      outcome = { failed: error };
    }
    if ('out' in outcome) for (const k of written) batch.written.push(k);
    const answer = new Promise<T>((resolve, reject) => {
      // A failed caller is answered with the batch too: its condition saw the earlier callers' writes,
      // so its own error holds only if they commit; if the COMMIT fails it gets that error instead.
      batch.callers.push({
        settle: (error) => {
          if (error) reject(error);
          else if ('out' in outcome) resolve(outcome.out);
          else reject(outcome.failed);
        },
      });
    });
    if (batch.callers.length >= MAX_BATCH) this.commit(batch);
    return answer;
  }

  /** Whether a batch is open: its writes are not committed yet, so reads must use another connection. */
  get pending(): boolean {
    return this.open !== undefined;
  }

  /** Commits the open batch now (before the store closes). */
  flush(): void {
    if (this.open) this.commit(this.open);
  }

  private begin(): Batch {
    for (const other of openInProcess) if (other !== this) other.flush();
    this.stmts.begin.run();
    openInProcess.add(this);
    const batch: Batch = { callers: [], written: [] };
    this.open = batch;
    setImmediate(() => {
      if (this.open === batch) this.commit(batch);
    });
    return batch;
  }

  /**
   * After a caller's work threw: back to its savepoint (true: the batch goes on without its writes);
   * but when SQLite has rolled the whole transaction back (or the rollback itself fails), the batch
   * is lost and every caller of it fails with `error` (false).
   */
  private undo(batch: Batch, error: Error): boolean {
    if (this.db.inTransaction) {
      try {
        this.stmts.rollbackTo.run();
        this.stmts.release.run();
        return true;
      } catch {
        // the savepoint cannot be undone: abandon the batch
      }
    }
    this.abandon(batch, error);
    return false;
  }

  private commit(batch: Batch): void {
    this.open = undefined;
    openInProcess.delete(this);
    try {
      this.hooks.beforeCommit(batch.written);
      this.stmts.commit.run();
    } catch (e) {
      this.abandon(batch, this.hooks.mapError(e));
      return;
    }
    for (const c of batch.callers) c.settle(undefined);
  }

  /** Rolls the batch back (if SQLite has not already) and fails every caller answered by it. */
  private abandon(batch: Batch, error: Error): void {
    if (this.open === batch) {
      this.open = undefined;
      openInProcess.delete(this);
    }
    if (this.db.inTransaction) {
      try {
        this.stmts.rollback.run();
      } catch {
        // nothing more to undo: SQLite rolls a transaction that failed to commit back on its own
      }
    }
    for (const c of batch.callers) c.settle(error);
  }
}
