/**
 * The item pass of the reference scan: every base-table item (and every item of a registered backup)
 * folded into the working set, page by page. What an item names is staged with its partition (its
 * scope) and resolved once the pass is over, so that an archived original is not referenced by its own
 * artifact's items once a verified archive copy exists (issue 17 B13; lifecycle/references.ts
 * archivedOriginals), whatever order the pages came in.
 */
import { RESERVATION_PREFIX } from '../audit/chain.ts';
import { DIGEST_SCAN_PATTERN } from '../core/digest.ts';
import { type AlpError, Conflict, IntegrityError, NotFound } from '../core/errors.ts';
import { PINS_PK } from '../core/keys.ts';
import { EXECUTION_OUTPUTS, executionKey, HISTORY_SEGMENT_PREFIX, MUTABLE_PREFIXES } from '../core/object-keys.ts';
import { UPLOAD_RESERVATION_TTL_MS } from '../lifecycle/executions.ts';
import { archivedOriginals, refsOfItem } from '../lifecycle/references.ts';
import { type BackupRecord, pendingBackupState, retireCommand } from '../recovery/backup.ts';
import { openBackup } from '../recovery/backup-format.ts';
import type { Item } from '../store/item-store.ts';
import { entryOf, REF_INDEX_TYPE } from '../system/ref-index.ts';
import type { Workset } from './scan-workset.ts';

/** Prefixes whose objects may be referenced by key strings found in items. */
export const KEY_PREFIXES = ['artifacts/', 'executions/', 'archive/', 'provenance/', HISTORY_SEGMENT_PREFIX];

/**
 * Items that describe objects without referencing them: retention's own journal names its candidates,
 * a persisted reconciliation report names the orphans it found (`unexpected`) and the objects it
 * missed, and a reference-index entry names what is INSIDE an object (which matters only when that
 * object is itself referenced). Counting those as references would keep every orphan forever.
 */
export const NOT_REFERENCES = new Set(['retention_observation', 'retention_run', 'reconcile', REF_INDEX_TYPE]);

/** Whether a changed item may take references away (then the plan's cache, scan-cache.ts, is rebuilt by a whole scan). */
export function releasesReferences(item: Item): boolean {
  if (item.PK === PINS_PK) return true;
  if (item.type === 'backup' && (item.status === 'FAILED' || item.status === 'RETIRED')) return true;
  return archivedOriginals(item).length > 0;
}

/** Every digest-like and key-like string anywhere inside a value (attribute names included). */
export function stringsIn(value: unknown, visit: (s: string) => void): void {
  if (typeof value === 'string') visit(value);
  else if (Array.isArray(value)) for (const v of value) stringsIn(v, visit);
  else if (value && typeof value === 'object') {
    // Object.keys, not entries: no array of pairs per object (the item pass walks every item).
    const o = value as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      visit(k);
      const v = o[k];
      if (typeof v === 'string') visit(v);
      else if (v && typeof v === 'object') stringsIn(v, visit);
    }
  }
}

/** The first characters of KEY_PREFIXES: a string starting with none of them names no key. */
const KEY_INITIALS = new Set(KEY_PREFIXES.map((p) => p.charCodeAt(0)));
const DIGEST_LENGTH = 'sha256:'.length + 64;
/** Shorter strings (most attribute names and values) name neither a key nor a digest. */
const SHORTEST = Math.min(DIGEST_LENGTH, ...KEY_PREFIXES.map((p) => p.length));

function stageStrings(ws: Workset, scope: string, value: unknown, why: string): void {
  stringsIn(value, (s) => {
    if (s.length < SHORTEST) return;
    if (s.length >= DIGEST_LENGTH && s.includes('sha256:')) {
      DIGEST_SCAN_PATTERN.lastIndex = 0;
      for (let m = DIGEST_SCAN_PATTERN.exec(s); m; m = DIGEST_SCAN_PATTERN.exec(s)) ws.stage(scope, 'd', m[0], why);
    }
    if (KEY_INITIALS.has(s.charCodeAt(0)) && KEY_PREFIXES.some((p) => s.startsWith(p))) ws.stage(scope, 'k', s, why);
  });
}

/**
 * Whether a reservation stamped `at` still stands for an upload in flight at `now`: for
 * UPLOAD_RESERVATION_TTL_MS (after which the lifecycle lets another upload take it over). A commit that
 * comes later still cannot reference reclaimed bytes: publishers check retention's decision (guard.ts).
 */
export function inFlight(at: unknown, now: number): boolean {
  if (typeof at !== 'string') return false;
  const t = Date.parse(at);
  return !Number.isFinite(t) || now - t <= UPLOAD_RESERVATION_TTL_MS;
}

/**
 * Folds one live item into the working set. Returns true when it is a backup record, whose manifest the
 * caller reads (noteBackup: asynchronous, outside the page's transaction).
 */
export function noteItem(ws: Workset, item: Item, now: number): boolean {
  if (item.type === REF_INDEX_TYPE && ws.entryPartitions.has(item.PK)) {
    const e = entryOf(item);
    if (e) ws.entry(e);
    return false;
  }
  if (NOT_REFERENCES.has(item.type as string)) return false;
  const where = `${item.PK} ${item.SK}`;
  const scope = item.PK;
  for (const a of archivedOriginals(item)) ws.supersede(scope, a.original, a.copy, a.digest, true);
  for (const r of refsOfItem(item)) {
    // Every object but a mutable (regenerated) document must hash to the digest its item records.
    if (!MUTABLE_PREFIXES.some((p) => r.key.startsWith(p))) ws.recorded(r.key, r.digest);
    if (r.superseded) continue;
    ws.stage(scope, 't', r.key, `named by ${r.source}`, r.digest);
  }
  stageStrings(ws, scope, item, `named by ${where}`);
  if (item.type === 'version') ws.version(item.artifact_id as string, item.version as number);
  if (item.type === 'head')
    ws.head(item.artifact_id as string, item.latest_version as number, item.version_reserved_at as string | undefined, item.PK);
  if (item.type === 'execution') noteReservations(ws, item, now, where);
  return item.type === 'backup';
}

/** An upload is in flight while its run is RUNNING and its reservation is not stale. */
function noteReservations(ws: Workset, item: Item, now: number, where: string): void {
  for (const attr of Object.keys(item)) {
    const name = attr.slice(RESERVATION_PREFIX.length);
    // An upload that died leaves a reservation nothing releases, and its bytes must not be kept forever.
    if (!inFlight(item.status === 'RUNNING' ? item[attr] : undefined, now)) continue;
    if (attr.startsWith(RESERVATION_PREFIX) && (EXECUTION_OUTPUTS as readonly string[]).includes(name)) {
      ws.key(executionKey(item.run_id as string, name as (typeof EXECUTION_OUTPUTS)[number]), `in-flight upload reserved by ${where}`);
    }
  }
}

/** Version numbers reserved on a HEAD but not (yet) committed: uploads in flight, while recent. */
export function noteInFlightVersions(ws: Workset, now: number, artifacts?: readonly string[]): void {
  const rows = [...ws.inFlightVersions(artifacts)];
  ws.tx(() => {
    for (const h of rows) {
      if (h.reserved_at !== null && !inFlight(h.reserved_at, now)) continue;
      for (let n = h.from; n <= h.latest; n++) {
        ws.prefix(`artifacts/${h.artifact}/v${n}/`, `in-flight upload of version ${n} reserved by ${h.pk} HEAD`);
      }
    }
  });
}

/**
 * A registered backup's manifest names objects a restore would need: they stay referenced. A backup
 * whose manifest cannot be read (moved, damaged, still being written) fails the scan closed with a
 * coded error naming it and the way out; a FAILED backup names nothing, and neither does a RETIRED one
 * (the operator said it is gone: it no longer protects its objects).
 */
export async function noteBackup(ws: Workset, item: Item): Promise<void> {
  if (item.status === 'FAILED' || item.status === 'RETIRED') return;
  const where = `${item.PK} ${item.SK}`;
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
  const scope = `B${id}`;
  try {
    const backup = await openBackup(item.location as string, { expectedManifestDigest: manifestDigest });
    await inBatches(ws, backup.items(), (i) => {
      if (NOT_REFERENCES.has(i.type as string)) return;
      // The backup's own archive records supersede its originals, for its items and its object list.
      for (const a of archivedOriginals(i)) {
        ws.supersede(`${scope}|${i.PK}`, a.original, a.copy, a.digest, false);
        ws.supersede(scope, a.original, a.copy, a.digest, false);
      }
      stageStrings(ws, `${scope}|${i.PK}`, i, why);
    });
    // Quarantined objects ride in backups (seed 004) without becoming references to themselves, and so
    // do archived originals a manifest lists beside their copies (flagged `superseded`, B13).
    await inBatches(ws, backup.objects(), (o) => {
      if (!o.retained && (o as { superseded?: boolean }).superseded !== true) ws.stage(scope, 't', o.key, why, o.digest);
    });
  } catch (e) {
    throw unreadableBackup(id, String(item.location), String(item.status), e);
  }
}

async function inBatches<T>(ws: Workset, source: AsyncIterable<T>, fn: (x: T) => void, size = 1000): Promise<void> {
  let batch: T[] = [];
  const flush = () => {
    const b = batch;
    batch = [];
    ws.tx(() => {
      for (const x of b) fn(x);
    });
  };
  for await (const x of source) {
    batch.push(x);
    if (batch.length >= size) flush();
  }
  flush();
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
