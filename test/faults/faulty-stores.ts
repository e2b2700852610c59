/**
 * Fault injection at the contract boundary (issue 10, part 2): an ItemStore and a ContentStore that
 * delegate to real engines and inject a fault at chosen calls — by store, method and call number, or
 * by a predicate over the arguments. Every call is traced, so a table-driven test can first record an
 * operation's calls and then fault each of them in turn.
 *
 * Fault kinds, as an engine would surface them at the contract:
 *   EIO, ENOSPC        a NodeJS.ErrnoException with that code (ENOSPC only on writes)
 *   THROTTLED          the contract's Throttled (DynamoDB throttling, SQLite busy, S3 SlowDown)
 *   TIMEOUT            a timeout before the request took effect (rejected at once: no real sleeping)
 *   TIMEOUT_AFTER      a timeout after a write took effect (the response was lost): the ambiguous case
 *   TORN_WRITE         a put/stage/copy that writes a prefix of the body through the real engine, then
 *                      fails with ENOSPC: the engine must leave nothing at the key
 *   FSYNC              a durability failure after the bytes were published (put/publish/copy) or
 *                      removed (delete): the real call completed, then EIO from fsync
 *   PARTIAL_READ       a read whose bytes end early: `get` verifies what came (IntegrityError before
 *                      the end, as the engines do), `readRaw` (unverified by contract) ends cleanly short
 *   READ_RESET         a read stream that fails mid-way with ECONNRESET
 */
import { Readable } from 'node:stream';
import {
  type Body,
  type ContentStore,
  type GetOptions,
  type ListPage,
  listAll,
  type ObjectInfo,
  type PutOptions,
  type PutResult,
  type StagedObject,
  type StorageClass,
} from '../../src/content/content-store.ts';
import { VerifyingStream } from '../../src/content/verify-stream.ts';
import type { Digest } from '../../src/core/digest.ts';
import { Throttled } from '../../src/core/errors.ts';
import type {
  Item,
  ItemKey,
  ItemSnapshot,
  ItemStore,
  Page,
  QueryInput,
  ScanOptions,
  TransactOp,
  TransactOptions,
  UpdateSpec,
  WriteOptions,
} from '../../src/store/item-store.ts';

export const FAULT_KINDS = [
  'EIO',
  'ENOSPC',
  'THROTTLED',
  'TIMEOUT',
  'TIMEOUT_AFTER',
  'TORN_WRITE',
  'FSYNC',
  'PARTIAL_READ',
  'READ_RESET',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export type StoreName = 'items' | 'content';

const ITEM_READS = ['get', 'batchGet', 'query', 'scan'];
const ITEM_WRITES = ['put', 'update', 'delete', 'transactWrite', 'batchPut'];

/** The fault kinds that make sense at a call of `store.method`. */
export function applicableKinds(store: StoreName, method: string): FaultKind[] {
  if (store === 'items') {
    if (ITEM_READS.includes(method)) return ['EIO', 'THROTTLED', 'TIMEOUT'];
    if (ITEM_WRITES.includes(method)) return ['EIO', 'ENOSPC', 'THROTTLED', 'TIMEOUT', 'TIMEOUT_AFTER'];
    if (method === 'snapshot') return ['EIO', 'ENOSPC', 'TIMEOUT'];
    return [];
  }
  switch (method) {
    case 'put':
      return ['EIO', 'ENOSPC', 'THROTTLED', 'TIMEOUT', 'TORN_WRITE', 'FSYNC'];
    case 'stage':
      return ['EIO', 'ENOSPC', 'THROTTLED', 'TIMEOUT', 'TORN_WRITE'];
    case 'publish':
      return ['EIO', 'ENOSPC', 'TIMEOUT', 'FSYNC'];
    case 'discard':
      return ['EIO', 'TIMEOUT'];
    case 'copy':
      return ['EIO', 'ENOSPC', 'THROTTLED', 'TIMEOUT', 'TORN_WRITE', 'FSYNC', 'PARTIAL_READ'];
    case 'get':
    case 'readRaw':
      return ['EIO', 'THROTTLED', 'TIMEOUT', 'PARTIAL_READ', 'READ_RESET'];
    case 'head':
    case 'listPage':
      return ['EIO', 'THROTTLED', 'TIMEOUT'];
    case 'delete':
      return ['EIO', 'THROTTLED', 'TIMEOUT', 'TIMEOUT_AFTER', 'FSYNC'];
    default:
      return [];
  }
}

export interface FaultRule {
  store: StoreName;
  method: string;
  /** The n-th call (1-based) of this store's method, counted from when the plan was armed. */
  call?: number;
  /** Or: fault every call this predicate accepts. */
  when?: (args: unknown[], n: number) => boolean;
  kind: FaultKind;
  /** How many times the rule fires (default once). */
  times?: number;
}

export interface TracedCall {
  store: StoreName;
  method: string;
  n: number;
  key?: string;
}

export function errnoError(code: 'EIO' | 'ENOSPC' | 'ECONNRESET' | 'ETIMEDOUT', syscall: string): NodeJS.ErrnoException {
  const text = {
    EIO: 'i/o error',
    ENOSPC: 'no space left on device',
    ECONNRESET: 'socket hang up',
    ETIMEDOUT: 'request timed out',
  }[code];
  const errno = { EIO: -5, ENOSPC: -28, ECONNRESET: -104, ETIMEDOUT: -110 }[code];
  const e = new Error(`${code}: ${text}, ${syscall} (injected)`) as NodeJS.ErrnoException;
  e.code = code;
  e.errno = errno;
  e.syscall = syscall;
  return e;
}

/** What a client library reports when a request timed out: an error named TimeoutError with ETIMEDOUT. */
export function timeoutError(method: string): NodeJS.ErrnoException {
  const e = errnoError('ETIMEDOUT', method);
  e.name = 'TimeoutError';
  return e;
}

/** The plan: which calls fail how. Calls are counted and traced only while it is armed. */
export class FaultPlan {
  trace: TracedCall[] = [];
  fired: Array<TracedCall & { kind: FaultKind }> = [];
  private counts = new Map<string, number>();
  private remaining = new Map<FaultRule, number>();
  rules: FaultRule[] = [];
  armed = false;

  constructor(rules?: FaultRule[]) {
    if (rules) this.arm(rules);
  }

  /** Starts counting (and tracing) calls from zero with these rules; [] only traces. */
  arm(rules: FaultRule[]): void {
    this.rules = rules;
    this.remaining = new Map(rules.map((r) => [r, r.times ?? 1]));
    this.counts = new Map();
    this.trace = [];
    this.fired = [];
    this.armed = true;
  }

  /** Counts the call and returns the fault to inject, if any. */
  next(store: StoreName, method: string, args: unknown[]): FaultKind | undefined {
    if (!this.armed) return undefined;
    const id = `${store}.${method}`;
    const n = (this.counts.get(id) ?? 0) + 1;
    this.counts.set(id, n);
    const key = typeof args[0] === 'string' ? args[0] : undefined;
    const call: TracedCall = { store, method, n, ...(key ? { key } : {}) };
    this.trace.push(call);
    for (const r of this.rules) {
      if (r.store !== store || r.method !== method) continue;
      const left = this.remaining.get(r) ?? 0;
      if (left <= 0) continue;
      if (r.call !== undefined && r.call !== n) continue;
      if (r.when && !r.when(args, n)) continue;
      this.remaining.set(r, left - 1);
      this.fired.push({ ...call, kind: r.kind });
      return r.kind;
    }
    return undefined;
  }

  disarm(): void {
    this.armed = false;
  }
}

/** Rejects at once with the error of a fault that strikes before the call reaches the engine. */
function before(kind: FaultKind, method: string): Error {
  switch (kind) {
    case 'EIO':
      return errnoError('EIO', method);
    case 'ENOSPC':
      return errnoError('ENOSPC', method);
    case 'THROTTLED':
      return new Throttled(`the storage engine throttled ${method} (injected); retry later`, { operation: method });
    default:
      return timeoutError(method);
  }
}

export class FaultyItemStore implements ItemStore {
  constructor(
    readonly inner: ItemStore,
    readonly plan: FaultPlan,
  ) {}

  get engine(): string {
    return this.inner.engine;
  }
  get location(): string {
    return this.inner.location;
  }

  private async call<T>(method: string, args: unknown[], run: () => Promise<T>): Promise<T> {
    const kind = this.plan.next('items', method, args);
    if (!kind) return run();
    if (kind === 'TIMEOUT_AFTER') {
      await run();
      throw timeoutError(method);
    }
    throw before(kind, method);
  }

  /** Not a fault point: preparing happens before a workload starts. */
  prepare(): Promise<{ created: boolean }> {
    return this.inner.prepare();
  }

  get(key: ItemKey, opts?: { consistent?: boolean }): Promise<Item | undefined> {
    return this.call('get', [key], () => this.inner.get(key, opts));
  }
  batchGet(keys: ItemKey[]): Promise<Item[]> {
    return this.call('batchGet', [keys], () => this.inner.batchGet(keys));
  }
  put(item: Item, opts?: WriteOptions): Promise<void> {
    return this.call('put', [item], () => this.inner.put(item, opts));
  }
  update(key: ItemKey, update: UpdateSpec, opts?: WriteOptions): Promise<Item> {
    return this.call('update', [key], () => this.inner.update(key, update, opts));
  }
  delete(key: ItemKey, opts?: WriteOptions): Promise<void> {
    return this.call('delete', [key], () => this.inner.delete(key, opts));
  }
  query(q: QueryInput): Promise<Page> {
    return this.call('query', [q], () => this.inner.query(q));
  }
  transactWrite(ops: TransactOp[], opts?: TransactOptions): Promise<void> {
    return this.call('transactWrite', [ops], () => this.inner.transactWrite(ops, opts));
  }
  batchPut(items: Item[]): Promise<void> {
    return this.call('batchPut', [items], () => this.inner.batchPut(items));
  }
  scan(opts?: ScanOptions): Promise<Page> {
    return this.call('scan', [opts], () => this.inner.scan(opts));
  }
  changeMark(): Promise<string> {
    return this.call('changeMark', [], () => this.inner.changeMark());
  }
  scanChangedSince(mark: string, opts?: ScanOptions): Promise<Page> {
    return this.call('scanChangedSince', [mark, opts], () => this.inner.scanChangedSince(mark, opts));
  }
  snapshot(opts?: { dir?: string }): Promise<ItemSnapshot> {
    return this.call('snapshot', [opts], () => this.inner.snapshot(opts));
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/** Yields the first `keep` bytes of a body, then throws `error` (a write interrupted by a full disk). */
async function* prefixThenFail(body: Body, keep: number, error: Error): AsyncGenerator<Uint8Array> {
  let sent = 0;
  for await (const chunk of body as AsyncIterable<Uint8Array>) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    if (sent + buf.length >= keep) {
      if (keep > sent) yield buf.subarray(0, keep - sent);
      throw error;
    }
    sent += buf.length;
    yield buf;
  }
  throw error;
}

/** Yields the first `keep` bytes of a stream, then ends cleanly (or fails with `error`). */
async function* truncated(source: AsyncIterable<Uint8Array>, keep: number, error?: Error): AsyncGenerator<Buffer> {
  let sent = 0;
  try {
    for await (const chunk of source) {
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
      if (sent + buf.length >= keep) {
        if (keep > sent) yield buf.subarray(0, keep - sent);
        break;
      }
      sent += buf.length;
      yield buf;
    }
  } finally {
    (source as Readable).destroy?.();
  }
  if (error) throw error;
}

export class FaultyContentStore implements ContentStore {
  constructor(
    readonly inner: ContentStore,
    readonly plan: FaultPlan,
  ) {}

  get engine(): string {
    return this.inner.engine;
  }
  get location(): string {
    return this.inner.location;
  }
  get hasStorageClasses(): boolean {
    return this.inner.hasStorageClasses;
  }

  async put(key: string, body: Body, opts?: PutOptions): Promise<PutResult> {
    const kind = this.plan.next('content', 'put', [key]);
    if (!kind) return this.inner.put(key, body, opts);
    if (kind === 'TORN_WRITE') {
      // The engine writes part of the body, then the disk fills up: nothing may be left at the key.
      return this.inner.put(key, prefixThenFail(body, 1000, errnoError('ENOSPC', 'write')), opts);
    }
    if (kind === 'FSYNC') {
      await this.inner.put(key, body, opts);
      throw errnoError('EIO', 'fsync');
    }
    throw before(kind, 'put');
  }

  async stage(key: string, body: Body, opts?: PutOptions): Promise<StagedObject> {
    const kind = this.plan.next('content', 'stage', [key]);
    if (!kind) return this.inner.stage(key, body, opts);
    if (kind === 'TORN_WRITE') return this.inner.stage(key, prefixThenFail(body, 1000, errnoError('ENOSPC', 'write')), opts);
    throw before(kind, 'stage');
  }

  async publish(staged: StagedObject[]): Promise<void> {
    const kind = this.plan.next('content', 'publish', [staged[0]?.key]);
    if (!kind) return this.inner.publish(staged);
    if (kind === 'FSYNC') {
      // The objects made it to their keys, but the directory fsync failed: durability is not assured.
      await this.inner.publish(staged);
      throw errnoError('EIO', 'fsync');
    }
    // Failed before anything was renamed: the staged objects are still the caller's to discard.
    throw before(kind, 'publish');
  }

  async discard(staged: StagedObject[]): Promise<void> {
    const kind = this.plan.next('content', 'discard', [staged[0]?.key]);
    if (kind) throw before(kind, 'discard');
    return this.inner.discard(staged);
  }

  async get(key: string, expectedDigest: Digest, opts: GetOptions = {}): Promise<Readable> {
    const kind = this.plan.next('content', 'get', [key]);
    if (!kind) return this.inner.get(key, expectedDigest, opts);
    if (kind === 'PARTIAL_READ') {
      // The storage returned fewer bytes than the object has: the verifying read fails before its end.
      const info = await this.inner.head(key);
      const raw = await this.inner.readRaw(key);
      const verifier = new VerifyingStream({ key, expectedDigest, expectedSize: opts.expectedSize, start: opts.start, end: opts.end });
      return Readable.from(truncated(raw, Math.floor((info?.size ?? 0) / 2))).pipe(verifier);
    }
    if (kind === 'READ_RESET') {
      const stream = await this.inner.get(key, expectedDigest, opts);
      return Readable.from(truncated(stream, 1, errnoError('ECONNRESET', 'read')));
    }
    throw before(kind, 'get');
  }

  async readRaw(key: string): Promise<Readable> {
    const kind = this.plan.next('content', 'readRaw', [key]);
    if (!kind) return this.inner.readRaw(key);
    if (kind === 'PARTIAL_READ') {
      const info = await this.inner.head(key);
      return Readable.from(truncated(await this.inner.readRaw(key), Math.floor((info?.size ?? 0) / 2)));
    }
    if (kind === 'READ_RESET') return Readable.from(truncated(await this.inner.readRaw(key), 1, errnoError('ECONNRESET', 'read')));
    throw before(kind, 'readRaw');
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    const kind = this.plan.next('content', 'head', [key]);
    if (kind) throw before(kind, 'head');
    return this.inner.head(key);
  }

  async listPage(prefix: string, opts?: { cursor?: string; limit?: number }): Promise<ListPage> {
    const kind = this.plan.next('content', 'listPage', [prefix]);
    if (kind) throw before(kind, 'listPage');
    return this.inner.listPage(prefix, opts);
  }

  list(prefix: string): AsyncIterable<ObjectInfo> {
    return listAll(this, prefix);
  }

  async copy(sourceKey: string, targetKey: string, opts: { expectedDigest: Digest; storageClass?: StorageClass }): Promise<PutResult> {
    const kind = this.plan.next('content', 'copy', [sourceKey]);
    if (!kind) return this.inner.copy(sourceKey, targetKey, opts);
    if (kind === 'TORN_WRITE') {
      const source = await this.inner.get(sourceKey, opts.expectedDigest);
      return this.inner.put(targetKey, prefixThenFail(source, 1000, errnoError('ENOSPC', 'write')), {
        expectedDigest: opts.expectedDigest,
        ...(opts.storageClass ? { storageClass: opts.storageClass } : {}),
      });
    }
    if (kind === 'PARTIAL_READ') {
      const info = await this.inner.head(sourceKey);
      const raw = await this.inner.readRaw(sourceKey);
      const verified = Readable.from(truncated(raw, Math.floor((info?.size ?? 0) / 2))).pipe(
        new VerifyingStream({ key: sourceKey, expectedDigest: opts.expectedDigest }),
      );
      return this.inner.put(targetKey, verified, { expectedDigest: opts.expectedDigest });
    }
    if (kind === 'FSYNC') {
      await this.inner.copy(sourceKey, targetKey, opts);
      throw errnoError('EIO', 'fsync');
    }
    throw before(kind, 'copy');
  }

  async delete(key: string): Promise<boolean> {
    const kind = this.plan.next('content', 'delete', [key]);
    if (!kind) return this.inner.delete(key);
    if (kind === 'FSYNC') {
      await this.inner.delete(key);
      throw errnoError('EIO', 'fsync');
    }
    if (kind === 'TIMEOUT_AFTER') {
      await this.inner.delete(key);
      throw timeoutError('delete');
    }
    throw before(kind, 'delete');
  }

  cleanupInterrupted(): Promise<number> {
    return this.inner.cleanupInterrupted();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
