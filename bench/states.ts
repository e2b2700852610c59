/**
 * `npm run bench states` (issue 18 item 5): counts per state and the list-by-state page of 100 at
 * 100,000 and 1,000,000 versions on SQLite, with the count before counters (paging the state index,
 * queries.ts countByIndex) as the reference measured in the same run, rounds interleaved. The listing
 * is measured beside the same pages of a 10,000-version installation (rounds interleaved: both see the
 * same machine), and each page's service time (the process's CPU time) beside its wall time: on a
 * loaded machine a page's wall-time tail is the run queue's wait, not the engine's work.
 *
 * Direct build (as bench/retention-build.ts): one artifact is created through the library; its
 * version item is cloned with new ids, spread over the states below, and written with batchPut
 * (5,000 per transaction); the counters get the clones' counts (StateRecount) as the transitions
 * would have added them. Only version items are cloned (no HEADs, audit or content): neither the count
 * nor the listing reads anything else. `ALP_BENCH_STATES_SIZES=100000,1000000` (default) chooses the
 * sizes; `ALP_BENCH_STATES_CACHE=1` keeps each built installation under the bench directory
 * (alp-bench-states-cache/) and reuses it in later runs (nothing here writes to it; opening it
 * migrates its schema like any installation's).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FsContentStore } from '../src/content/fs/fs-content-store.ts';
import { ManualClock } from '../src/core/clock.ts';
import { newId } from '../src/core/ids.ts';
import { createdGsiSk, indexShard, stateGsiPk } from '../src/core/keys.ts';
import { createArtifact, listArtifacts } from '../src/lifecycle/artifacts.ts';
import type { VersionItem } from '../src/lifecycle/model.ts';
import { countByIndex, countVersionsByState } from '../src/lifecycle/queries.ts';
import { COUNTER_SUBSHARDS, StateRecount, stateCountOp } from '../src/lifecycle/state-counts.ts';
import type { VersionState } from '../src/lifecycle/state-machine.ts';
import { createContext, type ServiceContext } from '../src/runtime/context.ts';
import type { Item, ItemStore } from '../src/store/item-store.ts';
import { SqliteItemStore } from '../src/store/sqlite/sqlite-item-store.ts';
import { initInstallation } from '../src/system/installation.ts';
import { type Layout, parseLayout } from '../src/system/layout.ts';
import { benchDir, fmt, goal, header, row, timed } from './util.ts';

const agent = { id: 'bench', kind: 'agent' as const };
const BATCH = 5000;
/** Shares of the versions per state (of 100): most versions of a long-lived installation are settled. */
const SPREAD: Array<[VersionState, number]> = [
  ['DRAFT', 15],
  ['PROPOSED', 5],
  ['APPROVED', 3],
  ['EXECUTING', 1],
  ['EXECUTED', 40],
  ['FAILED', 6],
  ['REJECTED', 5],
  ['SUPERSEDED', 20],
  ['COMPENSATED', 2],
  ['ARCHIVED', 3],
];
const LISTED: VersionState = 'EXECUTED';
/** The installation the listing is measured beside (its pages cost the same work, size apart). */
const REFERENCE_VERSIONS = 10_000;
const GOAL_VERSIONS = 1_000_000;

function stateOf(i: number): VersionState {
  let k = i % 100;
  for (const [s, share] of SPREAD) {
    if (k < share) return s;
    k -= share;
  }
  return 'DRAFT';
}

async function openInstallation(dir: string, clock: ManualClock, layout?: Layout): Promise<ServiceContext> {
  const items = new SqliteItemStore(path.join(dir, 'alp.db'), { synchronous: 'NORMAL' });
  const content = await FsContentStore.open(path.join(dir, 'content'));
  return createContext({ items, content, clock, ...(layout ? { layout } : {}) });
}

/** Builds `versions` versions into dir (see the header); the context stays open. */
export async function build(dir: string, versions: number, layout?: Layout): Promise<{ ctx: ServiceContext; ms: number }> {
  const started = Date.now();
  const clock = new ManualClock('2026-01-01T00:00:00Z');
  const ctx = await openInstallation(dir, clock, layout);
  const items = ctx.items;
  await initInstallation(ctx);
  const { version } = await createArtifact(ctx, agent, { name: 'template', filename: 'f.txt', body: [Buffer.from('template')] });
  const template = JSON.stringify(version);
  const clones = new StateRecount();
  const shards = ctx.layout.index_shards;
  let pending: Item[] = [];
  for (let i = 1; i < versions; i++) {
    clock.advance(1);
    const id = newId(clock);
    const state = stateOf(i);
    const at = clock.now().toISOString();
    const v = JSON.parse(template.replaceAll(version.artifact_id, id)) as VersionItem;
    Object.assign(v, { state, GSI1PK: stateGsiPk(state, indexShard(id, shards)), GSI1SK: createdGsiSk(at, id), created_at: at });
    pending.push(v);
    if (pending.length >= BATCH) {
      clones.add(pending);
      await items.batchPut(pending);
      pending = [];
    }
  }
  clones.add(pending);
  if (pending.length) await items.batchPut(pending);
  // The template's own count is on its counter already (createArtifact): the clones' counts are added.
  for (const [shard, counts] of clones.byShard) await items.transactWrite([stateCountOp(shard, counts)]);
  return { ctx, ms: Date.now() - started };
}

/** A built installation: reused from the cache when ALP_BENCH_STATES_CACHE=1 and one was built, else built. */
async function installation(versions: number): Promise<{ ctx: ServiceContext; note: string; done: () => void }> {
  if (process.env.ALP_BENCH_STATES_CACHE !== '1') {
    const dir = benchDir('states');
    const { ctx, ms } = await build(dir, versions);
    return {
      ctx,
      note: `built ${fmt(versions)} versions directly in ${fmt(ms / 1000, 1)} s`,
      done: () => fs.rmSync(dir, { recursive: true, force: true }),
    };
  }
  const base = path.join(process.env.ALP_BENCH_DIR ?? os.tmpdir(), 'alp-bench-states-cache');
  const dir = path.join(base, `v${versions}`);
  const marker = path.join(dir, 'built.json');
  if (fs.existsSync(marker)) {
    const ctx = await openInstallation(dir, new ManualClock('2026-06-01T00:00:00Z'));
    return { ctx, note: `reused ${fmt(versions)} versions from ${dir} (${fs.readFileSync(marker, 'utf8').trim()})`, done: () => {} };
  }
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const { ctx, ms } = await build(dir, versions);
  fs.writeFileSync(marker, JSON.stringify({ versions, build_ms: ms }));
  return { ctx, note: `built ${fmt(versions)} versions directly in ${fmt(ms / 1000, 1)} s, kept in ${dir}`, done: () => {} };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const median = (xs: number[]) => percentile(sorted(xs), 50);
const p99 = (xs: number[]) => percentile(sorted(xs), 99);

async function benchCounts(ctx: ServiceContext, versions: number, rounds: number): Promise<void> {
  const fast: number[] = [];
  const slow: number[] = [];
  let counted = await countVersionsByState(ctx);
  let paged = await countByIndex(ctx);
  for (let r = 0; r < rounds; r++) {
    const a = await timed(() => countVersionsByState(ctx));
    fast.push(a.ms);
    counted = a.value;
    if (r < 3) {
      const b = await timed(() => countByIndex(ctx));
      slow.push(b.ms);
      paged = b.value;
    }
  }
  const m = median(fast);
  const ref = median(slow);
  // The reference is capped per state (queries.ts MAX_COUNTED_PER_STATE): only the counters must be exact.
  const exact = counted.exact && counted.total === versions;
  row(
    `counts per state, counters, ${fmt(versions)} versions`,
    `${fmt(m, 3)} ms`,
    `p99 ${fmt(p99(fast), 3)} ms; exact ${counted.exact}, total ${fmt(counted.total)}`,
  );
  row(
    `  reference: paging the state index`,
    `${fmt(ref, 1)} ms`,
    `exact ${paged.exact}, total ${fmt(paged.total)}; counters ${fmt(ref / m, 0)}× faster`,
  );
  if (versions < GOAL_VERSIONS) return;
  goal({
    workload: `counts per state at ${fmt(versions)} versions (SQLite)`,
    goal: 'exact, <= 10 ms',
    measured: `median ${fmt(m, 3)} ms (p99 ${fmt(p99(fast), 3)} ms, ${rounds} rounds), exact ${counted.exact}, total ${fmt(counted.total)} of ${fmt(versions)}`,
    reference: `paging the state index: median ${fmt(ref, 1)} ms (${fmt(ref / m, 0)}×), total ${fmt(paged.total)}`,
    pass: m <= 10 && exact,
  });
}
/** Each call's wall time and its service time (the process's CPU time: no run-queue wait in it). */
class Timings {
  readonly wall: number[] = [];
  readonly cpu: number[] = [];

  async time<T>(fn: () => Promise<T>): Promise<T> {
    const cpu = process.cpuUsage();
    const { ms, value } = await timed(fn);
    const used = process.cpuUsage(cpu);
    this.wall.push(ms);
    this.cpu.push((used.user + used.system) / 1000);
    return value;
  }
}

/** One installation's listing: the first page, the next page by cursor (from the start again at the end), the store's query. */
class Listing {
  readonly first = new Timings();
  readonly next = new Timings();
  readonly store = new Timings();
  private cursor: string | undefined;
  constructor(private readonly ctx: ServiceContext) {}

  async round(): Promise<void> {
    const { ctx } = this;
    await this.first.time(() => listArtifacts(ctx, { state: LISTED, limit: 100 }));
    await this.store.time(() => ctx.items.query({ index: 'GSI1', pk: stateGsiPk(LISTED), descending: true, limit: 100 }));
    const page = await this.next.time(() => listArtifacts(ctx, { state: LISTED, limit: 100, cursor: this.cursor }));
    this.cursor = page.cursor;
  }
}

/**
 * Pages of 100 of one state through listArtifacts (what the API serves): the first page and the next
 * page by cursor, and the store's own GSI1 query of the first page; each beside the same call on the
 * reference installation, rounds interleaved.
 */
async function benchList(ctx: ServiceContext, reference: ServiceContext, versions: number, pages: number): Promise<void> {
  const big = new Listing(ctx);
  const small = new Listing(reference);
  for (let r = 0; r < pages; r++) {
    await big.round();
    await small.round();
  }
  const share = SPREAD.find(([x]) => x === LISTED)?.[1];
  for (const [label, t, ref] of [
    ['first page', big.first, small.first],
    ['next page (cursor)', big.next, small.next],
    ['  the store GSI1 query alone', big.store, small.store],
  ] as const) {
    row(
      `list ${LISTED} (${share} %), 100/page, ${label}`,
      `p50 ${fmt(median(t.wall), 2)} ms`,
      `p99 ${fmt(p99(t.wall), 2)} ms wall, service p99 ${fmt(p99(t.cpu), 2)} ms; ${fmt(REFERENCE_VERSIONS)} versions: p50 ${fmt(median(ref.wall), 2)}, p99 ${fmt(p99(ref.wall), 2)} ms (${pages} pages)`,
    );
  }
  if (versions < GOAL_VERSIONS) return;
  const worst = Math.max(p99(big.first.wall), p99(big.next.wall));
  const refWorst = Math.max(p99(small.first.wall), p99(small.next.wall));
  goal({
    workload: `list by state, page of 100 at ${fmt(versions)} versions (SQLite)`,
    goal: 'p99 <= 2 ms',
    measured: `p99 first page ${fmt(p99(big.first.wall), 2)} ms, next page ${fmt(p99(big.next.wall), 2)} ms wall (service time p99 ${fmt(p99(big.first.cpu), 2)} / ${fmt(p99(big.next.cpu), 2)} ms CPU; p50 ${fmt(median(big.first.wall), 2)} / ${fmt(median(big.next.wall), 2)} ms; ${pages} pages each)`,
    reference: `the same pages at ${fmt(REFERENCE_VERSIONS)} versions, rounds interleaved: p99 ${fmt(p99(small.first.wall), 2)} / ${fmt(p99(small.next.wall), 2)} ms wall (${fmt(worst / refWorst, 2)}×)`,
    pass: worst <= 2,
  });
}

export async function benchStates(opts: { sizes?: number[]; rounds?: number; pages?: number } = {}): Promise<void> {
  const sizes = opts.sizes ?? [100_000, 1_000_000];
  header('states: counts per state and the list-by-state page (SQLite, embedded layout)');
  const reference = await installation(REFERENCE_VERSIONS);
  console.log(`  reference: ${reference.note}`);
  try {
    for (const versions of sizes) {
      const inst = await installation(versions);
      console.log(`  ${inst.note}`);
      try {
        await benchCounts(inst.ctx, versions, opts.rounds ?? 30);
        await benchList(inst.ctx, reference.ctx, versions, opts.pages ?? 300);
      } finally {
        await inst.ctx.items.close();
        inst.done();
      }
    }
  } finally {
    await reference.ctx.items.close();
    reference.done();
  }
  await benchReads([1_000, 20_000]);
}

/**
 * What a count costs in store reads, independent of the engine: with the distributed default's 64
 * index shards, the items and calls each count path reads at two sizes (a counting view of the store).
 * On DynamoDB the counter path is this one batchGet (257 keys: 3 requests of ≤ 100), at any size.
 */
async function benchReads(sizes: number[]): Promise<void> {
  const layout = parseLayout('index=64,telemetry=64,fence=64');
  const counters: Array<{ versions: number; calls: number; items: number }> = [];
  const paging: Array<{ versions: number; calls: number; items: number }> = [];
  for (const versions of sizes) {
    const dir = benchDir('states-reads');
    const { ctx } = await build(dir, versions, layout);
    try {
      const tally = { calls: 0, items: 0 };
      const counting = Object.create(ctx.items) as ItemStore;
      counting.batchGet = async (keys, o) => {
        tally.calls++;
        const found = await ctx.items.batchGet(keys, o);
        tally.items += found.length;
        return found;
      };
      counting.query = async (q) => {
        tally.calls++;
        const page = await ctx.items.query(q);
        tally.items += page.items.length;
        return page;
      };
      const view = { ...ctx, items: counting };
      for (const [label, run, into] of [
        ['counters', () => countVersionsByState(view), counters],
        ['  reference: paging the index', () => countByIndex(view), paging],
      ] as const) {
        tally.calls = 0;
        tally.items = 0;
        await run();
        into.push({ versions, ...tally });
        row(
          `reads per count, index_shards 64, ${fmt(versions)} versions, ${label}`,
          `${fmt(tally.calls)} calls`,
          `${fmt(tally.items)} items read`,
        );
      }
    } finally {
      await ctx.items.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  const show = (xs: typeof counters) => xs.map((x) => `${fmt(x.calls)} call(s), ${fmt(x.items)} items at ${fmt(x.versions)}`).join('; ');
  // The counter path reads the counter keys of the layout (+ the installation record): at most that many, at any size.
  const keys = 64 * COUNTER_SUBSHARDS + 1;
  goal({
    workload: 'counts per state, store reads per count (64 index shards, the distributed layout)',
    goal: 'cost independent of installation size on DynamoDB',
    measured: `${show(counters)} versions (one batchGet of ${keys} keys)`,
    reference: `paging the state index: ${show(paging)} versions`,
    pass: counters.every((c) => c.calls === counters[0]?.calls && c.items <= keys),
  });
}
