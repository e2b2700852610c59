/**
 * A directory's entry keys in UTF-8 byte order without holding them all (issue 17: `artifacts/` holds
 * one directory per artifact, 250,000 at a million objects, and reading it whole cost the listing
 * ~130 MiB): the keys are sorted in runs of RUN_KEYS, each run past the first spilled to a temporary
 * file (keys NUL-terminated: no file name holds a NUL), and the runs merged through a heap. Memory: one
 * run of keys plus a READ_BYTES buffer per spilled run, whatever the directory's size.
 */
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { positiveEnv } from '../../core/config.ts';
import { compareUtf8 } from '../../core/object-keys.ts';

/** Keys sorted in memory at a time; ALP_WALK_RUN_KEYS overrides it (tests spill small directories). */
export const RUN_KEYS = positiveEnv(process.env.ALP_WALK_RUN_KEYS) ?? 50_000;
const READ_BYTES = 16 * 1024;

/** Keys one at a time, in order; close() frees what the source holds (its temporary files). */
export interface KeySource {
  next(): string | undefined;
  close(): void;
}

export function arraySource(keys: readonly string[]): KeySource {
  let i = 0;
  return { next: () => keys[i++], close: () => {} };
}

/** UTF-16 order equals UTF-8 byte order unless a key holds a surrogate or a unit above them. */
const HIGH_UNITS = /[\ud800-\uffff]/;
const plainOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Sorts keys in the contract's order; `high` says whether any key needs the UTF-8 comparison. */
export function sortKeys(keys: string[], high = keys.some((k) => HIGH_UNITS.test(k))): string[] {
  return keys.sort(high ? compareUtf8 : undefined);
}

export function hasHighUnits(name: string): boolean {
  return HIGH_UNITS.test(name);
}

class RunReader {
  private buf = Buffer.alloc(0);
  private pos = 0;
  private eof = false;
  constructor(private readonly fd: number) {}

  next(): string | undefined {
    for (;;) {
      const nul = this.buf.indexOf(0, this.pos);
      if (nul >= 0) {
        const key = this.buf.toString('utf8', this.pos, nul);
        this.pos = nul + 1;
        return key;
      }
      if (this.eof) return undefined;
      const chunk = Buffer.allocUnsafe(READ_BYTES);
      const n = readSync(this.fd, chunk, 0, READ_BYTES, null);
      if (n === 0) this.eof = true;
      this.buf = Buffer.concat([this.buf.subarray(this.pos), chunk.subarray(0, n)]);
      this.pos = 0;
    }
  }
}

interface Head {
  key: string;
  next: () => string | undefined;
}

/** Collects a directory's keys as they are read; source() yields them sorted, spilled or not. */
export class SortedKeys {
  private keys: string[] = [];
  private high = false;
  private spillDir: string | undefined;
  private readonly runs: string[] = [];

  constructor(private readonly runKeys = RUN_KEYS) {}

  add(key: string, high: boolean): void {
    this.keys.push(key);
    this.high ||= high;
    if (this.keys.length >= this.runKeys) this.spill();
  }

  private spill(): void {
    this.spillDir ??= mkdtempSync(path.join(os.tmpdir(), 'alp-walk-'));
    const file = path.join(this.spillDir, String(this.runs.length));
    const fd = openSync(file, 'wx', 0o600);
    try {
      const sorted = sortKeys(this.keys, this.high);
      for (let i = 0; i < sorted.length; i += 1000) writeSync(fd, `${sorted.slice(i, i + 1000).join('\u0000')}\u0000`);
    } finally {
      closeSync(fd);
    }
    this.runs.push(file);
    this.keys = [];
  }

  /** The keys in order. Call at most once; the source owns the spilled runs (close() removes them). */
  source(): KeySource {
    const last = sortKeys(this.keys, this.high);
    if (this.runs.length === 0) return arraySource(last);
    const fds = this.runs.map((f) => openSync(f, 'r'));
    const dir = this.spillDir as string;
    const close = () => {
      for (const fd of fds.splice(0)) closeSync(fd);
      rmSync(dir, { recursive: true, force: true });
    };
    try {
      const inMemory = arraySource(last);
      const nexts = [...fds.map((fd) => new RunReader(fd)), inMemory].map((r) => () => r.next());
      return { next: mergeHeads(nexts, this.high ? compareUtf8 : plainOrder), close };
    } catch (e) {
      close();
      throw e;
    }
  }

  /** Removes spilled runs when no source was taken (an error while reading the directory). */
  discard(): void {
    if (this.spillDir) rmSync(this.spillDir, { recursive: true, force: true });
  }
}

/** A k-way merge of sorted sources through a binary heap of their current keys. */
function mergeHeads(nexts: Array<() => string | undefined>, cmp: (a: string, b: string) => number): () => string | undefined {
  const heap: Head[] = [];
  const less = (i: number, j: number) => cmp((heap[i] as Head).key, (heap[j] as Head).key) < 0;
  const swap = (i: number, j: number) => {
    [heap[i], heap[j]] = [heap[j] as Head, heap[i] as Head];
  };
  const down = (start: number) => {
    for (let i = start; ; ) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && less(l, m)) m = l;
      if (r < heap.length && less(r, m)) m = r;
      if (m === i) return;
      swap(i, m);
      i = m;
    }
  };
  for (const next of nexts) {
    const key = next();
    if (key !== undefined) heap.push({ key, next });
  }
  for (let i = (heap.length >> 1) - 1; i >= 0; i--) down(i);
  return () => {
    const top = heap[0];
    if (!top) return undefined;
    const key = top.key;
    const following = top.next();
    if (following === undefined) {
      const tail = heap.pop() as Head;
      if (heap.length > 0) heap[0] = tail;
    } else top.key = following;
    if (heap.length > 0) down(0);
    return key;
  };
}
