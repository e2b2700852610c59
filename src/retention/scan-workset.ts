/**
 * The reference scan's working set (issue 17 item 2, bounded memory): every fact the scan gathers —
 * listed objects, named keys, prefixes and digests, the reference-index entries' inner digests — lives
 * in a scratch SQLite database on disk (system/scratch.ts), written in batches, and the transitive
 * closure is computed with SQL over its indexes. The heap holds one page of items or objects at a time.
 *
 * Tables:
 *   objects(key, size, cls, digest, why, inner)  the listing; why = first reason it is referenced;
 *                                                inner: 0 unknown, 1 known (entry or read), 2 expanded;
 *                                                fresh: listed since the cached scan; guess: digest
 *                                                from an observation, not from bytes or an entry
 *   inner(key, digest)                           digests found inside an object (entry or bytes);
 *                                                trusted only once objects.inner >= 1
 *   entries(key, digest, size, overflow)         the content root's reference-index entries (item pass)
 *   keyrefs / prefixes                           keys and key prefixes named (in-flight uploads)
 *   digests(digest, why, strict, strict_why)     digests named; only strict ones (pins) mark an archived
 *                                                original whose verified copy is listed (B13)
 *   typed(key, digest, why)                      key + digest references (refsOfItem, backups): satisfied
 *                                                by their own object; named as a plain digest otherwise
 *   recorded(key, digest)                        the digest the items record for an immutable object
 *   staged / superseded / sup_keys               item strings waiting for their partition's archive
 *                                                records (B13: an archived original is not referenced
 *                                                by its own artifact's items once its copy exists)
 */
import fs from 'node:fs';
import path from 'node:path';
import type Database from 'better-sqlite3';
import type { ObjectInfo } from '../content/content-store.ts';
import { MAX_INDEXED_DIGESTS, type RefIndexEntry } from '../system/ref-index.ts';
import { openScratch, SCRATCH_CACHE_KIB, type Scratch } from '../system/scratch.ts';

/**
 * What the listing and the objects' bytes or entries tell, and what the closure derived (why). Kept in
 * the cache with the item references (scan-cache.ts): a scan from the cache re-lists and changes only
 * the rows whose key, size or class differ (fresh = 1: matched against every reference, not only the
 * fresh ones); guess = 1: the digest is an observation's, not read (dropped when the cache is loaded).
 */
const OBJECT_SCHEMA = `
CREATE TABLE refs.objects(key TEXT PRIMARY KEY, size INTEGER NOT NULL, cls TEXT, cold INTEGER NOT NULL, digest TEXT, why TEXT,
  inner INTEGER NOT NULL DEFAULT 0, bad TEXT, fresh INTEGER NOT NULL DEFAULT 0, guess INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
CREATE INDEX refs.objects_unknown ON objects(key) WHERE why IS NOT NULL AND inner = 0;
CREATE INDEX refs.objects_known ON objects(key) WHERE why IS NOT NULL AND inner = 1;
CREATE INDEX refs.objects_bad ON objects(key) WHERE bad IS NOT NULL;
CREATE INDEX refs.objects_fresh ON objects(key) WHERE fresh = 1;
CREATE INDEX refs.objects_guess ON objects(key) WHERE guess = 1;
CREATE TABLE refs.inner(key TEXT NOT NULL, digest TEXT NOT NULL, PRIMARY KEY(key, digest)) WITHOUT ROWID;
CREATE TABLE refs.entries(key TEXT PRIMARY KEY, digest TEXT NOT NULL, size INTEGER NOT NULL, overflow INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE refs.failed(key TEXT PRIMARY KEY) WITHOUT ROWID;
`;

/**
 * Indexes of objects that a whole scan's listing would maintain row by row for nothing (every listed row
 * is unread, with no digest, until applyEntries): created once the index is applied (createLateIndexes),
 * by one sort each. A working set from the cache has them already.
 */
const LATE_OBJECT_INDEXES = `
CREATE INDEX IF NOT EXISTS refs.objects_digest ON objects(digest);
CREATE INDEX IF NOT EXISTS refs.objects_unread ON objects(key) WHERE inner = 0 AND digest IS NULL;
`;

/** A scan from the cache: the listing's differences from the cached rows, applied once it is over. */
const DIFF_SCHEMA = `
CREATE TABLE main.listed_new(key TEXT PRIMARY KEY, size INTEGER NOT NULL, cls TEXT, cold INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE main.listed_gone(key TEXT PRIMARY KEY) WITHOUT ROWID;
`;

/**
 * What the items (other than index entries) name: a database of its own (attached as \`refs\`), so the
 * retention plan can keep it between plans and fold in only the items changed since (scan-cache.ts).
 */
const REFS_SCHEMA = `
CREATE TABLE refs.keyrefs(key TEXT PRIMARY KEY, why TEXT NOT NULL, fresh INTEGER NOT NULL DEFAULT 1) WITHOUT ROWID;
CREATE INDEX refs.keyrefs_fresh ON keyrefs(key) WHERE fresh = 1;
CREATE TABLE refs.prefixes(prefix TEXT PRIMARY KEY, why TEXT NOT NULL, fresh INTEGER NOT NULL DEFAULT 1) WITHOUT ROWID;
CREATE TABLE refs.digests(digest TEXT PRIMARY KEY, why TEXT NOT NULL, strict INTEGER NOT NULL DEFAULT 0, strict_why TEXT,
  fresh INTEGER NOT NULL DEFAULT 1) WITHOUT ROWID;
CREATE INDEX refs.digests_fresh ON digests(digest) WHERE fresh = 1;
CREATE TABLE refs.typed(key TEXT NOT NULL, digest TEXT NOT NULL, why TEXT NOT NULL, fresh INTEGER NOT NULL DEFAULT 1, PRIMARY KEY(key, digest)) WITHOUT ROWID;
CREATE INDEX refs.typed_digest ON typed(digest);
CREATE INDEX refs.typed_fresh ON typed(key) WHERE fresh = 1;
CREATE TABLE refs.recorded(key TEXT PRIMARY KEY, digest TEXT NOT NULL, fresh INTEGER NOT NULL DEFAULT 1) WITHOUT ROWID;
CREATE INDEX refs.recorded_fresh ON recorded(key) WHERE fresh = 1;
CREATE TABLE refs.staged(scope TEXT NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL, digest TEXT, why TEXT NOT NULL);
CREATE TABLE refs.superseded(scope TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY(scope, value)) WITHOUT ROWID;
CREATE TABLE refs.sup_keys(key TEXT PRIMARY KEY, copy TEXT NOT NULL, digest TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE refs.versions(artifact TEXT PRIMARY KEY, max INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE refs.heads(artifact TEXT PRIMARY KEY, latest INTEGER NOT NULL, reserved_at TEXT, pk TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE refs.meta(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;
`;

/** The upper bound of a prefix range: keys k with prefix <= k < prefixEnd(prefix) start with prefix. */
export function prefixEnd(prefix: string): string {
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}

type Stmt = Database.Statement;

/** Staged strings remembered to skip repeats (bounded: cleared when full). */
const RECENTLY_STAGED = 4096;

export interface InFlight {
  artifact: string;
  pk: string;
  from: number;
  latest: number;
  reserved_at: string | null;
}

export interface ObjectRow {
  key: string;
  size: number;
  cls: string | null;
  cold: number;
  digest: string | null;
  inner: number;
  bad: string | null;
}

export class Workset {
  readonly scratch: Scratch;
  readonly db: Database.Database;
  private readonly s: Record<string, Stmt>;
  /** Objects whose bytes could not be scanned, with why: an error only if they are referenced. */
  readonly failures = new Map<string, Error>();
  /** Entries read objects will get, written in batches (scan-objects.ts flushEntries). */
  readonly pendingEntries: RefIndexEntry[] = [];
  /** The partitions of the content root's reference-index entries (the item pass keeps their entries). */
  entryPartitions = new Set<string>();
  private readonly recentlyStaged = new Set<string>();
  /** Set once the item pass is over: later entries (a refresh) replace what reads or entries said. */
  itemPassDone = false;
  /** While changes are folded into a cached working set: an entry met drops its object's cached row (listed again as new). */
  entryDropsRow = false;
  /** The database the cache saves (every table but the listing's differences). */
  readonly refsFile: string;
  /**
   * A fresh working set until the closure's first round (scan-closure.ts markFresh): every reference is
   * new, so references are written unmarked (fresh = 0) and that round applies all of them, instead of
   * marking each row (and its partial index) only to unmark it again. Written after it: marked.
   */
  wholeRound: boolean;
  /** Whether LATE_OBJECT_INDEXES exist yet (a fresh working set: not before applyEntries). */
  private lateIndexes: boolean;

  /**
   * A fresh working set, or one whose item references start as a copy of `refsFrom` (a database an
   * earlier scan saved with saveRefs: the retention plan's reference cache).
   */
  constructor(opts: { refsFrom?: string } = {}) {
    this.scratch = openScratch('refscan');
    this.db = this.scratch.db;
    this.db.exec(DIFF_SCHEMA);
    this.refsFile = path.join(this.scratch.dir, 'refs.db');
    if (opts.refsFrom) fs.copyFileSync(opts.refsFrom, this.refsFile);
    this.db.prepare('ATTACH DATABASE ? AS refs').run(this.refsFile);
    for (const p of ['journal_mode = OFF', 'synchronous = OFF', `cache_size = -${SCRATCH_CACHE_KIB}`]) this.db.pragma(`refs.${p}`);
    if (!opts.refsFrom) this.db.exec(OBJECT_SCHEMA + REFS_SCHEMA);
    this.lateIndexes = opts.refsFrom !== undefined;
    this.wholeRound = opts.refsFrom === undefined;
    // A cache saved before they were late has them; one saved since has them too (saveTo comes after readIndex).
    if (this.lateIndexes) this.db.exec(LATE_OBJECT_INDEXES);
    const p = (sql: string) => this.db.prepare(sql);
    this.s = {
      object: p('INSERT OR IGNORE INTO objects(key, size, cls, cold) VALUES (?, ?, ?, ?)'),
      listedNew: p('INSERT OR IGNORE INTO listed_new(key, size, cls, cold) VALUES (?, ?, ?, ?)'),
      listedGone: p('INSERT OR IGNORE INTO listed_gone(key) VALUES (?)'),
      failed: p('INSERT OR IGNORE INTO failed(key) VALUES (?)'),
      dropRow: p('DELETE FROM objects WHERE key = ?'),
      dropEntry: p('DELETE FROM entries WHERE key = ?'),
      dropChangedRow: p('DELETE FROM objects WHERE key = ? AND (digest IS NULL OR digest != ? OR inner = 0)'),
      typedAgain: p('UPDATE typed SET fresh = 1 WHERE key = ?'),
      originalsAgain: p('UPDATE digests SET fresh = 1 WHERE digest IN (SELECT digest FROM sup_keys WHERE copy = ?)'),
      key: p('INSERT OR IGNORE INTO keyrefs(key, why, fresh) VALUES (?, ?, ?)'),
      prefix: p('INSERT OR IGNORE INTO prefixes(prefix, why, fresh) VALUES (?, ?, ?)'),
      digest: p(
        'INSERT INTO digests(digest, why, strict, strict_why, fresh) VALUES (?, ?, ?, ?, ?) ON CONFLICT(digest) DO UPDATE SET strict = 1, fresh = 1, strict_why = excluded.strict_why WHERE strict = 0 AND excluded.strict = 1',
      ),
      typed: p('INSERT OR IGNORE INTO typed(key, digest, why, fresh) VALUES (?, ?, ?, ?)'),
      recorded: p('INSERT OR IGNORE INTO recorded(key, digest, fresh) VALUES (?, ?, ?)'),
      stage: p('INSERT INTO staged(scope, kind, value, digest, why) VALUES (?, ?, ?, ?, ?)'),
      supersede: p('INSERT OR IGNORE INTO superseded(scope, value) VALUES (?, ?)'),
      supKey: p('INSERT OR IGNORE INTO sup_keys(key, copy, digest) VALUES (?, ?, ?)'),
      version: p('INSERT INTO versions(artifact, max) VALUES (?, ?) ON CONFLICT(artifact) DO UPDATE SET max = MAX(max, excluded.max)'),
      head: p('INSERT OR REPLACE INTO heads(artifact, latest, reserved_at, pk) VALUES (?, ?, ?, ?)'),
      whyObject: p('SELECT why FROM objects WHERE key = ?').pluck(),
      whyKey: p('SELECT why FROM keyrefs WHERE key = ?').pluck(),
      whyPrefix: p('SELECT why FROM prefixes WHERE prefix = ?').pluck(),
      whyDigest: p('SELECT why FROM digests WHERE digest = ?').pluck(),
      // With a key, in one statement (a plan asks it of every candidate): a digest nothing names has no row.
      whyDigestFor: p(
        `SELECT CASE WHEN EXISTS (SELECT 1 FROM sup_keys s JOIN objects c ON c.key = s.copy
           WHERE s.key = ? AND s.digest = ? AND (c.digest IS NULL OR c.digest = s.digest))
         THEN (CASE WHEN strict = 1 THEN COALESCE(strict_why, why) END) ELSE why END FROM digests WHERE digest = ?`,
      ).pluck(),
      getObject: p('SELECT key, size, cls, cold, digest, inner, bad FROM objects WHERE key = ?'),
      byDigest: p('SELECT key FROM objects WHERE digest = ? ORDER BY key').pluck(),
      setObject: p('UPDATE objects SET digest = ?, inner = MAX(inner, ?), cold = MAX(cold, ?), guess = ? WHERE key = ?'),
      bad: p('UPDATE objects SET bad = ? WHERE key = ?'),
      keep: p('UPDATE objects SET why = COALESCE(why, ?), inner = 2 WHERE key = ?'),
      inner: p('INSERT OR IGNORE INTO inner(key, digest) VALUES (?, ?)'),
      forget: p('DELETE FROM inner WHERE key = ?'),
      entry: p('INSERT OR REPLACE INTO entries(key, digest, size, overflow) VALUES (?, ?, ?, ?)'),
      recordedOf: p('SELECT digest FROM recorded WHERE key = ?').pluck(),
    };
  }

  tx<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }

  addObject(o: ObjectInfo, cold: boolean): void {
    this.s.object?.run(o.key, o.size, o.storageClass ?? null, cold ? 1 : 0);
  }
  /** A listed object the cache did not have (or had with another size or class); scan-diff.ts. */
  listedNew(o: ObjectInfo, cold: boolean): void {
    this.s.listedNew?.run(o.key, o.size, o.storageClass ?? null, cold ? 1 : 0);
  }
  /** A cached row the listing no longer has (or has changed). */
  listedGone(key: string): void {
    this.s.listedGone?.run(key);
  }
  /** The fresh mark a reference is written with: none before a whole scan's first round (wholeRound). */
  private get freshMark(): number {
    return this.wholeRound ? 0 : 1;
  }
  key(k: string, why: string): void {
    this.s.key?.run(k, why, this.freshMark);
  }
  prefix(p: string, why: string): void {
    this.s.prefix?.run(p, why, this.freshMark);
  }
  digest(d: string, why: string, strict = false): void {
    this.s.digest?.run(d, why, strict ? 1 : 0, strict ? why : null, this.freshMark);
  }
  typed(k: string, d: string, why: string): void {
    this.s.typed?.run(k, d, why, this.freshMark);
  }
  recorded(k: string, d: string): void {
    this.s.recorded?.run(k, d, this.freshMark);
  }
  recordedOf(k: string): string | undefined {
    return this.s.recordedOf?.get(k) as string | undefined;
  }
  /** A string of an item (kind k: key, d: digest, t: typed key + digest), resolved once the partition is known. */
  stage(scope: string, kind: 'k' | 'd' | 't', value: string, why: string, digest?: string): void {
    // A partition's items (adjacent in a scan) name the same strings many times: the first one is enough.
    const seen = `${scope}\u0000${kind}\u0000${value}\u0000${digest ?? ''}`;
    if (this.recentlyStaged.has(seen)) return;
    if (this.recentlyStaged.size >= RECENTLY_STAGED) this.recentlyStaged.clear();
    this.recentlyStaged.add(seen);
    this.s.stage?.run(scope, kind, value, digest ?? null, why);
  }
  /** An archived original (and its digest) that the items of `scope` no longer reference. */
  supersede(scope: string, original: string, copy: string, digest: string, live: boolean): void {
    this.s.supersede?.run(scope, original);
    this.s.supersede?.run(scope, digest);
    if (live) this.s.supKey?.run(original, copy, digest);
  }
  version(artifact: string, n: number): void {
    this.s.version?.run(artifact, n);
  }
  head(artifact: string, latest: number, reservedAt: string | undefined, pk: string): void {
    this.s.head?.run(artifact, latest, reservedAt ?? null, pk);
  }
  /** The digest and the inner digests of an object, once read or taken from its entry (inner: 1). */
  known(key: string, digest: string | undefined, inner?: Iterable<string>, cold = false): void {
    this.s.setObject?.run(digest ?? null, inner ? 1 : 0, cold ? 1 : 0, inner ? 0 : 1, key);
    if (!inner) return;
    // What the bytes name replaces what an (unusable) entry said.
    this.s.forget?.run(key);
    for (const d of inner) this.s.inner?.run(key, d);
  }
  /** A reference-index entry met in the item pass; its inner digests wait in `inner` until it is found usable. */
  entry(e: RefIndexEntry): void {
    // The same digest on a row already known (read, or an earlier entry) says nothing new: same bytes, same digests inside.
    if (this.entryDropsRow) this.s.dropChangedRow?.run(e.key, e.digest);
    this.s.entry?.run(e.key, e.digest, e.size, e.overflow === true || e.digests.length > MAX_INDEXED_DIGESTS ? 1 : 0);
    // During the item pass an object's one entry is the first word on its inner digests (nothing reads before).
    if (this.itemPassDone) this.s.forget?.run(e.key);
    for (const d of e.digests) this.s.inner?.run(e.key, d);
  }
  /**
   * Takes every usable entry (not overflow, the listing's size, the recorded digest) for its readable
   * object: digest and inner digests known without a read. Returns how many.
   */
  applyEntries(): number {
    // Before the late indexes exist every row is unread: the table itself is the index.
    const applied = this.db
      .prepare(
        `UPDATE objects ${this.lateIndexes ? 'INDEXED BY objects_unread' : ''} SET digest = e.digest, inner = 1 FROM entries e LEFT JOIN recorded r ON r.key = e.key
         WHERE objects.key = e.key AND objects.cold = 0 AND objects.inner = 0 AND objects.digest IS NULL
           AND e.overflow = 0 AND e.size = objects.size AND (r.digest IS NULL OR r.digest = e.digest)`,
      )
      .run().changes;
    this.createLateIndexes();
    return applied;
  }
  /** LATE_OBJECT_INDEXES, once: every query after the listing and the index may use them. */
  createLateIndexes(): void {
    if (this.lateIndexes) return;
    this.db.exec(LATE_OBJECT_INDEXES);
    this.lateIndexes = true;
  }
  /** Cold objects with a usable entry: the caller checks S3's checksum against it. */
  coldWithEntries(after: string, limit: number): Array<{ key: string; digest: string }> {
    return this.db
      .prepare(
        `SELECT o.key AS key, e.digest AS digest FROM objects o JOIN entries e ON e.key = o.key LEFT JOIN recorded r ON r.key = e.key
         WHERE o.key > ? AND o.cold = 1 AND o.inner = 0 AND o.digest IS NULL AND e.overflow = 0 AND e.size = o.size
           AND (r.digest IS NULL OR r.digest = e.digest) ORDER BY o.key LIMIT ?`,
      )
      .all(after, limit) as Array<{ key: string; digest: string }>;
  }
  /** A cold object whose S3 checksum is its entry's digest: the entry's inner digests stand. */
  coldKnown(key: string, digest: string | undefined, entryHolds: boolean): void {
    this.s.setObject?.run(digest ?? null, entryHolds ? 1 : 0, 1, entryHolds ? 0 : 1, key);
  }
  /** Bytes whose references cannot be read: an error only if they are referenced (read again by a scan from the cache). */
  fail(key: string, e: Error): void {
    this.failures.set(key, e);
    this.s.failed?.run(key);
  }
  /** A cached object row, its inner digests and its entry are dropped: the listing brings it back as new. */
  invalidate(key: string): void {
    // Until it is listed again, nothing it satisfied stands: typed references to it, originals it is the copy of.
    this.s.typedAgain?.run(key);
    this.s.originalsAgain?.run(key);
    this.s.dropRow?.run(key);
    this.s.forget?.run(key);
    this.s.dropEntry?.run(key);
  }
  /** Bytes that do not hash to the digest the items record: fails the scan if the object is referenced. */
  bad(key: string, expected: string): void {
    this.s.bad?.run(expected, key);
  }
  /** Kept without being scanned (a cold object without a checksum): referenced, nothing to expand. */
  keep(key: string, why: string): void {
    this.s.keep?.run(why, key);
  }

  /** Moves the staged strings into the references, leaving out those their partition superseded. */
  resolveStaged(): void {
    const fresh = this.freshMark;
    this.db.exec(`
      INSERT OR IGNORE INTO keyrefs(key, why, fresh) SELECT value, why, ${fresh} FROM staged s WHERE kind IN ('k', 't')
        AND NOT EXISTS (SELECT 1 FROM superseded x WHERE x.scope = s.scope AND x.value = s.value);
      INSERT OR IGNORE INTO typed(key, digest, why, fresh) SELECT value, digest, why, ${fresh} FROM staged s WHERE kind = 't'
        AND NOT EXISTS (SELECT 1 FROM superseded x WHERE x.scope = s.scope AND x.value = s.value);
      INSERT OR IGNORE INTO digests(digest, why, fresh) SELECT value, why, ${fresh} FROM staged s WHERE kind = 'd'
        AND NOT EXISTS (SELECT 1 FROM superseded x WHERE x.scope = s.scope AND x.value = s.value);
      DELETE FROM staged;`);
  }

  /** Version numbers reserved on a HEAD above its highest committed version: uploads in flight. */
  /** Of every HEAD, or of `artifacts` only (a refresh: the changed ones). */
  inFlightVersions(artifacts?: readonly string[]): InFlight[] {
    const sql = `SELECT h.artifact AS artifact, h.pk AS pk, COALESCE(v.max, 0) + 1 AS "from", h.latest AS latest, h.reserved_at AS reserved_at
         FROM heads h LEFT JOIN versions v ON v.artifact = h.artifact WHERE h.latest > COALESCE(v.max, 0)`;
    if (!artifacts) return this.db.prepare(sql).all() as InFlight[];
    const one = this.db.prepare(`${sql} AND h.artifact = ?`);
    return [...new Set(artifacts)].flatMap((a) => one.all(a) as InFlight[]);
  }

  // --- answers ---------------------------------------------------------------------------------------

  whyKey(key: string): string | undefined {
    const listed = this.s.whyObject?.get(key) as string | null | undefined;
    if (listed) return listed;
    const named = this.s.whyKey?.get(key) as string | undefined;
    if (named) return named;
    for (let i = key.indexOf('/'); i >= 0; i = key.indexOf('/', i + 1)) {
      const why = this.s.whyPrefix?.get(key.slice(0, i + 1)) as string | undefined;
      if (why) return why;
    }
    return undefined;
  }
  /**
   * Why `digest` is referenced: a digest named or found inside referenced bytes (a typed reference
   * counts only when its own object does not satisfy it). For `forKey`, an archived original whose
   * verified copy is listed, only a strict reference (a pin) counts: the copy satisfies the rest (B13).
   */
  whyDigest(digest: string, forKey?: string): string | undefined {
    if (forKey !== undefined) return (this.s.whyDigestFor?.get(forKey, digest, digest) as string | null | undefined) ?? undefined;
    return this.s.whyDigest?.get(digest) as string | undefined;
  }
  row(key: string): ObjectRow | undefined {
    return this.s.getObject?.get(key) as ObjectRow | undefined;
  }
  keysWithDigest(digest: string): string[] {
    return this.s.byDigest?.all(digest) as string[];
  }
  /**
   * Everything but the listing's differences, as it is now, copied to `file`. Called between
   * transactions: with its journal off, the database file then holds every committed page.
   */
  saveTo(file: string, meta: Record<string, string>): void {
    this.tx(() => {
      const put = this.db.prepare('INSERT OR REPLACE INTO refs.meta(k, v) VALUES (?, ?)');
      for (const [k, v] of Object.entries(meta)) put.run(k, v);
    });
    fs.copyFileSync(this.refsFile, file);
  }
  /** What saveRefs recorded with the references (empty for a fresh working set). */
  refsMeta(): Record<string, string> {
    const rows = this.db.prepare('SELECT k, v FROM refs.meta').all() as Array<{ k: string; v: string }>;
    return Object.fromEntries(rows.map((r) => [r.k, r.v]));
  }
  close(): void {
    this.scratch.close();
  }
}
