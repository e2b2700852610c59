/**
 * The reference index written at write time (issue 17 item 1; docs/design.md §6 "reference index"):
 * `indexedContent` decorates a ContentStore so that every object written under an indexed prefix gets
 * its entry (system/ref-index.ts) from the same pass that hashes it. The body is teed through a
 * ReferenceScanner (core/digest-scan.ts: 64 KiB reads with straddling, gzip members decompressed with
 * the 1 GiB bound) while the engine streams it; once the put has returned (durable) the entry is written
 * with a plain `items.put`, digest and size from the PutResult.
 *
 * The conservative rule: a missing entry means "scan the bytes". So an entry is written only for a
 * write that succeeded and a scan that finished (a decompression bomb, a history segment that is not
 * gzip: none); a failed entry write is skipped silently and never fails the write; more digests than an
 * entry holds are written as `overflow` (scan me). Entries are never written for a write that failed.
 *
 * - put: as above; `repair` (restore) writes are indexed like any other.
 * - stage/publish: scanned during stage, written after publish succeeded; discard forgets.
 * - stage/publish of objects a transaction then makes referenced (a version's content and
 *   metadata.json: lifecycle/artifacts.ts): the caller claims the entries before publishing
 *   (claimRefIndexOps) and commits them as ops of that transaction, so they cost no commit of their own
 *   and exist exactly when the version does. Publish writes no entry for a claimed object; a
 *   transaction that fails leaves none (the object is an unreferenced orphan without an entry:
 *   retention scans its bytes). The op puts the item `items.put` would write (bounded by
 *   MAX_INDEXED_DIGESTS: ~0.2 MB at most, a valid transaction item on every engine, two well under the
 *   4 MB a transaction holds), so it is never what makes the version's transaction fail.
 * - copy (archive copies, server-side on S3, never read back): the source's entry is copied to the
 *   target when it is well-formed and has the digest and size of the copy; otherwise none.
 * - delete (retention's purge): the entry is deleted after the object was.
 * Indexed keys: the immutable prefixes (artifacts/, executions/, archive/), packed history segments
 * (gzip required) and provenance/ (mutable: each put replaces the entry; readers compare the entry's
 * digest with the digest the items record, as for every entry). Everything else passes through.
 *
 * Every other property and method is the engine's own (a Proxy): `location`, `hasStorageClasses`, the
 * optional storage-class and lifecycle methods exactly when the engine has them, engine extras.
 */
import {
  type Body,
  type ContentStore,
  knownBodySize,
  type PutOptions,
  type PutResult,
  type StagedObject,
} from '../content/content-store.ts';
import type { Clock } from '../core/clock.ts';
import { ReferenceScanner } from '../core/digest-scan.ts';
import { HISTORY_SEGMENT_PREFIX, IMMUTABLE_PREFIXES, MUTABLE_PREFIXES } from '../core/object-keys.ts';
import type { ItemStore, TransactOp } from '../store/item-store.ts';
import type { Layout } from './layout.ts';
import {
  contentRootId,
  deleteRefIndexEntry,
  entryOf,
  MAX_INDEXED_DIGESTS,
  putRefIndexEntry,
  type RefIndexEntry,
  refIndexItem,
  refIndexKey,
} from './ref-index.ts';

const INDEXED_PREFIXES: readonly string[] = [...IMMUTABLE_PREFIXES, HISTORY_SEGMENT_PREFIX, ...MUTABLE_PREFIXES];
const INNER = Symbol('alp.indexedContent.inner');
const INDEXER = Symbol('alp.indexedContent.indexer');

/** Whether writes at `key` are indexed. */
export function isIndexedKey(key: string): boolean {
  return INDEXED_PREFIXES.some((p) => key.startsWith(p));
}

function scannerFor(key: string): ReferenceScanner {
  return new ReferenceScanner({
    what: `object ${key}`,
    requireGzip: key.startsWith(HISTORY_SEGMENT_PREFIX),
    maxDigests: MAX_INDEXED_DIGESTS,
  });
}

/** The engine an indexed store decorates (itself when it is not one). */
export function innerContent(content: ContentStore): ContentStore {
  return (content as { [INNER]?: ContentStore })[INNER] ?? content;
}

/** Passes the body through unchanged, pushing every chunk into the scanner on the way. */
async function* tee(body: Body, scanner: ReferenceScanner): AsyncGenerator<Uint8Array> {
  let whole = false;
  try {
    for await (const chunk of body as AsyncIterable<Uint8Array>) {
      await scanner.push(chunk);
      yield chunk;
    }
    whole = true;
  } finally {
    if (!whole) scanner.abort();
  }
}

/**
 * The options an indexed body is staged with: the tee hides an in-memory array of chunks from the
 * engine, so its size (known here) goes along as the declared size — the fs engine then hashes a small
 * body on its own thread instead of through the hashing worker (content/fs/body-writer.ts).
 */
function teedOptions(body: Body, opts: PutOptions | undefined): PutOptions | undefined {
  if (opts?.sizeHint !== undefined) return opts;
  const size = knownBodySize(body);
  return size === undefined ? opts : { ...opts, sizeHint: size };
}

/** What an entry for a finished scan says, or undefined when the scan failed (then: no entry). */
async function entryFrom(key: string, result: PutResult, scanner: ReferenceScanner, clock: Clock): Promise<RefIndexEntry | undefined> {
  let digests: Set<string>;
  try {
    digests = await scanner.finish();
  } catch {
    return undefined;
  }
  if (scanner.bytes !== result.size) return undefined;
  const overflow = scanner.overflow || digests.size > MAX_INDEXED_DIGESTS;
  return {
    key,
    digest: result.digest,
    size: result.size,
    digests: overflow ? [] : [...digests].sort(),
    ...(overflow ? { overflow: true } : {}),
    indexed_at: clock.now().toISOString(),
  };
}

class Indexer {
  private rootOf: { location: string; id: string } | undefined;
  /** Scans of staged objects, by the engine's StagedObject, until published or discarded. */
  private readonly staged = new WeakMap<StagedObject, Promise<RefIndexEntry | undefined>>();

  constructor(
    readonly inner: ContentStore,
    private readonly items: ItemStore,
    private readonly layout: () => Layout,
    private readonly clock: Clock,
  ) {}

  /** The content root's id, from the engine's location as it is now. */
  private get root(): string {
    const location = this.inner.location;
    if (this.rootOf?.location !== location) this.rootOf = { location, id: contentRootId(location) };
    return this.rootOf.id;
  }

  async put(key: string, body: Body, opts?: PutOptions): Promise<PutResult> {
    if (!isIndexedKey(key)) return this.inner.put(key, body, opts);
    const scanner = scannerFor(key);
    const result = await this.inner.put(key, tee(body, scanner), teedOptions(body, opts));
    await this.write(key, await entryFrom(key, result, scanner, this.clock));
    return result;
  }

  async stage(key: string, body: Body, opts?: PutOptions): Promise<StagedObject> {
    if (!isIndexedKey(key)) return this.inner.stage(key, body, opts);
    const scanner = scannerFor(key);
    const staged = await this.inner.stage(key, tee(body, scanner), teedOptions(body, opts));
    const entry = entryFrom(key, staged, scanner, this.clock);
    this.staged.set(staged, entry);
    return staged;
  }

  async publish(staged: StagedObject[]): Promise<void> {
    const entries = staged.map((s) => this.staged.get(s));
    for (const s of staged) this.staged.delete(s);
    await this.inner.publish(staged);
    const written: RefIndexEntry[] = [];
    for (const [i, s] of staged.entries()) {
      const entry = await entries[i];
      if (entry) written.push(entry);
      else if (entries[i]) await this.write(s.key, undefined);
    }
    if (written.length === 1) await this.write((written[0] as RefIndexEntry).key, written[0]);
    else if (written.length > 1) {
      // One write for the objects published together (a version's content and metadata.json): on
      // SQLite one commit, not one per object.
      const root = this.root;
      const shards = this.shards();
      await this.items.batchPut(written.map((e) => refIndexItem(root, shards, e))).catch(async () => {
        for (const e of written) await this.write(e.key, undefined);
      });
    }
  }

  /** See claimRefIndexOps. Forgets the scans at once (before its first await): publish writes none of them. */
  async claim(staged: readonly StagedObject[]): Promise<TransactOp[]> {
    const scans = staged.map((s) => this.staged.get(s));
    for (const s of staged) this.staged.delete(s);
    const found = await Promise.all(scans);
    const root = this.root;
    const shards = this.shards();
    return staged.flatMap((s, i): TransactOp[] => {
      const entry = found[i];
      if (entry) return [{ op: 'put', item: refIndexItem(root, shards, entry) }];
      // Not staged here (a key outside the indexed prefixes), or a create-only key: nothing to undo.
      if (!scans[i] || isCreateOnly(s.key)) return [];
      return [{ op: 'delete', key: refIndexKey(root, s.key, shards) }];
    });
  }

  async discard(staged: StagedObject[]): Promise<void> {
    for (const s of staged) this.staged.delete(s);
    await this.inner.discard(staged);
  }

  async copy(sourceKey: string, targetKey: string, opts: Parameters<ContentStore['copy']>[2]): Promise<PutResult> {
    const result = await this.inner.copy(sourceKey, targetKey, opts);
    if (!isIndexedKey(targetKey)) return result;
    try {
      const source = entryOf(await this.items.get(refIndexKey(this.root, sourceKey, this.shards()), { consistent: true }));
      const same = source && source.key === sourceKey && source.digest === result.digest && source.size === result.size;
      await this.write(targetKey, same ? { ...source, key: targetKey, indexed_at: this.clock.now().toISOString() } : undefined);
    } catch {
      // No entry for the copy: it is scanned (or backfilled) like any object without one.
    }
    return result;
  }

  async delete(key: string): Promise<boolean> {
    const existed = await this.inner.delete(key);
    if (isIndexedKey(key)) await deleteRefIndexEntry(this.items, this.root, this.shards(), key).catch(() => {});
    return existed;
  }

  /**
   * Writes the entry; a failure is skipped (a missing entry means "scan the bytes"). Without an entry
   * to write, a mutable key's previous entry is removed: it described bytes that were replaced.
   */
  private async write(key: string, entry: RefIndexEntry | undefined): Promise<void> {
    try {
      if (entry) await putRefIndexEntry(this.items, this.root, this.shards(), entry);
      else if (!isCreateOnly(key)) await deleteRefIndexEntry(this.items, this.root, this.shards(), key);
    } catch {
      if (entry && !isCreateOnly(key)) await deleteRefIndexEntry(this.items, this.root, this.shards(), key).catch(() => {});
    }
  }

  private shards(): number {
    return this.layout().index_shards;
  }
}

function isCreateOnly(key: string): boolean {
  return !MUTABLE_PREFIXES.some((p) => key.startsWith(p));
}

/**
 * The reference-index ops of staged objects, for a caller that commits them in its own transaction
 * (see the module comment): a put of the entry for each object whose scan finished, nothing for one
 * whose scan did not (a create-only key) or a delete of the stale entry (a mutable key). Call it
 * after staging and before `publish`, which then writes no entry for these objects; add the ops to
 * the transaction only when `publish` succeeded. Never rejects. A store that is not indexed: none.
 */
export function claimRefIndexOps(content: ContentStore, staged: readonly StagedObject[]): Promise<TransactOp[]> {
  const indexer = (content as { [INDEXER]?: Indexer })[INDEXER];
  // A failure here only costs the entries (then: scan the bytes), never the caller's write.
  return indexer ? indexer.claim(staged).catch(() => []) : Promise.resolve([]);
}

const OVERRIDDEN = new Set<PropertyKey>(['put', 'stage', 'publish', 'discard', 'copy', 'delete']);

/**
 * `content` with its writes indexed into `items` (see the module comment). `layout` is the
 * installation's (or a function returning it: the shard count is read at each write). An indexed store
 * given here is re-decorated from its engine, never stacked.
 */
export function indexedContent(content: ContentStore, items: ItemStore, layout: Layout | (() => Layout), clock: Clock): ContentStore {
  const inner = innerContent(content);
  const indexer = new Indexer(inner, items, typeof layout === 'function' ? layout : () => layout, clock);
  const bound = new Map<PropertyKey, unknown>();
  // What callers assign on the decorated store (a test replacing `put` for a while) shadows it here,
  // never the engine: the engine's own calls keep reaching the engine.
  const assigned = new Map<PropertyKey, unknown>();
  return new Proxy(inner, {
    set(_target, prop, value) {
      assigned.set(prop, value);
      return true;
    },
    deleteProperty(_target, prop) {
      assigned.delete(prop);
      return true;
    },
    has(target, prop) {
      return assigned.has(prop) || Reflect.has(target, prop);
    },
    get(target, prop) {
      if (prop === INNER) return target;
      if (prop === INDEXER) return indexer;
      if (assigned.has(prop)) return assigned.get(prop);
      if (OVERRIDDEN.has(prop)) {
        const method = indexer[prop as 'put'] as (...a: unknown[]) => unknown;
        if (!bound.has(prop)) bound.set(prop, method.bind(indexer));
        return bound.get(prop);
      }
      const value = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      // The engine's own methods run on the engine (its put calls its own stage, not the indexed one).
      if (!bound.has(prop)) bound.set(prop, value.bind(target));
      return bound.get(prop);
    },
  });
}
