/**
 * The fs engine's listing: one depth-first walk of the content directory that yields keys in UTF-8 byte
 * order (the contract's order, which reconcile's streaming merge relies on), skipping temp files and
 * symlinks. A listing of everything is one walk (issue 17: restarting the walk at every page re-read
 * and re-sorted each ancestor directory per 1,000 keys — quadratic in the size of artifacts/); a page
 * is the same walk started after the cursor and stopped at the limit.
 *
 * Memory: one directory's entry names per level of depth. Directories are read and sizes taken
 * synchronously: a metadata syscall of microseconds costs less than a round trip through the libuv pool
 * (which dominated the listing: a directory per version), and the walk gives the event loop back every
 * CHUNK syscalls or so.
 */
import { type Dirent, lstatSync, readdirSync } from 'node:fs';
import path, { extname } from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import type { ObjectInfo, StorageClass } from '../content-store.ts';

const CHUNK = 512;

/** String order in UTF-8 bytes: code units order the same way except that surrogates sort above U+E000–U+FFFF. */
export function compareUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return utf8Rank(x) - utf8Rank(y);
  }
  return a.length - b.length;
}

function utf8Rank(unit: number): number {
  if (unit < 0xd800) return unit;
  return unit < 0xe000 ? unit + 0x2000 : unit - 0x800;
}

const HIGH_UNITS = /[\ud800-\uffff]/;
const nativeCompare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

interface Entry {
  /** The key (files) or key prefix with its trailing slash (directories). */
  key: string;
  dir: boolean;
  name: string;
}

interface Frame {
  dirPath: string;
  entries: Entry[];
  next: number;
}

/** Where a key's storage class comes from on a file system: archive/ stands for GLACIER (cold.ts). */
export function reportedClass(key: string): StorageClass {
  return key.startsWith('archive/') ? 'GLACIER' : 'STANDARD';
}

export interface WalkScope {
  /** The directory's key (ending in '/', or '' for the root) and its path, already checked for symlinks. */
  dirKey: string;
  dirPath: string;
  prefix: string;
  /** Keys up to and including this one are left out (a page cursor's last key). */
  after?: string;
  tempPrefix: string;
}

function readDir(dirPath: string, dirKey: string, tempPrefix: string): Entry[] {
  let dirents: Dirent[];
  try {
    dirents = readdirSync(dirPath, { withFileTypes: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return [];
    throw e;
  }
  const entries: Entry[] = [];
  let high = false;
  for (const d of dirents) {
    const dir = d.isDirectory();
    if ((!dir && !d.isFile()) || d.name.startsWith(tempPrefix)) continue;
    const key = dirKey + d.name + (dir ? '/' : '');
    high ||= HIGH_UNITS.test(d.name);
    entries.push({ key, dir, name: d.name });
  }
  const order = high ? compareUtf8 : nativeCompare;
  return entries.sort((a, b) => order(a.key, b.key));
}

/** Whether the walk descends into a directory: some key below it can match the prefix and follow the cursor. */
function wanted(e: Entry, scope: WalkScope): boolean {
  if (e.dir) {
    if (!e.key.startsWith(scope.prefix) && !scope.prefix.startsWith(e.key)) return false;
    return scope.after === undefined || scope.after.startsWith(e.key) || compareUtf8(e.key, scope.after) > 0;
  }
  return e.key.startsWith(scope.prefix) && (scope.after === undefined || compareUtf8(e.key, scope.after) > 0);
}

/** Objects under the scope in key order, in batches of at most CHUNK. */
export async function* walkObjects(scope: WalkScope): AsyncGenerator<ObjectInfo[]> {
  const stack: Frame[] = [{ dirPath: scope.dirPath, entries: readDir(scope.dirPath, scope.dirKey, scope.tempPrefix), next: 0 }];
  let batch: ObjectInfo[] = [];
  // Syscalls since the event loop last ran (a directory read counts as 8 file stats).
  let work = 0;
  while (stack.length > 0) {
    const frame = stack[stack.length - 1] as Frame;
    const e = frame.entries[frame.next++];
    if (!e) {
      stack.pop();
      continue;
    }
    if (!wanted(e, scope)) continue;
    if (e.dir) {
      const dirPath = path.join(frame.dirPath, e.name);
      stack.push({ dirPath, entries: readDir(dirPath, e.key, scope.tempPrefix), next: 0 });
      work += 8;
      continue;
    }
    const stat = lstatSync(path.join(frame.dirPath, e.name), { throwIfNoEntry: false });
    if (stat?.isFile()) batch.push({ key: e.key, size: stat.size, storageClass: reportedClass(e.key) });
    if (batch.length >= CHUNK || ++work >= CHUNK) {
      work = 0;
      if (batch.length > 0) yield batch;
      batch = [];
      await yieldToLoop();
    }
  }
  if (batch.length > 0) yield batch;
}

/** Batches the worker may post ahead of the reader. */
export const CREDITS = 4;
export type WorkerScope = WalkScope;
export type WalkMessage = { batch: ObjectInfo[] } | { done: true } | { error: { message: string; code?: string } };

const SOURCE_EXT = extname(new URL(import.meta.url).pathname);
const WORKER_URL = new URL(`./fs-walk-worker${SOURCE_EXT}`, import.meta.url);

/**
 * Built (dist/*.js), the worker is its file. Run from source (tests, bench: `--import tsx`), a worker
 * does not inherit tsx's loader on Node 20 (privatenumber/tsx#354): it registers it first.
 */
function startWorker(scope: WalkScope): Worker {
  if (SOURCE_EXT !== '.ts') return new Worker(WORKER_URL, { workerData: scope });
  const boot = `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(WORKER_URL.href)}); })`;
  return new Worker(boot, { eval: true, workerData: scope });
}

/**
 * walkObjects on a worker thread: a whole listing's directory reads, stats and sorts run on the second
 * core while the caller works on what it already has (the retention scan folds items meanwhile).
 * Ending the iteration early terminates the worker.
 */
export async function* walkInWorker(scope: WalkScope): AsyncGenerator<ObjectInfo[]> {
  const worker = startWorker(scope);
  const queue: WalkMessage[] = [];
  let notify: (() => void) | undefined;
  const push = (m: WalkMessage) => {
    queue.push(m);
    notify?.();
  };
  worker.on('message', push);
  worker.on('error', (e) => push({ error: { message: e.message } }));
  worker.on('exit', (code) => push(code === 0 ? { done: true } : { error: { message: `listing worker exited with ${code}` } }));
  try {
    for (;;) {
      while (queue.length === 0) await new Promise<void>((r) => (notify = r));
      const m = queue.shift() as WalkMessage;
      if ('error' in m) throw Object.assign(new Error(m.error.message), m.error.code ? { code: m.error.code } : {});
      if ('done' in m) return;
      worker.postMessage(1);
      yield m.batch;
    }
  } finally {
    await worker.terminate();
  }
}
