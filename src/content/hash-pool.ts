/**
 * sha256 on the second core: one worker thread (hash-worker.ts), shared by every large transfer of
 * the process, hashes chunks that the thread moving the bytes has put into slots of a
 * SharedArrayBuffer. The bytes are never copied between threads; each slot is acknowledged once
 * hashed, so the mover reuses it as soon as the hash and its own write are done. Slot memory is
 * pooled: a transfer borrows SLOTS × SLOT_BYTES and gives it back.
 */
import { Worker } from 'node:worker_threads';
import { positiveEnv } from '../core/config.ts';
import { type Digest, formatDigest } from '../core/digest.ts';
import { HASH_WORKER_SOURCE } from './hash-worker.ts';

/**
 * Transfers larger than this hash on the worker; smaller ones on their own thread, where a trip to the
 * worker (two messages) costs about what hashing the bytes does.
 */
export const WORKER_MIN_BYTES = positiveEnv(process.env.ALP_HASH_WORKER_MIN_BYTES) ?? 256 * 1024;
/** Bytes per slot: one file read, one socket or file write, one hash message. */
export const SLOT_BYTES = 1 << 20;
/** Slots per transfer: one being read, one being hashed, one being written, one held back. */
export const SLOTS = 4;
/** Transfers that hash on the worker at once; more go on hashing on their own thread (bounded memory). */
const MAX_SESSIONS = 32;
/** Idle slot memory kept for the next transfer. */
const KEEP_IDLE = 4;

export type HashRequest =
  | { session: number; open: SharedArrayBuffer }
  | { session: number; slot: number; offset: number; length: number }
  | { session: number; finish: true }
  | { session: number; abort: true };
export type HashReply = { session: number; slot: number } | { session: number; digest: string } | { session: number; error: string };

function startWorker(): Worker {
  return new Worker(HASH_WORKER_SOURCE, { eval: true });
}

interface Waiter {
  resolve(value?: string): void;
  reject(e: Error): void;
}

class HashWorker {
  private readonly worker = startWorker();
  private readonly waiting = new Map<string, Waiter>();
  private open = 0;
  private nextSession = 1;
  private failed: Error | undefined;

  constructor(private readonly onDead: () => void) {
    this.worker.unref();
    this.worker.on('message', (r: HashReply) => {
      const k = 'slot' in r ? `${r.session}:${r.slot}` : `${r.session}:end`;
      const w = this.waiting.get(k);
      this.waiting.delete(k);
      if ('error' in r) w?.reject(new Error(r.error));
      else w?.resolve('digest' in r ? r.digest : undefined);
    });
    const dead = (e: Error) => {
      this.failed = e;
      for (const w of this.waiting.values()) w.reject(e);
      this.waiting.clear();
      this.onDead();
    };
    this.worker.on('error', dead);
    this.worker.on('exit', (code) => dead(new Error(`the hashing worker exited with ${code}`)));
  }

  get sessions(): number {
    return this.open;
  }

  begin(memory: SharedArrayBuffer): number {
    const session = this.nextSession++;
    // Referenced while a transfer waits on it: an idle worker never keeps the process alive.
    if (this.open++ === 0) this.worker.ref();
    this.worker.postMessage({ session, open: memory } satisfies HashRequest);
    return session;
  }

  end(session: number): void {
    this.post({ session, abort: true });
    if (--this.open === 0) this.worker.unref();
  }

  request(m: HashRequest, key: string): Promise<string | undefined> {
    if (this.failed) return Promise.reject(this.failed);
    return new Promise((resolve, reject) => {
      this.waiting.set(key, { resolve, reject });
      this.worker.postMessage(m);
    });
  }

  post(m: HashRequest): void {
    if (!this.failed) this.worker.postMessage(m);
  }
}

let shared: HashWorker | undefined;
const idle: SharedArrayBuffer[] = [];

/**
 * One transfer's hash on the worker, with its slots. `hash(slot, length)` resolves when the worker
 * has hashed the slot's first `length` bytes (chunks are hashed in the order they are given).
 */
export class HashSession {
  readonly slots: Buffer[];
  private done = false;

  private constructor(
    private readonly worker: HashWorker,
    private readonly memory: SharedArrayBuffer,
    private readonly session: number,
  ) {
    this.slots = Array.from({ length: SLOTS }, (_, i) => Buffer.from(memory, i * SLOT_BYTES, SLOT_BYTES));
  }

  /** A session, or undefined when MAX_SESSIONS are running (the caller hashes on its own thread). */
  static open(): HashSession | undefined {
    shared ??= new HashWorker(() => {
      shared = undefined;
    });
    if (shared.sessions >= MAX_SESSIONS) return undefined;
    const memory = idle.pop() ?? new SharedArrayBuffer(SLOTS * SLOT_BYTES);
    return new HashSession(shared, memory, shared.begin(memory));
  }

  hash(slot: number, length: number): Promise<void> {
    const m: HashRequest = { session: this.session, slot, offset: slot * SLOT_BYTES, length };
    return this.worker.request(m, `${this.session}:${slot}`).then(() => {});
  }

  /** The digest of every byte hashed (after every chunk given before it). */
  async digest(): Promise<Digest> {
    const hex = await this.worker.request({ session: this.session, finish: true }, `${this.session}:end`);
    return formatDigest(hex as string);
  }

  /** Ends the session (idempotent). Only once every hash and write of its slots has settled: the memory goes back to the pool. */
  close(): void {
    if (this.done) return;
    this.done = true;
    this.worker.end(this.session);
    if (idle.length < KEEP_IDLE) idle.push(this.memory);
  }
}
