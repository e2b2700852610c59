/**
 * The fs engine's listing: one depth-first walk of the content directory that yields keys in UTF-8 byte
 * order (the contract's order, which reconcile's streaming merge relies on), skipping temp files and
 * symlinks. A listing of everything is one walk (issue 17: restarting the walk at every page re-read
 * and re-sorted each ancestor directory per 1,000 keys — quadratic in the size of artifacts/); a page
 * is the same walk started after the cursor and stopped at the limit.
 *
 * Memory: per level of depth, one directory's entry names, or for the root and its top-level
 * directories at most one sorted run of them (sorted-names.ts spills the rest). Directories are read and sizes taken
 * synchronously: a metadata syscall of microseconds costs less than a round trip through the libuv pool
 * (which dominated the listing: a directory per version), and the walk gives the event loop back every
 * CHUNK syscalls or so.
 */
import { type Dirent, lstatSync, opendirSync, readdirSync } from 'node:fs';
import path, { extname } from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { compareUtf8 } from '../../core/object-keys.ts';
import type { ObjectInfo, StorageClass } from '../content-store.ts';
import { arraySource, hasHighUnits, type KeySource, SortedKeys } from './sorted-names.ts';

const CHUNK = 512;

/** Where a key's storage class comes from on a file system: archive/ stands for GLACIER (cold.ts). */
export function reportedClass(key: string): StorageClass {
  return key.startsWith('archive/') ? 'GLACIER' : 'STANDARD';
}

interface Frame {
  dirPath: string;
  dirKey: string;
  /** The entries' keys in order; a directory's ends in '/'. A large directory's come from spilled runs. */
  keys: KeySource;
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

/**
 * A directory's entry keys, in order. The content root and its top-level directories (which hold every
 * artifact, every run) are read one entry at a time into sorted runs (sorted-names.ts: bounded memory
 * whatever their size); deeper ones (most hold two files) with one readdir call each, since an opendir
 * handle costs more than reading a small directory.
 */
function readDir(dirPath: string, dirKey: string, tempPrefix: string): KeySource {
  const streamed = dirKey.indexOf('/') === dirKey.length - 1;
  const sorted = new SortedKeys();
  const take = (d: Dirent) => {
    const isDir = d.isDirectory();
    if ((!isDir && !d.isFile()) || d.name.startsWith(tempPrefix)) return;
    sorted.add(isDir ? `${dirKey}${d.name}/` : dirKey + d.name, hasHighUnits(d.name));
  };
  try {
    if (streamed) {
      const dir = opendirSync(dirPath, { bufferSize: 256 });
      try {
        for (let d = dir.readSync(); d !== null; d = dir.readSync()) take(d);
      } finally {
        dir.closeSync();
      }
    } else for (const d of readdirSync(dirPath, { withFileTypes: true })) take(d);
  } catch (e) {
    sorted.discard();
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return arraySource([]);
    throw e;
  }
  return sorted.source();
}

/** Whether the walk descends into a directory (key ends in '/') or yields a file: some key can match the prefix and follow the cursor. */
function wanted(key: string, scope: WalkScope): boolean {
  if (key.endsWith('/')) {
    if (!key.startsWith(scope.prefix) && !scope.prefix.startsWith(key)) return false;
    return scope.after === undefined || scope.after.startsWith(key) || compareUtf8(key, scope.after) > 0;
  }
  return key.startsWith(scope.prefix) && (scope.after === undefined || compareUtf8(key, scope.after) > 0);
}

/** Objects under the scope in key order, in batches of at most CHUNK. */
export async function* walkObjects(scope: WalkScope, meter?: { busyMs: number }): AsyncGenerator<ObjectInfo[]> {
  let resumed = performance.now();
  const pause = () => {
    if (meter) meter.busyMs += performance.now() - resumed;
  };
  const stack: Frame[] = [{ dirPath: scope.dirPath, dirKey: scope.dirKey, keys: readDir(scope.dirPath, scope.dirKey, scope.tempPrefix) }];
  try {
    yield* walkFrames(stack, scope, pause, () => {
      resumed = performance.now();
    });
  } finally {
    for (const frame of stack) frame.keys.close();
  }
}

async function* walkFrames(stack: Frame[], scope: WalkScope, pause: () => void, resume: () => void): AsyncGenerator<ObjectInfo[]> {
  let batch: ObjectInfo[] = [];
  // Syscalls since the event loop last ran (a directory read counts as 8 file stats).
  let work = 0;
  while (stack.length > 0) {
    const frame = stack[stack.length - 1] as Frame;
    const key = frame.keys.next();
    if (key === undefined) {
      stack.pop()?.keys.close();
      continue;
    }
    if (!wanted(key, scope)) continue;
    if (key.endsWith('/')) {
      const dirPath = `${frame.dirPath}${path.sep}${key.slice(frame.dirKey.length, -1)}`;
      stack.push({ dirPath, dirKey: key, keys: readDir(dirPath, key, scope.tempPrefix) });
      work += 8;
      continue;
    }
    // Entry names hold no separator: concatenation is the path (path.join's normalising costs per file).
    const stat = lstatSync(`${frame.dirPath}${path.sep}${key.slice(frame.dirKey.length)}`, { throwIfNoEntry: false });
    if (stat?.isFile()) batch.push({ key, size: stat.size, storageClass: reportedClass(key) });
    if (batch.length >= CHUNK || ++work >= CHUNK) {
      work = 0;
      pause();
      if (batch.length > 0) yield batch;
      batch = [];
      await yieldToLoop();
      resume();
    }
  }
  pause();
  if (batch.length > 0) yield batch;
}

/** Batches the worker may post ahead of the reader. */
export const CREDITS = 32;
/** Keys walked on the calling thread before a worker may be started (a small listing never pays for one). */
export const WORKER_AFTER = 2_000;
/**
 * Or, past the first batch, this long into the walk: a caller busy with other work (the retention
 * scan's item pass) takes its batches slowly, and reached WORKER_AFTER only after most of its own work
 * (at 20,000 objects, 0.8 s into a 2 s plan) — then the worker's start-up was not overlapped with anything.
 */
export const WORKER_AFTER_MS = 100;
/**
 * Keys walked on the calling thread, at most, before the walk goes on in the worker (which started
 * meanwhile): it goes on there as soon as the worker is up, and from here waits for it if it is not.
 */
export const HAND_OVER_AT = 10_000;
/**
 * Below this share of the calling thread's time spent walking, the thread has other work (the
 * retention scan's item pass) and the walk moves to a worker; above it, the caller waits on the walk
 * anyway and a worker would only add its start-up and the messages.
 */
export const BUSY_SHARE = 0.75;
/** Walks that went on in a worker (tests check the hand-over happens). */
export const workerWalks = { count: 0 };

/** A batch as posted: keys joined by NUL (no file name holds one) and sizes in a transferred array, cheap to clone. */
export type WalkMessage =
  | { keys: string; sizes: Float64Array }
  | { ready: true }
  | { done: true }
  | { error: { message: string; code?: string } };

export function packBatch(batch: readonly ObjectInfo[]): { keys: string; sizes: Float64Array } {
  return { keys: batch.map((o) => o.key).join('\u0000'), sizes: Float64Array.from(batch, (o) => o.size) };
}

function unpackBatch(m: { keys: string; sizes: Float64Array }): ObjectInfo[] {
  return m.keys.split('\u0000').map((key, i) => ({ key, size: m.sizes[i] as number, storageClass: reportedClass(key) }));
}

/** A walk holds one directory's keys per level: a small heap, so its garbage does not pile up in RSS. */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 256 };
const SOURCE_EXT = extname(new URL(import.meta.url).pathname);
const WORKER_URL = new URL(`./fs-walk-worker${SOURCE_EXT}`, import.meta.url);

/**
 * Built (dist/*.js), the worker is its file. Run from source (tests, bench: `--import tsx`), a worker
 * does not inherit tsx's loader on Node 20 (privatenumber/tsx#354): it registers it first.
 */
function startWorker(): Worker {
  if (SOURCE_EXT !== '.ts') return new Worker(WORKER_URL, { resourceLimits: WORKER_LIMITS });
  const boot = `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(WORKER_URL.href)}); })`;
  return new Worker(boot, { eval: true, resourceLimits: WORKER_LIMITS });
}

/** A worker started ahead of its scope (it boots while the calling thread walks); messages queue until read. */
class WalkWorker {
  private readonly worker = startWorker();
  private readonly queue: Array<Exclude<WalkMessage, { ready: true }>> = [];
  private notify: (() => void) | undefined;
  /** Whether the worker has booted (its modules loaded: from source, tsx's start-up takes a while). */
  ready = false;

  constructor() {
    const push = (m: WalkMessage) => {
      if ('ready' in m) {
        this.ready = true;
        return;
      }
      this.queue.push(m);
      this.notify?.();
    };
    this.worker.on('message', push);
    this.worker.on('error', (e) => push({ error: { message: e.message } }));
    this.worker.on('exit', (code) => push(code === 0 ? { done: true } : { error: { message: `listing worker exited with ${code}` } }));
  }

  async *walk(scope: WalkScope): AsyncGenerator<ObjectInfo[]> {
    this.worker.postMessage({ scope });
    for (;;) {
      while (this.queue.length === 0) await new Promise<void>((r) => (this.notify = r));
      const m = this.queue.shift() as Exclude<WalkMessage, { ready: true }>;
      if ('error' in m) throw Object.assign(new Error(m.error.message), m.error.code ? { code: m.error.code } : {});
      if ('done' in m) return;
      this.worker.postMessage({ credit: 1 });
      yield unpackBatch(m);
    }
  }

  terminate(): Promise<number> {
    return this.worker.terminate();
  }
}

/**
 * A whole listing: on the calling thread while the caller waits on it; when the caller has other work
 * (under BUSY_SHARE of the thread spent walking, measured from WORKER_AFTER keys or WORKER_AFTER_MS),
 * the rest goes on in a worker thread started early (its start-up overlaps the walk) and handed the
 * rest once it is up (HAND_OVER_AT at the latest), whose directory reads, stats and sorts run on the
 * second core while the caller works on what it already has (the retention scan folds items
 * meanwhile). Ending the iteration early terminates the worker.
 */
export async function* walkListing(scope: WalkScope): AsyncGenerator<ObjectInfo[]> {
  let worker: WalkWorker | undefined;
  let listed = 0;
  let last: string | undefined;
  let handedOver = false;
  const meter = { busyMs: 0 };
  const started = performance.now();
  try {
    for await (const batch of walkObjects(scope, meter)) {
      yield batch;
      listed += batch.length;
      last = batch.at(-1)?.key ?? last;
      const elapsed = performance.now() - started;
      const large = listed >= WORKER_AFTER || (listed >= CHUNK && elapsed >= WORKER_AFTER_MS);
      const shared = meter.busyMs < BUSY_SHARE * elapsed;
      if (!worker && large && listed < HAND_OVER_AT && shared) worker = new WalkWorker();
      // As soon as it is up: the calling thread's share of the walk is what its other work delays.
      if (worker && (worker.ready || listed >= HAND_OVER_AT)) {
        handedOver = true;
        break;
      }
    }
    if (worker && handedOver && last !== undefined) {
      workerWalks.count++;
      yield* worker.walk({ ...scope, after: last });
    }
  } finally {
    await worker?.terminate();
  }
}
