/**
 * Issue 20 item 1 figures (`npm run bench lifecycle`, or `npm run bench tlog` alone): what the
 * transparency log costs a transition on the embedded profile, and how soon a committed entry is in
 * the log. Transitions/s for 1 and 16 callers with the log (every audit transaction queues its
 * entries on its HEAD, and the sequencer loop of `alp serve` runs in the same process: a round
 * ALP_TLOG_BATCH_MS after commits and every second, each round signing a checkpoint) against the same
 * run without it (ctx.tlogMarkers = false, as ALP_TLOG_MARKERS=off sets, and no loop); windows of a
 * second or two (several rounds each: the steady state, not one round's fixed cost), interleaved,
 * medians; the process's CPU per transition beside each.
 * Commit-to-inclusion latency: from a transition's commit returning to the round that committed its
 * leaf (p50/p99). Goal: the log costs < 10 % of the transitions/s.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { readLogState } from '../src/audit/tlog/state.ts';
import { FsContentStore } from '../src/content/fs/fs-content-store.ts';
import { systemClock } from '../src/core/clock.ts';
import { createContext } from '../src/runtime/context.ts';
import { startLogLoop } from '../src/runtime/tlog-loop.ts';
import { SqliteItemStore } from '../src/store/sqlite/sqlite-item-store.ts';
import { initInstallation } from '../src/system/installation.ts';
import { fileKeySource } from '../src/system/installation-key.ts';
import { artifacts, transitions } from './lifecycle.ts';
import { benchDir, fmt, goal, header, median, row } from './util.ts';

const CALLERS = [1, 16];
const ROUNDS = 3;
/** Transitions per window and caller count: about a second or two each, so a window holds several rounds (steady state). */
const WINDOW: Record<number, number> = { 1: Number(process.env.W1 ?? 2400), 16: Number(process.env.W16 ?? 9600) };
type Ctx = ReturnType<typeof createContext>;

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? 0;

/** Transitions/s of `fn`, and the process's CPU (all threads) per transition in µs into `cpu`. */
async function rate(n: number, fn: () => Promise<void>, cpu: number[]): Promise<number> {
  const start = performance.now();
  const before = process.cpuUsage();
  await fn();
  const used = process.cpuUsage(before);
  cpu.push((used.user + used.system) / n);
  return n / ((performance.now() - start) / 1000);
}

export async function benchLogCost(opts: { quick?: boolean } = {}): Promise<Record<string, number>> {
  const perRound = (n: number) => (opts.quick ? 16 * 8 : (WINDOW[n] as number));
  const dir = benchDir('tlog');
  try {
    const items = new SqliteItemStore(path.join(dir, 'alp.db'));
    const content = await FsContentStore.open(path.join(dir, 'content'));
    const ctx = createContext({
      items,
      content,
      clock: systemClock,
      signingKey: fileKeySource(path.join(dir, 'keys', 'k.pem'), { create: true }),
    });
    await initInstallation(ctx);
    header(
      `transparency log: transitions with and without the log (${ROUNDS} interleaved windows of ${fmt(perRound(1))} / ${fmt(perRound(16))}), SQLite synchronous=FULL`,
    );
    // Separate artifacts for the runs without the log: a chain whose entries are recorded only in some
    // windows would have gaps the sequencer skips, not the chains the log sees in use.
    const ids = new Map<number, string[]>();
    const plain = new Map<number, string[]>();
    for (const n of CALLERS) {
      ids.set(n, await artifacts(ctx, n, `t${n}-`));
      ctx.tlogMarkers = false;
      plain.set(n, await artifacts(ctx, n, `o${n}-`));
      ctx.tlogMarkers = true;
    }
    const parity = new Map<string, number>();
    const figures = new Map(
      CALLERS.map((n) => [n, { off: [] as number[], on: [] as number[], cpuOff: [] as number[], cpuOn: [] as number[] }]),
    );
    for (let r = 0; r < ROUNDS; r++) {
      for (const n of CALLERS) {
        const count = perRound(n);
        ctx.tlogMarkers = false;
        figures
          .get(n)
          ?.off.push(await rate(count, () => transitions(ctx, ids.get(n) ?? [], count / n, parity), figures.get(n)?.cpuOff ?? []));
        ctx.tlogMarkers = true;
        const loop = startLogLoop(ctx, { intervalMs: 1000 });
        ctx.commitObservers = [() => loop.poke()];
        figures
          .get(n)
          ?.on.push(await rate(count, () => transitions(ctx, ids.get(n) ?? [], count / n, parity), figures.get(n)?.cpuOn ?? []));
        await loop.idle(); // what the window left pending is sequenced before the next window starts
        await loop.stop();
        ctx.commitObservers = [];
      }
    }
    const out: Record<string, number> = {};
    for (const n of CALLERS) {
      const f = figures.get(n) ?? { off: [], on: [], cpuOff: [], cpuOn: [] };
      const off = median(f.off);
      const on = median(f.on);
      const cost = 100 * (1 - on / off);
      row(`transitions/s, ${n} caller${n > 1 ? 's' : ''}, without the log`, `${fmt(off)} /s`, `CPU ${fmt(median(f.cpuOff))} µs/transition`);
      row(
        `transitions/s, ${n} caller${n > 1 ? 's' : ''}, with the log (HEAD queue + sequencer)`,
        `${fmt(on)} /s`,
        `${fmt(cost, 1)} % cost, CPU ${fmt(median(f.cpuOn))} µs/transition`,
      );
      goal({
        workload: `transparency log cost, ${n} caller${n > 1 ? 's' : ''}`,
        goal: '< 10 % of transitions/s',
        measured: `${fmt(on)}/s with, ${fmt(off)}/s without = ${fmt(cost, 1)} %`,
        reference: 'the same run without markers or sequencer',
        pass: cost < 10,
      });
      out[`tlog_off_${n}_per_s`] = off;
      out[`tlog_on_${n}_per_s`] = on;
    }
    Object.assign(out, await latency(ctx, ids, parity));
    await items.close();
    return out;
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** Commit → inclusion: each commit's time until a round committed a tree that holds it. */
async function latency(ctx: Ctx, ids: Map<number, string[]>, parity: Map<string, number>): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const n of CALLERS) {
    // Drain what is pending, so sizes count this phase's entries only.
    const drain = startLogLoop(ctx, { intervalMs: 1000 });
    await drain.idle();
    await drain.stop();
    const base = (await readLogState(ctx)).size;
    const committedAt: number[] = [];
    const waits: number[] = [];
    const loop = startLogLoop(
      ctx,
      { intervalMs: 1000 },
      {
        onRound: (r) => {
          const now = performance.now();
          while (waits.length < committedAt.length && base + waits.length < r.size) waits.push(now - (committedAt[waits.length] as number));
        },
        onError: (e) => console.error('tlog round failed:', e),
      },
    );
    ctx.commitObservers = [() => loop.poke()];
    const count = 200 * n;
    await transitions(ctx, ids.get(n) ?? [], count / n, parity, () => committedAt.push(performance.now()));
    for (let i = 0; i < 300 && waits.length < committedAt.length; i++) await new Promise((r) => setTimeout(r, 10));
    await loop.stop();
    ctx.commitObservers = [];
    row(
      `commit → inclusion, ${n} caller${n > 1 ? 's' : ''} (${fmt(waits.length)} of ${fmt(count)} entries)`,
      `p50 ${fmt(pct(waits, 50), 1)} ms`,
      `p99 ${fmt(pct(waits, 99), 1)} ms`,
    );
    out[`tlog_inclusion_p50_ms_${n}`] = pct(waits, 50);
    out[`tlog_inclusion_p99_ms_${n}`] = pct(waits, 99);
  }
  return out;
}
