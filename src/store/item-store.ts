/**
 * The ItemStore contract: one table of items keyed (PK, SK) with one global secondary index GSI1
 * (GSI1PK, GSI1SK), with DynamoDB's semantics, so the SQLite and DynamoDB engines are interchangeable.
 * test/store/conformance.ts is the executable form of this contract; every engine passes it.
 *
 * Consistency rule for callers: GSI1 is eventually consistent on DynamoDB. Any rule that must not miss a
 * write (reference scans, audit verification, reconciliation, conditions) reads the base table (get,
 * query by PK, scan), never GSI1. GSI1 serves listings only.
 *
 * Limits every engine enforces identically: an item's JSON is at most MAX_ITEM_BYTES; a transaction has
 * at most MAX_TRANSACT_OPS operations, touches each item at most once and holds at most
 * MAX_TRANSACT_BYTES; a page holds at most MAX_PAGE_LIMIT items.
 *
 * ERRORS. Every method fails only with these typed errors (core/errors.ts); engines map errno, SQLite
 * and SDK errors to them inside the engine, so no caller ever looks at an engine's error names:
 * - InvalidInput: the call itself is wrong (a bad key, attribute, condition, cursor or limit, an item
 *   or transaction over the limits, a reused transaction token). Nothing was written.
 * - ConditionFailed: a write's condition did not hold; in transactWrite `failedIndex` names the first
 *   failing operation. Nothing was written.
 * - TransactionConflict: concurrent transactions on the same items kept cancelling this one; nothing
 *   was written, a retry may succeed.
 * - Throttled: the engine asked us to slow down (DynamoDB throttling, SQLite busy past its timeout, a
 *   refused connection) after the engine's own retries; the request did not take effect.
 * - StorageFailure: the storage itself failed (disk full, I/O error, a read-only file, a timeout or
 *   lost connection of a write that may or may not have taken effect: check before retrying).
 * - InternalError: anything else (a bug, an unexpected engine answer, a missing table): not retried.
 * A missing item is not an error: get answers undefined, batchGet leaves it out, update creates it.
 * Per method, below, only the errors beyond InvalidInput / Throttled / StorageFailure are named.
 */
import type { ItemKey } from '../core/keys.ts';

export type { ItemKey };

export interface Item {
  PK: string;
  SK: string;
  GSI1PK?: string;
  GSI1SK?: string;
  [attribute: string]: unknown;
}

export type Scalar = string | number | boolean | null;

/**
 * Conditions over the current item. Comparisons with a missing attribute, or between a string and a
 * number, are false (as in DynamoDB); use `not` for inequality.
 */
export type Condition =
  | { kind: 'exists' }
  | { kind: 'notExists' }
  | { kind: 'attrExists'; attr: string }
  | { kind: 'attrNotExists'; attr: string }
  | { kind: 'eq'; attr: string; value: Scalar }
  | { kind: 'lt' | 'le' | 'gt' | 'ge'; attr: string; value: string | number }
  | { kind: 'in'; attr: string; values: Scalar[] }
  | { kind: 'and'; all: Condition[] }
  | { kind: 'or'; any: Condition[] }
  | { kind: 'not'; cond: Condition };

export const cond = {
  exists: (): Condition => ({ kind: 'exists' }),
  notExists: (): Condition => ({ kind: 'notExists' }),
  attrExists: (attr: string): Condition => ({ kind: 'attrExists', attr }),
  attrNotExists: (attr: string): Condition => ({ kind: 'attrNotExists', attr }),
  eq: (attr: string, value: Scalar): Condition => ({ kind: 'eq', attr, value }),
  lt: (attr: string, value: string | number): Condition => ({ kind: 'lt', attr, value }),
  le: (attr: string, value: string | number): Condition => ({ kind: 'le', attr, value }),
  gt: (attr: string, value: string | number): Condition => ({ kind: 'gt', attr, value }),
  ge: (attr: string, value: string | number): Condition => ({ kind: 'ge', attr, value }),
  in: (attr: string, values: Scalar[]): Condition => ({ kind: 'in', attr, values }),
  and: (...all: Condition[]): Condition => ({ kind: 'and', all }),
  or: (...any: Condition[]): Condition => ({ kind: 'or', any }),
  not: (c: Condition): Condition => ({ kind: 'not', cond: c }),
};

/**
 * An update: `set` assigns attributes, `add` adds to numbers (a missing attribute counts as 0),
 * `remove` deletes attributes. PK and SK cannot change. Updating a missing item creates it (upsert),
 * unless the condition says otherwise.
 */
export interface UpdateSpec {
  set?: Record<string, unknown>;
  add?: Record<string, number>;
  remove?: string[];
}

export type SkCondition =
  | { beginsWith: string }
  | { eq: string }
  | { lt: string }
  | { le: string }
  | { gt: string }
  | { ge: string }
  | { between: [string, string] };

export interface QueryInput {
  /** Query GSI1 instead of the base table. Never consistent on DynamoDB. */
  index?: 'GSI1';
  pk: string;
  sk?: SkCondition;
  descending?: boolean;
  /** Items per page; default and maximum MAX_PAGE_LIMIT. */
  limit?: number;
  /** The opaque cursor of the previous page of the same query. */
  cursor?: string;
  /** Strongly consistent read (base table only). */
  consistent?: boolean;
}

export interface Page {
  items: Item[];
  /** Present when more items may follow; pass it back as `cursor`. */
  cursor?: string;
}

export type TransactOp =
  | { op: 'put'; item: Item; condition?: Condition }
  | { op: 'update'; key: ItemKey; update: UpdateSpec; condition?: Condition }
  | { op: 'delete'; key: ItemKey; condition?: Condition }
  | { op: 'check'; key: ItemKey; condition: Condition };

export interface WriteOptions {
  condition?: Condition;
}

export interface TransactOptions {
  /** Idempotency token: a retry with the same token and operations is not applied twice (DynamoDB). */
  token?: string;
}

/**
 * A page of a scan of the base table. With `segment` and `totalSegments` (both or neither; total 1 to
 * MAX_SCAN_SEGMENTS, 0 <= segment < total, InvalidInput otherwise) the pages are those of one of
 * `totalSegments` disjoint parts of the table whose union is the table (DynamoDB's parallel Scan:
 * Segment / TotalSegments). Every item of one partition (PK) lies in one segment. The cursor carries
 * the segment: a cursor of another segment, or of an unsegmented scan, is InvalidInput.
 */
export interface ScanOptions {
  cursor?: string;
  limit?: number;
  segment?: number;
  totalSegments?: number;
}

export const MAX_ITEM_BYTES = 400 * 1024;
export const MAX_TRANSACT_OPS = 100;
export const MAX_TRANSACT_BYTES = 4 * 1024 * 1024;
export const MAX_PAGE_LIMIT = 1000;
/** DynamoDB's limit of TotalSegments. */
export const MAX_SCAN_SEGMENTS = 1000;

/**
 * A read-only view of the whole base table, for backups. With `pointInTime` every page comes from one
 * instant (the SQLite engine copies the database with SQLite's online backup API and reads the copy).
 * Without it the pages are a live, strongly consistent scan of the table (DynamoDB Scan): a write made
 * while it runs may or may not appear, so a caller that needs one instant must stop the writers first
 * (the maintenance fence). Always close it.
 */
export interface ItemSnapshot {
  readonly pointInTime: boolean;
  /** Every item of the view, in pages, like ItemStore.scan (segments included). */
  scan(opts?: ScanOptions): Promise<Page>;
  close(): Promise<void>;
}

export interface ItemStore {
  /** 'sqlite' | 'dynamodb': for diagnostics only; services never branch on it. */
  readonly engine: string;
  /** Where the table lives (file path or table URL), for reports. */
  readonly location: string;
  /**
   * The number of concurrent scan segments worth using (SQLite 1: one file, segments are filtered
   * reads of the whole table; DynamoDB 8). Services choose segments from it, never from `engine`; read
   * it through scanParallelism (store/scan-options.ts), since a wrapper may not have it (then 1).
   */
  readonly scanSegments?: number;

  /**
   * Makes the table usable and checks it: creates it when absent (DynamoDB: the table and GSI1, waiting
   * until they are ACTIVE; SQLite: the file and schema, created when the store opened) and answers
   * whether this call created it. InvalidInput when a table of that name exists without ALP's schema
   * (it is left unchanged); Throttled when it does not become usable in time. Idempotent and safe to
   * run from several nodes at once. Entry points that create an installation (init, restore) call it.
   */
  prepare(): Promise<{ created: boolean }>;

  /** undefined when the item is absent. */
  get(key: ItemKey, opts?: { consistent?: boolean }): Promise<Item | undefined>;
  /**
   * Missing keys are left out; order follows `keys`. Strongly consistent unless `consistent: false`
   * (DynamoDB: half the read units; for listings, never for rules).
   */
  batchGet(keys: ItemKey[], opts?: { consistent?: boolean }): Promise<Item[]>;
  /** ConditionFailed when `opts.condition` does not hold (nothing written). */
  put(item: Item, opts?: WriteOptions): Promise<void>;
  /**
   * Returns the item as it is after the update. ConditionFailed when `opts.condition` does not hold.
   * A conditional or ADD update whose outcome is unknown (a lost connection) fails with StorageFailure,
   * never with a retry that could apply it twice.
   */
  update(key: ItemKey, update: UpdateSpec, opts?: WriteOptions): Promise<Item>;
  /** Deleting a missing item is no error. ConditionFailed when `opts.condition` does not hold. */
  delete(key: ItemKey, opts?: WriteOptions): Promise<void>;
  /** InvalidInput for a cursor of another query. */
  query(q: QueryInput): Promise<Page>;
  /**
   * All-or-nothing. ConditionFailed names the first failing operation (`failedIndex`);
   * TransactionConflict when concurrent transactions kept cancelling it; InvalidInput when the token was
   * used for other operations.
   */
  transactWrite(ops: TransactOp[], opts?: TransactOptions): Promise<void>;
  /**
   * Unconditional puts of many items (restore, compaction, bulk loads). Atomic on SQLite; on DynamoDB
   * applied in batches, so callers must tolerate a partial application and retry the whole call.
   */
  batchPut(items: Item[]): Promise<void>;
  /**
   * Every item of the base table, in pages (strongly consistent), or one segment of it (ScanOptions).
   * For maintenance only, never a request path.
   */
  scan(opts?: ScanOptions): Promise<Page>;
  /**
   * An opaque mark of "now" for scanChangedSince. Cheap (one read at most); never writes.
   */
  changeMark(): Promise<string>;
  /**
   * Pages of items that changed since `mark` (a changeMark() of this store): every item put or updated
   * (put, update, transactWrite puts and updates, batchPut) by a write that committed after changeMark()
   * returned is in the pages, as `get` returns it then. Deletes are not reported. Conservative: items
   * written before the mark may appear too, and an item may appear more than once (it changed again
   * while the pages were read). Segments and cursors as in scan. InvalidInput for a mark that is not
   * one of this engine's.
   * - SQLite: every write transaction appends one row (the keys it put or updated) to a change log,
   *   and this reads only the log rows after the mark, de-duplicates their keys and returns the items
   *   as they are now: O(changes). A mark older than the log's horizon (24 h / 1,000,000 write
   *   transactions), or of another file, or followed by very many changes: the whole table, then the
   *   changes since it began (sqlite/changes.ts).
   * - DynamoDB: (for now) every item of the table, i.e. a full (optionally segmented) scan: correct by
   *   construction, O(table). DynamoDB has no cheap "changed since" read of the base table; a Streams
   *   reader would be one (not in this engine).
   */
  scanChangedSince(mark: string, opts?: ScanOptions): Promise<Page>;
  /**
   * Whether scanChangedSince(mark) would read only the changes since the mark right now (SQLite: the
   * log reaches back to it and they are not very many), not the whole table (DynamoDB: never). Lets a
   * caller that keeps state between scans (the retention plan's reference cache) choose a whole scan
   * instead. Optional for wrappers: absent means false.
   */
  changesAnswerable?(mark: string): Promise<boolean>;
  /**
   * A consistent view of the whole table for a backup (see ItemSnapshot). `dir` is where an engine that
   * copies the table may keep its temporary copy (default: beside the table); closing removes it.
   */
  snapshot(opts?: { dir?: string }): Promise<ItemSnapshot>;
  /** Releases the engine; idempotent. Any later call fails with InternalError (a bug of the caller). */
  close(): Promise<void>;
}

/** Every item a query matches, following its cursors (pass `consistent: true` for rules). */
export async function queryAll(items: ItemStore, q: Omit<QueryInput, 'cursor'>): Promise<Item[]> {
  const out: Item[] = [];
  let cursor: string | undefined;
  do {
    const page = await items.query(cursor ? { ...q, cursor } : q);
    out.push(...page.items);
    cursor = page.cursor;
  } while (cursor);
  return out;
}
