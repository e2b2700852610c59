/**
 * The retention plan's cache (issue 17: a plan's cost grows with what changed, not with everything
 * ever stored). The whole working set (scan-workset.ts) — what the items name, the listing's rows, the
 * index entries, and what the closure derived from them — is saved after each plan's closure (before
 * any pin of that plan is applied) with the item store's change mark taken before the scan read
 * anything. The next plan starts from a copy of it, folds in only the items written since that mark
 * (ItemStore.scanChangedSince), lists everything again and merges the listing with the cached rows
 * (scan-diff.ts): only new, gone or resized objects are written, and only new references and new
 * objects go through the closure (scan-closure.ts markNew / markFresh).
 *
 * Conservative by construction: folding changes only adds references, and a reference once derived
 * (a digest found inside a referenced object) stays. What a cache cannot see — deleted items, upload
 * reservations gone stale with time, objects gone since their references were derived — can only keep
 * more objects than a whole scan would, never fewer; and it is bounded: a cache is rebuilt by a whole
 * scan once it is CACHE_MAX_AGE_MS old (by the injected clock), when the store cannot answer the
 * changes since its mark from a log (ItemStore.changesAnswerable: DynamoDB never can), when its
 * installation, content root or index layout differ, and whenever a changed item releases references:
 * an archive record (an original superseded by its copy, B13), a backup FAILED or RETIRED, a pin
 * added or removed. What the cache never answers for is listed as new every time (scan-diff.ts).
 *
 * The cache is not state: a missing, unreadable or foreign file means a whole scan. It lives in
 * ALP_SCAN_CACHE_DIR (default: the OS temp directory's alp-scan-cache/, created 0700); ALP_SCAN_CACHE_DIR=off
 * turns it off. A directory or file that is not this user's own or that others can write is never
 * used (a planted cache could drop references). Two plans at once each work on a private copy; the last to finish replaces the file atomically.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { digestHex, sha256 } from '../core/digest.ts';
import type { ItemStore } from '../store/item-store.ts';
import { Workset } from './scan-workset.ts';

export const CACHE_FORMAT = '2';
export const CACHE_MAX_AGE_MS = 60 * 60 * 1000;

export interface ScanCacheOptions {
  /** The cache file (scanCacheFile). */
  file: string;
  /** What the cache must belong to: installation, content root and index layout. */
  identity: string;
  /** A cache older than this since the whole scan that built it is rebuilt (default CACHE_MAX_AGE_MS). */
  maxAgeMs?: number;
}

/** The cache file of an installation's content root, or undefined when caching is off. */
export function scanCacheFile(installationId: string, root: string): string | undefined {
  const dir = process.env.ALP_SCAN_CACHE_DIR ?? path.join(os.tmpdir(), 'alp-scan-cache');
  if (dir === 'off') return undefined;
  return path.join(dir, `${installationId}-${digestHex(sha256(root)).slice(0, 16)}.db`);
}

export interface CachedStart {
  ws: Workset;
  /** The change mark the cached references were taken at. */
  mark: string;
  /** When (clock ms) the whole scan the cache descends from ran. */
  builtAt: number;
}

/**
 * Whether `p` is this user's own, not a symlink, and writable by no one else. A cache someone else can
 * write could drop references (its folded changes start from whatever it says), so it is not used.
 */
function ownedPrivately(p: string, kind: 'dir' | 'file'): boolean {
  const st = fs.lstatSync(p, { throwIfNoEntry: false });
  if (!st || st.isSymbolicLink() || (kind === 'dir' ? !st.isDirectory() : !st.isFile())) return false;
  const uid = typeof process.getuid === 'function' ? process.getuid() : st.uid;
  return st.uid === uid && (st.mode & 0o022) === 0;
}

/** The cache's directory, created 0700 when missing; undefined when it is not private (then no cache). */
function cacheDir(c: ScanCacheOptions): string | undefined {
  const dir = path.dirname(c.file);
  if (!fs.existsSync(dir)) fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  return ownedPrivately(dir, 'dir') ? dir : undefined;
}

/** A working set started from the cache, when the cache may be used now; undefined otherwise. */
export async function startFromCache(items: ItemStore, c: ScanCacheOptions, now: number): Promise<CachedStart | undefined> {
  if (typeof items.changesAnswerable !== 'function' || !cacheDir(c) || !ownedPrivately(c.file, 'file')) return undefined;
  let ws: Workset | undefined;
  try {
    ws = new Workset({ refsFrom: c.file });
    const meta = ws.refsMeta();
    const builtAt = Number(meta.built_at);
    const fresh = Number.isFinite(builtAt) && builtAt <= now && now - builtAt <= (c.maxAgeMs ?? CACHE_MAX_AGE_MS);
    if (meta.format === CACHE_FORMAT && meta.identity === c.identity && fresh && meta.mark && (await items.changesAnswerable(meta.mark)))
      return { ws, mark: meta.mark, builtAt };
  } catch {
    // An unreadable or foreign cache is no cache.
  }
  ws?.close();
  return undefined;
}

/** Saves the working set as the cache (a private copy, then an atomic rename). */
export function saveCache(ws: Workset, c: ScanCacheOptions, meta: { mark: string; builtAt: number }): string | undefined {
  if (!cacheDir(c)) return undefined;
  const tmp = `${c.file}.${process.pid}.${Date.now()}.tmp`;
  fs.rmSync(tmp, { force: true });
  ws.saveTo(tmp, { format: CACHE_FORMAT, identity: c.identity, mark: meta.mark, built_at: String(meta.builtAt) });
  fs.chmodSync(tmp, 0o600);
  return tmp;
}

/** Puts a saved copy in place once the scan it was saved from has finished. */
export function commitCache(tmp: string, c: ScanCacheOptions): void {
  fs.renameSync(tmp, c.file);
}

export function dropCache(tmp: string | undefined): void {
  if (tmp) fs.rmSync(tmp, { force: true });
}
