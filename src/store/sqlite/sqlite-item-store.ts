/**
 * ItemStore on SQLite (better-sqlite3): one `items` table keyed (PK, SK) plus a partial index GSI1 on
 * (GSI1PK, GSI1SK). Every write runs in a BEGIN IMMEDIATE transaction, so conditions are evaluated
 * and applied under the database's write lock, across processes too. WAL with synchronous=FULL: a
 * transaction that returned is on disk.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { ConditionFailed, InternalError, InvalidInput, Throttled, toAlpError } from '../../core/errors.ts';
import { randomToken } from '../../core/ids.ts';
import type {
  Item,
  ItemKey,
  ItemSnapshot,
  ItemStore,
  Page,
  QueryInput,
  ScanOptions,
  TransactOp,
  UpdateSpec,
  WriteOptions,
} from '../item-store.ts';
import {
  applyUpdate,
  decodeCursor,
  encodeCursor,
  evaluateCondition,
  pageLimit,
  validateItem,
  validateKey,
  validateSk,
  validateTransaction,
} from '../semantics.ts';
import { ChangeLog, type ChangeLogOptions } from './changes.ts';
import { ensurePrivateDir, ensurePrivateFile } from './file-modes.ts';
import { type Row, SqliteScans, toItem } from './scans.ts';
import { prepareSchema, registerFunctions } from './schema.ts';

export interface SqliteOptions {
  synchronous?: 'FULL' | 'NORMAL';
  busyTimeoutMs?: number;
  readonly?: boolean;
  /** The change log's horizon and clock (changes.ts; tests). */
  changeLog?: ChangeLogOptions;
}

// Largest code point: a string that starts with prefix P sorts below P + U+10FFFF in UTF-8 byte order.
const PREFIX_END = '\u{10FFFF}';

export class SqliteItemStore implements ItemStore {
  readonly engine = 'sqlite';
  readonly location: string;
  /** One SQLite file gains nothing from concurrent segments (scans.ts). */
  readonly scanSegments = 1;
  readonly db: Database.Database;
  private readonly stmts: ReturnType<SqliteItemStore['prepareStatements']>;
  private readonly scans: SqliteScans;
  private readonly changes: ChangeLog;
  /** The keys the write transaction under way put or updated (its change log row, changes.ts). */
  private txKeys: ItemKey[] = [];

  constructor(file: string, opts: SqliteOptions = {}) {
    this.location = file;
    if (!opts.readonly) {
      ensurePrivateDir(path.dirname(file));
      ensurePrivateFile(file);
    }
    this.db = new Database(file, { readonly: opts.readonly ?? false });
    this.db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 10_000}`);
    registerFunctions(this.db);
    if (!opts.readonly) {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${opts.synchronous ?? 'FULL'}`);
      prepareSchema(this.db);
    }
    this.stmts = this.prepareStatements();
    this.scans = new SqliteScans(this.db);
    this.changes = new ChangeLog(this.db, this.scans, opts.changeLog);
  }

  /** The schema is created when the store opens (unless read-only): nothing is left to do here. */
  async prepare(): Promise<{ created: boolean }> {
    return { created: false };
  }

  private prepareStatements() {
    const db = this.db;
    return {
      get: db.prepare<[string, string], Row>('SELECT PK, SK, GSI1PK, GSI1SK, attrs FROM items WHERE PK = ? AND SK = ?'),
      upsert: db.prepare<[string, string, string | null, string | null, string]>(
        'INSERT INTO items (PK, SK, GSI1PK, GSI1SK, attrs) VALUES (?, ?, ?, ?, ?) ON CONFLICT (PK, SK) DO UPDATE SET GSI1PK = excluded.GSI1PK, GSI1SK = excluded.GSI1SK, attrs = excluded.attrs',
      ),
      del: db.prepare<[string, string]>('DELETE FROM items WHERE PK = ? AND SK = ?'),
    };
  }

  async get(key: ItemKey): Promise<Item | undefined> {
    validateKey(key);
    return this.run(() => this.read(key));
  }

  /** Always consistent: one SQLite connection sees every committed write. */
  async batchGet(keys: ItemKey[], _opts?: { consistent?: boolean }): Promise<Item[]> {
    keys.forEach(validateKey);
    return this.run(() => keys.map((k) => this.read(k)).filter((i): i is Item => i !== undefined));
  }

  async put(item: Item, opts: WriteOptions = {}): Promise<void> {
    validateItem(item);
    this.write(() => {
      if (opts.condition && !evaluateCondition(opts.condition, this.read(item))) {
        throw new ConditionFailed(`condition failed on put ${item.PK}/${item.SK}`);
      }
      this.store(item);
    });
  }

  async update(key: ItemKey, update: UpdateSpec, opts: WriteOptions = {}): Promise<Item> {
    validateKey(key);
    return this.write(() => {
      const current = this.read(key);
      if (opts.condition && !evaluateCondition(opts.condition, current)) {
        throw new ConditionFailed(`condition failed on update ${key.PK}/${key.SK}`);
      }
      const next = applyUpdate(key, current, update);
      this.store(next);
      return next;
    });
  }

  async delete(key: ItemKey, opts: WriteOptions = {}): Promise<void> {
    validateKey(key);
    this.write(() => {
      if (opts.condition && !evaluateCondition(opts.condition, this.read(key))) {
        throw new ConditionFailed(`condition failed on delete ${key.PK}/${key.SK}`);
      }
      this.stmts.del.run(key.PK, key.SK);
    });
  }

  async transactWrite(ops: TransactOp[]): Promise<void> {
    validateTransaction(ops);
    this.write(() => {
      // Every condition is evaluated against the state before the transaction, then all writes apply.
      const planned: Array<() => void> = [];
      ops.forEach((op, index) => {
        const key = op.op === 'put' ? op.item : op.key;
        const current = this.read(key);
        if (op.condition && !evaluateCondition(op.condition, current)) {
          throw new ConditionFailed(`transaction cancelled: condition of operation ${index} (${op.op} ${key.PK}/${key.SK}) failed`, index);
        }
        if (op.op === 'put') planned.push(() => this.store(op.item));
        else if (op.op === 'update') {
          const next = applyUpdate(op.key, current, op.update);
          planned.push(() => this.store(next));
        } else if (op.op === 'delete') planned.push(() => this.stmts.del.run(op.key.PK, op.key.SK));
      });
      for (const apply of planned) apply();
    });
  }

  async batchPut(items: Item[]): Promise<void> {
    items.forEach(validateItem);
    this.write(() => {
      for (const item of items) this.store(item);
    });
  }

  async query(q: QueryInput): Promise<Page> {
    validateSk(q.sk);
    if (typeof q.pk !== 'string' || q.pk.length === 0) throw new InvalidInput('query needs a partition key');
    const limit = pageLimit(q.limit);
    const onIndex = q.index === 'GSI1';
    if (q.index !== undefined && !onIndex) throw new InvalidInput(`unknown index ${String(q.index)}`);
    const pkCol = onIndex ? 'GSI1PK' : 'PK';
    const skCol = onIndex ? 'GSI1SK' : 'SK';
    const order = q.descending ? 'DESC' : 'ASC';
    const where: string[] = [`${pkCol} = ?`];
    const params: unknown[] = [q.pk];
    if (onIndex) where.push('GSI1SK IS NOT NULL');
    const sk = q.sk;
    // After a cursor (base table), the SK bound on the cursor's side is kept as a filter only (`+SK`:
    // no index use), so the index range starts at the cursor: with two lower bounds SQLite may start at
    // the condition's and step over every earlier page's rows again (quadratic paging of a partition).
    const cursorSide = q.cursor && !onIndex ? (q.descending ? 'hi' : 'lo') : undefined;
    const col = (side: 'lo' | 'hi') => (side === cursorSide ? `+${skCol}` : skCol);
    if (sk) {
      if ('beginsWith' in sk) {
        where.push(`${col('lo')} >= ? AND ${col('hi')} < ?`);
        params.push(sk.beginsWith, sk.beginsWith + PREFIX_END);
      } else if ('between' in sk) {
        where.push(`${col('lo')} >= ? AND ${col('hi')} <= ?`);
        params.push(sk.between[0], sk.between[1]);
      } else {
        const [op, value] = Object.entries(sk)[0] as [string, string];
        const sqlOp = { eq: '=', lt: '<', le: '<=', gt: '>', ge: '>=' }[op];
        const side = op === 'lt' || op === 'le' ? 'hi' : op === 'gt' || op === 'ge' ? 'lo' : undefined;
        where.push(`${side ? col(side) : skCol} ${sqlOp} ?`);
        params.push(value);
      }
    }
    const indexName = onIndex ? 'GSI1' : 'TABLE';
    if (q.cursor) {
      const last = decodeCursor(q.cursor, q.pk, indexName);
      const cmp = q.descending ? '<' : '>';
      if (onIndex) {
        where.push(`(GSI1SK, PK, SK) ${cmp} (?, ?, ?)`);
        params.push(last.GSI1SK, last.PK, last.SK);
      } else {
        where.push(`SK ${cmp} ?`);
        params.push(last.SK);
      }
    }
    const orderBy = onIndex ? `GSI1SK ${order}, PK ${order}, SK ${order}` : `SK ${order}`;
    const sql = `SELECT PK, SK, GSI1PK, GSI1SK, attrs FROM items ${onIndex ? 'INDEXED BY GSI1 ' : ''}WHERE ${where.join(' AND ')} ORDER BY ${orderBy} LIMIT ?`;
    params.push(limit + 1);
    const rows = this.run(() => this.statement(sql).all(...params));
    const items = rows.slice(0, limit).map(toItem);
    const page: Page = { items };
    if (rows.length > limit) {
      const lastItem = items[items.length - 1] as Item;
      const lastKey: Record<string, string> = onIndex
        ? { GSI1SK: lastItem.GSI1SK as string, PK: lastItem.PK, SK: lastItem.SK }
        : { SK: lastItem.SK };
      page.cursor = encodeCursor({ pk: q.pk, index: indexName, last: lastKey });
    }
    return page;
  }

  async scan(opts: ScanOptions = {}): Promise<Page> {
    return this.run(() => this.scans.scan(opts));
  }

  /** The change log's newest seq (schema.ts), with this database's instance id. */
  async changeMark(): Promise<string> {
    return this.run(() => this.changes.mark());
  }

  async changesAnswerable(mark: string): Promise<boolean> {
    return this.run(() => this.changes.answers(mark));
  }

  /** The items of the keys logged after the mark, as they are now (changes.ts). */
  async scanChangedSince(mark: string, opts: ScanOptions = {}): Promise<Page> {
    return this.run(() => this.changes.scanChangedSince(mark, opts));
  }

  /**
   * A point-in-time copy made with SQLite's online backup API, read through a store of its own. The
   * progress callback asks for every remaining page in one step, so the copy is taken inside one read
   * transaction: in WAL mode that blocks no writer, and a write by another connection cannot restart it.
   */
  async snapshot(opts: { dir?: string } = {}): Promise<ItemSnapshot> {
    const dir = opts.dir ?? path.dirname(this.location);
    const file = path.join(dir, `.alp-snapshot-${randomToken(9)}.db`);
    const remove = () => {
      for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) fs.rmSync(f, { force: true });
    };
    if (!this.db.open) throw this.closedError();
    try {
      await this.db.backup(file, { progress: () => 0x7fffffff });
    } catch (e) {
      remove();
      return this.run(() => {
        throw e;
      });
    }
    const copy = new SqliteItemStore(file, { synchronous: 'NORMAL' });
    let closed = false;
    return {
      pointInTime: true,
      scan: (o) => copy.scan(o),
      close: async () => {
        if (closed) return;
        closed = true;
        await copy.close();
        remove();
      },
    };
  }

  private readonly statements = new Map<string, Database.Statement<unknown[], Row>>();

  /** Query shapes are few (index × sort-key condition × direction × cursor): cache their statements. */
  private statement(sql: string): Database.Statement<unknown[], Row> {
    let stmt = this.statements.get(sql);
    if (!stmt) {
      stmt = this.db.prepare<unknown[], Row>(sql);
      this.statements.set(sql, stmt);
    }
    return stmt;
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  private read(key: ItemKey): Item | undefined {
    const row = this.stmts.get.get(key.PK, key.SK);
    return row ? toItem(row) : undefined;
  }

  private store(item: Item): void {
    const { PK, SK, GSI1PK, GSI1SK, ...rest } = item;
    const gsiPk = (GSI1PK as string | undefined) ?? null;
    const gsiSk = (GSI1SK as string | undefined) ?? null;
    this.stmts.upsert.run(PK, SK, gsiPk, gsiSk, JSON.stringify(rest)); // read-only: SQLite refuses it
    this.txKeys.push({ PK, SK });
  }

  private write<T>(fn: () => T): T {
    return this.run(() =>
      this.db
        .transaction(() => {
          this.txKeys = [];
          try {
            const out = fn();
            this.changes.append(this.txKeys); // in the transaction: a rolled-back one logs nothing
            return out;
          } finally {
            this.txKeys = [];
          }
        })
        .immediate(),
    );
  }

  /** Runs one statement or transaction, mapping SQLite's errors to the contract's (item-store.ts). */
  private run<T>(fn: () => T): T {
    if (!this.db.open) throw this.closedError();
    try {
      return fn();
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || code === 'SQLITE_BUSY_SNAPSHOT') {
        throw new Throttled('the SQLite database is busy; retry', { sqlite: code }, { cause: e });
      }
      // Disk full, I/O error, a read-only database: StorageFailure; our own errors pass; the rest is internal.
      throw toAlpError(e);
    }
  }

  /** Using a store after close() is a bug of the caller, not a storage failure. */
  private closedError(): InternalError {
    return new InternalError(`the SQLite item store at ${this.location} is closed`);
  }
}
