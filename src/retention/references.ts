/**
 * The reference scan of seed 004 ("Retain references before considering age"): every digest or key
 * named by any base-table item (live state, audit items, packed segments' items), by in-flight uploads,
 * by backup manifests and by host pins, then — transitively — every digest found inside referenced
 * objects (64 KiB reads, matches straddling reads, gzip members included). Conservative: a string that
 * merely looks like a digest or a key keeps its object. Reads the base table only (never GSI1).
 */

import { RESERVATION_PREFIX } from '../audit/chain.ts';
import { coldDigest, isColdError } from '../content/cold.ts';
import type { ObjectInfo } from '../content/content-store.ts';
import { DIGEST_SCAN_PATTERN, DigestAccumulator } from '../core/digest.ts';
import { type AlpError, Conflict, IntegrityError, InternalError, NotFound } from '../core/errors.ts';
import { EXECUTION_OUTPUTS, executionKey, HISTORY_SEGMENT_PREFIX, MUTABLE_PREFIXES } from '../core/object-keys.ts';
import { UPLOAD_RESERVATION_TTL_MS } from '../lifecycle/executions.ts';
import { refsOfItem } from '../lifecycle/references.ts';
import { type BackupRecord, pendingBackupState, retireCommand } from '../recovery/backup.ts';
import { openBackup } from '../recovery/backup-format.ts';
import type { Item } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { scanForDigests } from './digest-scan.ts';

/** Prefixes whose objects may be referenced by key strings found in items. */
const KEY_PREFIXES = ['artifacts/', 'executions/', 'archive/', 'provenance/', HISTORY_SEGMENT_PREFIX];
/** Immutable digest files: the only retention candidates (seed 004; docs/design.md §6 "retention quarantine"). */
export const CANDIDATE_PREFIXES = ['artifacts/', 'executions/', 'archive/'] as const;

/**
 * Items that describe objects without referencing them: retention's own journal names its candidates,
 * and a persisted reconciliation report names the orphans it found (`unexpected`) and the objects it
 * missed. Counting those as references would keep every orphan a reconcile ever reported forever.
 */
const NOT_REFERENCES = new Set(['retention_observation', 'retention_run', 'reconcile']);

export interface ScannedObject extends ObjectInfo {
  /** The digest of the bytes as read (set once the object was read). */
  digest?: string;
}

export interface ReferenceScan {
  /** Referenced object keys with the first reason found. */
  referenced: Map<string, string>;
  /** Referenced digests with the first reason found. */
  digests: Map<string, string>;
  /** Every object listed under the scanned prefixes. */
  objects: Map<string, ScannedObject>;
  /** Unreferenced immutable objects: the candidates. */
  candidates: ScannedObject[];
  /** coldTrusted: cold (GLACIER) objects not read, their digest taken from S3's checksum (scanCold). */
  stats: { items: number; objects: number; objectsRead: number; bytesRead: number; coldTrusted: number; ms: number };
}

export interface ScanOptions {
  pins?: Iterable<string>;
  /** Digests already known for unreferenced objects (observations), so they need not be re-read. */
  knownDigests?: Map<string, string>;
}

/** Collects reference reasons, keeping the first one found for each key or digest. */
class Refs {
  readonly keys = new Map<string, string>();
  readonly prefixes = new Map<string, string>();
  readonly digests = new Map<string, string>();
  key(k: string, why: string) {
    if (!this.keys.has(k)) this.keys.set(k, why);
  }
  prefix(p: string, why: string) {
    if (!this.prefixes.has(p)) this.prefixes.set(p, why);
  }
  digest(d: string, why: string) {
    if (!this.digests.has(d)) this.digests.set(d, why);
  }
  keyReason(k: string): string | undefined {
    const direct = this.keys.get(k);
    if (direct) return direct;
    for (const [p, why] of this.prefixes) if (k.startsWith(p)) return why;
    return undefined;
  }
}

/** Every digest-like and key-like string anywhere inside a value (attribute names included). */
export function stringsIn(value: unknown, visit: (s: string) => void): void {
  if (typeof value === 'string') visit(value);
  else if (Array.isArray(value)) for (const v of value) stringsIn(v, visit);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      visit(k);
      stringsIn(v, visit);
    }
  }
}

function noteStrings(refs: Refs, value: unknown, why: string): void {
  stringsIn(value, (s) => {
    DIGEST_SCAN_PATTERN.lastIndex = 0;
    for (let m = DIGEST_SCAN_PATTERN.exec(s); m; m = DIGEST_SCAN_PATTERN.exec(s)) refs.digest(m[0], why);
    if (KEY_PREFIXES.some((p) => s.startsWith(p))) refs.key(s, why);
  });
}

/**
 * A registered backup's manifest names objects a restore would need: they stay referenced. A backup
 * whose manifest cannot be read (moved, damaged, still being written) fails the scan closed with a
 * coded error naming it and the way out; a FAILED backup names nothing, and neither does a RETIRED one
 * (the operator said it is gone: it no longer protects its objects).
 */
async function noteBackup(refs: Refs, item: Item, where: string): Promise<void> {
  if (item.status === 'FAILED' || item.status === 'RETIRED') return;
  const id = String(item.backup_id);
  const why = `named by backup ${id} (${String(item.location)})`;
  let manifestDigest = item.manifest_digest as string;
  if (item.status === 'PENDING') {
    // An interrupted backup: complete if its directory made it into place, nothing if its writer died.
    const pending = await pendingBackupState(item as unknown as BackupRecord);
    if (pending.state === 'dead') return;
    if (pending.state === 'running')
      throw new Conflict(
        `backup ${id} (${String(item.location)}) is PENDING and its writer (pid ${String(item.pid)} on ${String(item.host)}) may still be running: let it finish, or \`alp backups --abandon ${id}\` if it never will; nothing is collected until then`,
        { backup_id: id, location: item.location },
      );
    manifestDigest = pending.manifest.manifest_digest;
  } else if (item.status !== 'COMPLETE') throw new IntegrityError(`backup ${id} (${where}) has an unknown status ${String(item.status)}`);
  try {
    const backup = await openBackup(item.location as string, { expectedManifestDigest: manifestDigest });
    for await (const o of backup.objects()) {
      // Quarantined objects ride in backups (seed 004) without becoming references to themselves.
      if (o.retained) continue;
      refs.key(o.key, why);
      refs.digest(o.digest, why);
    }
    for await (const i of backup.items()) if (!NOT_REFERENCES.has(i.type as string)) noteStrings(refs, i, why);
  } catch (e) {
    throw unreadableBackup(id, String(item.location), String(item.status), e);
  }
}

/** NOT_FOUND while the directory is gone, INTEGRITY when it is damaged: both name the backup and the way out. */
function unreadableBackup(id: string, location: string, status: string, e: unknown): AlpError {
  const missing = e instanceof NotFound || ['ENOENT', 'ENOTDIR'].includes(String((e as NodeJS.ErrnoException)?.code));
  const way = `restore the directory, or \`${retireCommand(id)}\` if it was rotated away (a retired backup no longer protects its objects from retention); nothing is collected until then`;
  const details = { backup_id: id, location };
  if (missing) return new NotFound(`backup ${id} is ${status} in the registry but its manifest at ${location} is missing: ${way}`, details);
  const cause = e instanceof Error ? e.message : String(e);
  return new IntegrityError(`cannot read the references of backup ${id} at ${location} (${cause}): ${way}`, details);
}

/** Object reads overlap: each is a handful of filesystem or HTTP round trips. */
const READ_CONCURRENCY = 16;

async function inParallel<T>(list: T[], fn: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < list.length) await fn(list[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(READ_CONCURRENCY, list.length) }, worker));
}

async function readRaw(ctx: ServiceContext, key: string): Promise<AsyncIterable<Uint8Array>> {
  try {
    return await ctx.content.readRaw(key);
  } catch (e) {
    if (e instanceof NotFound) throw new InternalError(`object ${key} vanished during the reference scan; is maintenance fenced?`);
    throw e;
  }
}

/**
 * Whether a reservation stamped `at` still stands for an upload in flight at `now`: for
 * UPLOAD_RESERVATION_TTL_MS (after which the lifecycle lets another upload take it over). A commit that
 * comes later still cannot reference reclaimed bytes: publishers check retention's decision (guard.ts).
 */
function inFlight(at: unknown, now: number): boolean {
  if (typeof at !== 'string') return false;
  const t = Date.parse(at);
  return !Number.isFinite(t) || now - t <= UPLOAD_RESERVATION_TTL_MS;
}

interface ItemReferences {
  itemCount: number;
  /** The highest committed version per artifact. */
  versionsSeen: Map<string, number>;
  heads: Item[];
}

/** One pass over every item: the keys and digests they name, in-flight uploads, backup manifests. */
async function collectItemReferences(ctx: ServiceContext, refs: Refs, recorded: Map<string, string>, now: number): Promise<ItemReferences> {
  const versionsSeen = new Map<string, number>();
  const heads: Item[] = [];
  let itemCount = 0;
  let cursor: string | undefined;
  do {
    const page = await ctx.items.scan(cursor ? { cursor } : {});
    for (const item of page.items) {
      itemCount++;
      // Retention's own journal and reconciliation reports name objects; they are not references to them.
      if (NOT_REFERENCES.has(item.type as string)) continue;
      const where = `${item.PK} ${item.SK}`;
      for (const r of refsOfItem(item)) {
        refs.key(r.key, `named by ${r.source}`);
        refs.digest(r.digest, `named by ${r.source}`);
        if (!MUTABLE_PREFIXES.some((p) => r.key.startsWith(p))) recorded.set(r.key, r.digest);
      }
      noteStrings(refs, item, `named by ${where}`);
      if (item.type === 'version')
        versionsSeen.set(item.artifact_id as string, Math.max(versionsSeen.get(item.artifact_id as string) ?? 0, item.version as number));
      if (item.type === 'head') heads.push(item);
      if (item.type === 'execution') {
        for (const attr of Object.keys(item)) {
          const name = attr.slice(RESERVATION_PREFIX.length);
          // An upload is in flight while its run is RUNNING and its reservation is not stale: an upload
          // that died leaves a reservation nothing releases, and its bytes must not be kept forever.
          if (!inFlight(item.status === 'RUNNING' ? item[attr] : undefined, now)) continue;
          if (attr.startsWith(RESERVATION_PREFIX) && (EXECUTION_OUTPUTS as readonly string[]).includes(name)) {
            refs.key(
              executionKey(item.run_id as string, name as (typeof EXECUTION_OUTPUTS)[number]),
              `in-flight upload reserved by ${where}`,
            );
          }
        }
      }
      if (item.type === 'backup') await noteBackup(refs, item, where);
    }
    cursor = page.cursor;
  } while (cursor);
  return { itemCount, versionsSeen, heads };
}

export async function scanReferences(ctx: ServiceContext, opts: ScanOptions = {}): Promise<ReferenceScan> {
  const started = Date.now();
  const now = ctx.clock.now().getTime();
  /** The digest the items record for an immutable object: what its bytes must hash to when scanned. */
  const recorded = new Map<string, string>();
  const refs = new Refs();
  const { itemCount, versionsSeen, heads } = await collectItemReferences(ctx, refs, recorded, now);
  // Version numbers reserved on the HEAD but not (yet) committed are uploads in flight, while the
  // latest reservation is recent (HEADs written before reservations were stamped: always).
  for (const h of heads) {
    if (h.version_reserved_at !== undefined && !inFlight(h.version_reserved_at, now)) continue;
    const id = h.artifact_id as string;
    for (let n = (versionsSeen.get(id) ?? 0) + 1; n <= (h.latest_version as number); n++) {
      refs.prefix(`artifacts/${id}/v${n}/`, `in-flight upload of version ${n} reserved by ${h.PK} HEAD`);
    }
  }
  for (const p of opts.pins ?? []) refs.digest(p, 'pinned by the host');

  const objects = new Map<string, ScannedObject>();
  for (const prefix of KEY_PREFIXES) for await (const o of ctx.content.list(prefix)) objects.set(o.key, { ...o });

  const referenced = new Map<string, string>();
  const queue: string[] = [];
  const mark = (key: string, why: string) => {
    if (referenced.has(key)) return;
    referenced.set(key, why);
    queue.push(key);
  };
  for (const key of objects.keys()) {
    const why = refs.keyReason(key);
    if (why) mark(key, why);
  }
  let objectsRead = 0;
  let bytesRead = 0;
  let coldTrusted = 0;
  // Listed in a cold class by an engine with real classes (S3 GLACIER): not even a GET is tried. A
  // read refused as cold (the class changed after the listing) takes the same path.
  const isCold = (key: string) => ctx.content.hasStorageClasses && objects.get(key)?.storageClass === 'GLACIER';
  // Unreferenced objects are matched by digest: hash each once (or take the digest an observation
  // recorded), index them, and mark them the moment their digest becomes referenced.
  const unreferencedByDigest = new Map<string, string[]>();
  await inParallel(
    [...objects.values()].filter((o) => !referenced.has(o.key)),
    async (obj) => {
      let digest = opts.knownDigests?.get(obj.key);
      if (!digest) {
        const acc = new DigestAccumulator();
        const bytes = isCold(obj.key)
          ? undefined
          : await readRaw(ctx, obj.key).catch((e: unknown) => (isColdError(e) ? undefined : Promise.reject(e)));
        if (bytes === undefined) {
          // Cold (GLACIER): never read; its digest is the SHA-256 S3 recorded. Without one it cannot be
          // matched, so it is kept (never a candidate) rather than assumed unreferenced.
          digest = await coldDigest(ctx.content, obj.key);
          coldTrusted++;
          // Kept, not scanned (it is referenced by nothing: what it names is protected only by referenced bytes).
          if (digest === undefined) return void referenced.set(obj.key, 'cold, without an S3 checksum: digest unknown unread');
        } else {
          for await (const c of bytes) acc.update(c as Buffer);
          objectsRead++;
          bytesRead += acc.size;
          digest = acc.digest();
        }
      }
      obj.digest = digest;
      const list = unreferencedByDigest.get(digest);
      if (list) list.push(obj.key);
      else unreferencedByDigest.set(digest, [obj.key]);
    },
  );
  const addDigest = (d: string, why: string) => {
    if (!refs.digests.has(d)) refs.digests.set(d, why);
    for (const k of unreferencedByDigest.get(d) ?? []) mark(k, `its digest is ${refs.digests.get(d) as string}`);
  };
  for (const [d, why] of refs.digests) addDigest(d, why);
  // The worklist: every referenced object's bytes are read once, hashed and scanned for digests.
  const scanOne = async (key: string) => {
    const bytes = isCold(key) ? undefined : await readRaw(ctx, key).catch((e: unknown) => (isColdError(e) ? undefined : Promise.reject(e)));
    if (bytes === undefined) return scanCold(key);
    const acc = new DigestAccumulator();
    const hashing = async function* (src: AsyncIterable<Uint8Array>) {
      for await (const c of src) {
        acc.update(c as Buffer);
        yield c;
      }
    };
    const found = await scanForDigests(hashing(bytes), undefined, `object ${key}`, key.startsWith(HISTORY_SEGMENT_PREFIX));
    objectsRead++;
    bytesRead += acc.size;
    const digest = acc.digest();
    // A short or damaged read would hide the references in the bytes it missed: such a scan cannot be
    // trusted to protect what those bytes name, so it fails closed instead of letting a purge proceed.
    const expected = recorded.get(key);
    if (expected !== undefined && digest !== expected) {
      throw new IntegrityError(
        `the reference scan read ${key} as ${digest} (${acc.size} bytes), but the items record ${expected}: the references inside it cannot be trusted; nothing is collected until \`alp reconcile\` verifies it`,
        { key, expected, actual: digest },
      );
    }
    const obj = objects.get(key);
    if (obj) obj.digest = digest;
    addDigest(digest, `digest of referenced object ${key}`);
    for (const d of found) addDigest(d, `found inside ${key}`);
  };
  /**
   * A referenced COLD object (an archive copy in GLACIER) is not read. Seed 004's rule stands (bytes
   * that must be scanned and cannot be read are never assumed clean): an archive copy holds exactly the
   * bytes of its original, which the same items reference (version and run items keep naming the
   * original key, so retention never reclaims it) and which this scan reads and scans at its own key.
   * So the copy's references are its original's, provided the copy IS those bytes: S3's checksum must
   * equal the recorded digest, and a readable referenced object with that digest must be in the store.
   * Otherwise the scan fails closed.
   */
  let readableDigests: Set<string | undefined> | undefined;
  const scanCold = async (key: string) => {
    const expected = recorded.get(key);
    const digest = await coldDigest(ctx.content, key);
    coldTrusted++;
    readableDigests ??= new Set([...objects.keys()].filter((k) => !isCold(k)).map((k) => recorded.get(k)));
    const original = expected !== undefined && readableDigests.has(expected);
    if (expected === undefined || digest !== expected || !original) {
      throw new IntegrityError(
        `${key} is in a cold storage class and cannot be read to scan its references, and ${digest === undefined ? 'S3 has no checksum for it' : digest !== expected ? `S3's checksum ${digest} is not its recorded digest ${String(expected)}` : 'no readable original with its digest exists'}: nothing is collected until it is restored (aws s3api restore-object) or \`alp reconcile\` explains it`,
        { key, expected, actual: digest },
      );
    }
    const obj = objects.get(key);
    if (obj) obj.digest = digest;
    addDigest(digest, `digest of referenced object ${key} (cold: S3 checksum)`);
  };
  while (queue.length) await inParallel(queue.splice(0), (key) => scanOne(key));
  const candidates = [...objects.values()].filter((o) => !referenced.has(o.key) && CANDIDATE_PREFIXES.some((p) => o.key.startsWith(p)));
  return {
    referenced,
    digests: refs.digests,
    objects,
    candidates,
    stats: { items: itemCount, objects: objects.size, objectsRead, bytesRead, coldTrusted, ms: Date.now() - started },
  };
}
