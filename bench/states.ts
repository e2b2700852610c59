/**
 * `npm run bench states` (issue 18 item 5): counts per state and the list-by-state page of 100 at
 * 100,000 and 1,000,000 versions on SQLite, with the count before counters (paging the state index,
 * queries.ts countByIndex) as the reference measured in the same run, rounds interleaved.
 *
 * Direct build (as bench/retention-build.ts): one artifact is created through the library; its
 * version item is cloned with new ids, spread over the states below, and written with batchPut
 * (5,000 per transaction); the counter items are written with the totals the transitions would have
 * added. Only version items are cloned (no HEADs, audit or content): neither the count nor the
 * listing reads anything else. `ALP_BENCH_STATES_SIZES=100000,1000000` (default) chooses the sizes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { FsContentStore } from '../src/content/fs/fs-content-store.ts';
import { ManualClock } from '../src/core/clock.ts';
import { newId } from '../src/core/ids.ts';
import { createdGsiSk, indexShard, stateGsiPk } from '../src/core/keys.ts';
import { createArtifact, listArtifacts } from '../src/lifecycle/artifacts.ts';
import type { VersionItem } from '../src/lifecycle/model.ts';
import { countByIndex, countVersionsByState } from '../src/lifecycle/queries.ts';
import { counterShardOf, stateCountsKey } from '../src/lifecycle/state-counts.ts';
import type { VersionState } from '../src/lifecycle/state-machine.ts';
import { createContext, type ServiceContext } from '../src/runtime/context.ts';
import type { Item, ItemStore } from '../src/store/item-store.ts';
import { SqliteItemStore } from '../src/store/sqlite/sqlite-item-store.ts';
import { initInstallation } from '../src/system/installation.ts';
import { type Layout, parseLayout } from '../src/system/layout.ts';
import { benchDir, fmt, header, row, timed } from './util.ts';

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

function stateOf(i: number): VersionState {
  let k = i % 100;
  for (const [s, share] of SPREAD) {
    if (k < share) return s;
    k -= share;
  }
  return 'DRAFT';
}

async function build(dir: string, versions: number, layout?: Layout): Promise<{ ctx: ServiceContext; ms: number }> {
  const started = Date.now();
  const items = new SqliteItemStore(path.join(dir, 'alp.db'), { synchronous: 'NORMAL' });
  const content = await FsContentStore.open(path.join(dir, 'content'));
  const clock = new ManualClock('2026-01-01T00:00:00Z');
  const ctx = createContext({ items, content, clock, ...(layout ? { layout } : {}) });
  await initInstallation(ctx);
  const { version } = await createArtifact(ctx, agent, { name: 'template', filename: 'f.txt', body: [Buffer.from('template')] });
  const template = JSON.stringify(version);
  const counts = new Map<string, Record<string, number>>();
  const shards = ctx.layout.index_shards;
  let pending: Item[] = [];
  for (let i = 1; i < versions; i++) {
    clock.advance(1);
    const id = newId(clock);
    const state = stateOf(i);
    const at = clock.now().toISOString();
    const v = JSON.parse(template.replaceAll(version.artifact_id, id)) as VersionItem;
    Object.assign(v, { state, GSI1PK: stateGsiPk(state, indexShard(id, shards)), GSI1SK: createdGsiSk(at, id), created_at: at });
    const c = counts.get(counterShardOf(v)) ?? {};
    c[state] = (c[state] ?? 0) + 1;
    counts.set(counterShardOf(v), c);
    pending.push(v);
    if (pending.length >= BATCH) {
      await items.batchPut(pending);
      pending = [];
    }
  }
  if (pending.length) await items.batchPut(pending);
  for (const [shard, add] of counts) await items.update(stateCountsKey(shard), { set: { type: 'state_counts' }, add });
  return { ctx, ms: Date.now() - started };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

const median = (xs: number[]) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    50,
  );
const verdict = (ok: boolean) => (ok ? 'PASS' : 'MISS');

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
  const goal = versions >= 1_000_000 ? ` ≤ 10 ms: ${verdict(m <= 10 && counted.exact && counted.total === versions)}` : '';
  row(
    `counts per state, counters, ${fmt(versions)} versions`,
    `${fmt(m, 3)} ms`,
    `exact ${counted.exact}, total ${fmt(counted.total)}${goal}`,
  );
  row(
    `  reference: paging the state index`,
    `${fmt(ref, 1)} ms`,
    `exact ${paged.exact}, total ${fmt(paged.total)}; counters ${fmt(ref / m, 0)}× faster`,
  );
}

/**
 * Pages of 100 of one state, rounds interleaved: the first page and the next page by cursor through
 * listArtifacts (what the API serves), and the store's own GSI1 query of the same first page (the
 * part of the listing that is the engine's: brief A's) as the reference.
 */
async function benchList(ctx: ServiceContext, versions: number, pages: number): Promise<void> {
  const first: number[] = [];
  const next: number[] = [];
  const store: number[] = [];
  const pk = stateGsiPk(LISTED);
  let cursor: string | undefined;
  for (let r = 0; r < pages; r++) {
    first.push((await timed(() => listArtifacts(ctx, { state: LISTED, limit: 100 }))).ms);
    store.push((await timed(() => ctx.items.query({ index: 'GSI1', pk, descending: true, limit: 100 }))).ms);
    const page = await timed(() => listArtifacts(ctx, { state: LISTED, limit: 100, cursor }));
    next.push(page.ms);
    cursor = page.value.cursor;
  }
  const share = SPREAD.find(([x]) => x === LISTED)?.[1];
  for (const [label, xs, goal] of [
    ['first page', first, true],
    ['next page (cursor)', next, true],
    ['  reference: store GSI1 query alone', store, false],
  ] as const) {
    const s = [...xs].sort((a, b) => a - b);
    const p99 = percentile(s, 99);
    const verdictText = goal && versions >= 1_000_000 ? ` p99 ≤ 2 ms: ${verdict(p99 <= 2)}` : '';
    row(
      `list ${LISTED} (${share} %), 100/page, ${label}`,
      `p50 ${fmt(percentile(s, 50), 2)} ms`,
      `p99 ${fmt(p99, 2)} ms, p90 ${fmt(percentile(s, 90), 2)} ms (${s.length} pages)${verdictText}`,
    );
  }
}

export async function benchStates(opts: { sizes?: number[]; rounds?: number; pages?: number } = {}): Promise<void> {
  const sizes = opts.sizes ?? [100_000, 1_000_000];
  header('states: counts per state and the list-by-state page (SQLite, embedded layout)');
  for (const versions of sizes) {
    const dir = benchDir('states');
    const { ctx, ms } = await build(dir, versions);
    console.log(`  built ${fmt(versions)} versions directly in ${fmt(ms / 1000, 1)} s`);
    try {
      await benchCounts(ctx, versions, opts.rounds ?? 30);
      await benchList(ctx, versions, opts.pages ?? 300);
    } finally {
      await ctx.items.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
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
      for (const [label, run] of [
        ['counters', () => countVersionsByState(view)],
        ['  reference: paging the index', () => countByIndex(view)],
      ] as const) {
        tally.calls = 0;
        tally.items = 0;
        await run();
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
}
