/**
 * The sequencer inside `alp serve` / `alp start` (issue 20 item 2): a round (sequencer.ts) every
 * `intervalMs` (ALP_TLOG_INTERVAL_MS, default 1,000) and one shortly after audit commits (`poke`,
 * coalesced: commits that land while a round runs are taken by one more round). Every node runs the
 * loop; only the holder of the lease (lease.ts) sequences, the others try to take it each interval
 * and take over once the holder stops renewing. A round that fails is reported and the next one
 * retries; the server keeps serving.
 */

import { acquireLease, DEFAULT_LEASE_MS, defaultHolder, type Lease, releaseLease } from '../audit/tlog/lease.ts';
import { DEFAULT_BATCH_LEAVES, type RoundResult, runRound } from '../audit/tlog/sequencer.ts';
import { wholeNumberFromEnv } from '../core/config.ts';
import type { ServiceContext } from '../system/context.ts';

export const DEFAULT_TLOG_INTERVAL_MS = 1000;
/**
 * The least time between the starts of two rounds asked for by commits (`poke`). A round has a fixed
 * cost (the lease, STATE's transaction, a checkpoint signature, the tile, bundle and manifest objects
 * and their fsyncs) whatever it sequences: run right after every commit, a lone caller's rounds ran
 * back to back and took half its transitions/s; spaced, each round takes the leaves of this many ms of
 * commits. 1 s (a commit is in a signed checkpoint within about a second, p99 ~1 s, as transparency
 * logs usually publish) keeps the log under 10 % of 16 callers' transitions/s; 250 ms halves the
 * latency and costs 16 callers ~17 % (docs/benchmarks.md).
 */
export const DEFAULT_TLOG_BATCH_MS = 1000;

/** ALP_TLOG_BATCH_MS (default 1,000 ms): 0 … 10,000 ms between rounds asked for by commits. */
export function tlogBatchMs(env: NodeJS.ProcessEnv = process.env): number {
  return wholeNumberFromEnv(env, 'ALP_TLOG_BATCH_MS', DEFAULT_TLOG_BATCH_MS, { min: 0, max: 10_000, unit: 'ms' });
}

export interface LogLoopEvents {
  onRound?(result: RoundResult): void;
  onError?(error: unknown): void;
}

/** What a node's loop has done, for /metrics (tlog-metrics.ts) and status. */
export interface LogLoopStatus {
  /** Rounds this node ran holding the lease (with or without leaves to append). */
  rounds: number;
  /** Rounds that failed (reported through onError; the next one retries). */
  failures: number;
  /** When this node's last round ended without an error (epoch ms, the context's clock). */
  lastRoundAt?: number;
  /** The log's size after that round. */
  size?: number;
  /** Whether this node held the lease at its last attempt (it sequences; the others wait). */
  holding: boolean;
}

export interface LogLoop {
  /** Asks for a round soon (after an audit commit); coalesced. */
  poke(): void;
  /** This node's rounds so far. */
  status(): LogLoopStatus;
  /** Stops the loop, waits for the round in flight and gives the lease up. */
  stop(): Promise<void>;
  /** Resolves once no round is running or wanted (tests, benchmarks). */
  idle(): Promise<void>;
}

/** ALP_TLOG_INTERVAL_MS (default 1,000 ms): a whole number of milliseconds, 10 … 3,600,000. */
export function tlogIntervalMs(env: NodeJS.ProcessEnv = process.env): number {
  return wholeNumberFromEnv(env, 'ALP_TLOG_INTERVAL_MS', DEFAULT_TLOG_INTERVAL_MS, { min: 10, max: 3_600_000, unit: 'ms' });
}

/** Both settings of the loop, read (and refused when wrong) together: a server reads them before it listens. */
export function tlogSchedule(env: NodeJS.ProcessEnv = process.env): { intervalMs: number; batchMs: number } {
  return { intervalMs: tlogIntervalMs(env), batchMs: tlogBatchMs(env) };
}

export function startLogLoop(
  ctx: ServiceContext,
  opts: { intervalMs?: number; batchMs?: number; holder?: string } = {},
  events: LogLoopEvents = {},
): LogLoop {
  const intervalMs = opts.intervalMs ?? DEFAULT_TLOG_INTERVAL_MS;
  const batchMs = opts.batchMs ?? tlogBatchMs();
  let lastStart = Number.NEGATIVE_INFINITY;
  const holder = opts.holder ?? defaultHolder();
  const leaseMs = Math.max(DEFAULT_LEASE_MS, 5 * intervalMs);
  let lease: Lease | undefined;
  let stopped = false;
  let wanted = false;
  let running: Promise<void> | undefined;
  let soon: NodeJS.Timeout | undefined;
  let waiters: Array<() => void> = [];

  const status: LogLoopStatus = { rounds: 0, failures: 0, holding: false };
  const once = async (): Promise<boolean> => {
    lastStart = performance.now();
    lease = await acquireLease(ctx, holder, leaseMs);
    status.holding = lease !== undefined;
    if (!lease) return false;
    const result = await runRound(ctx, lease);
    Object.assign(status, { rounds: status.rounds + 1, lastRoundAt: ctx.clock.now().getTime(), size: result.size });
    if (result.appended > 0) events.onRound?.(result);
    return result.appended >= DEFAULT_BATCH_LEAVES; // a full batch: more may be pending
  };
  const drain = async () => {
    while (wanted && !stopped) {
      wanted = false;
      try {
        if (await once()) wanted = true;
      } catch (e) {
        status.failures++;
        events.onError?.(e);
      }
    }
    running = undefined;
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const kick = () => {
    wanted = true;
    if (!running && !stopped) running = drain();
  };
  const timer = setInterval(kick, intervalMs);
  timer.unref();
  kick();
  return {
    status: () => ({ ...status }),
    poke() {
      if (stopped || soon) return;
      // Coalesced: the commits of one event-loop turn (a SQLite group commit), and of the batchMs since
      // the last round started, ask for one round.
      const wait = Math.max(1, Math.ceil(lastStart + batchMs - performance.now()));
      soon = setTimeout(() => {
        soon = undefined;
        kick();
      }, wait);
      soon.unref();
    },
    idle() {
      if (!running && !soon && !wanted) return Promise.resolve();
      soon?.ref(); // someone waits for the round it starts: it must keep the process alive till then
      return new Promise((resolve) => waiters.push(resolve));
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      if (soon) clearTimeout(soon);
      await running;
      if (lease) await releaseLease(ctx, lease).catch(() => undefined);
    },
  };
}
