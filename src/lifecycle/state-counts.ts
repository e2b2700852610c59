/**
 * Exact counts of versions per state (issue 18 item 5; docs/design.md "Counts per state"). Every
 * state change of a version adds −1 to its old state and +1 to its new one on a counter item, in the
 * transaction of the change (planMove, versionCreationOps); creation adds +1 to DRAFT. The counters
 * are sharded finer than the index (`COUNTS{s}{k} / STATES`: s the version's index shard suffix, k one
 * of COUNTER_SUBSHARDS by a hash of the version), so each item takes a quarter of the changes of its
 * artifacts' shard, and a read sums all of them with one batchGet: a cost set by the layout, not by
 * how many versions there are.
 *
 * An installation created before the counters has versions no counter saw: its counts are exact only
 * once `backfillStateCounts` has recounted them under the maintenance fence and marked the
 * installation record (`state_counts: 'exact'`, system/installation.ts). Until then readers fall back
 * to paging the state index (queries.ts countVersionsByState).
 */
import { STATE_COUNTS_SK, stateCountsPk, versionIndexShard } from '../core/keys.ts';
import { allShards, shardOf, shardSuffix } from '../core/shard.ts';
import type { Item, ItemKey, TransactOp } from '../store/item-store.ts';
import { cond } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { withMaintenance } from '../system/fence.ts';
import { INSTALLATION_KEY, markStateCountsExactOp, stateCountsExact } from '../system/installation.ts';
import type { VersionItem } from './model.ts';
import { VERSION_STATES, type VersionState } from './state-machine.ts';

const STATE_COUNTS_PK = stateCountsPk();
/** The type of every counter item (what sums and checks recognise them by). */
export const STATE_COUNTS_TYPE = 'state_counts';

export type StateDelta = Partial<Record<VersionState, number>>;

/**
 * Counter items per index shard when the index is sharded (the embedded layout has one item): at the
 * goal load a shard's ~390 state changes/s would put one item near DynamoDB's 1,000 write units/s
 * (a transactional write costs 2); four items take ~100 each (docs/design.md §9).
 */
export const COUNTER_SUBSHARDS = 4;

const subSuffix = (indexSuffix: string, k: number) => `${indexSuffix}#${String(k).padStart(indexSuffix.length - 1, '0')}`;

/**
 * The suffix of the counter item a version is counted on, for all its life: '' unsharded, else its
 * index shard suffix (keys.ts versionIndexShard) and a sub-shard of the same width from a hash of the
 * version's key. Written as the index suffix is, so it needs no layout.
 */
export function counterShardOf(v: Pick<VersionItem, 'artifact_id' | 'version' | 'state' | 'GSI1PK'>): string {
  const s = versionIndexShard(v);
  return s === '' ? '' : subSuffix(s, shardOf(`${v.artifact_id}#${v.version}`, COUNTER_SUBSHARDS));
}

/** The counter item of one counter suffix (counterShardOf). */
export const stateCountsKey = (shard: string): ItemKey => ({ PK: stateCountsPk(shard), SK: STATE_COUNTS_SK });

/** Every counter item of a layout with `indexShards` index shards. */
export function allStateCountKeys(indexShards: number): ItemKey[] {
  if (indexShards === 1) return [stateCountsKey('')];
  return allShards(indexShards).flatMap((s) =>
    allShards(COUNTER_SUBSHARDS).map((k) => stateCountsKey(subSuffix(shardSuffix(s, indexShards), k))),
  );
}

const isCountOp = (op: TransactOp): op is Extract<TransactOp, { op: 'update' }> =>
  op.op === 'update' && op.key.SK === STATE_COUNTS_SK && op.key.PK.startsWith(STATE_COUNTS_PK) && op.condition === undefined;

/** The blind add that records `delta` on the counter item of `shard` (no condition: it never conflicts on purpose). */
export function stateCountOp(shard: string, delta: StateDelta): TransactOp {
  return {
    op: 'update',
    key: stateCountsKey(shard),
    update: { set: { type: STATE_COUNTS_TYPE }, add: { ...delta } as Record<string, number> },
  };
}

/** The counter op of one version moving `from` → `to` (on the counter it was created on). */
export function moveCountOp(v: VersionItem, to: VersionState): TransactOp {
  return stateCountOp(counterShardOf(v), { [v.state]: -1, [to]: 1 });
}

/** The writes that create a version: the version item (never overwriting one) and its count in its first state. */
export function versionCreationOps(v: VersionItem): TransactOp[] {
  return [{ op: 'put', item: v, condition: cond.notExists() }, stateCountOp(counterShardOf(v), { [v.state]: 1 })];
}

/**
 * The ops with every counter op of one item folded into one (a transaction touches an item once),
 * in place of the first; deltas that cancel out are dropped, and so is an op left with none.
 */
export function combineCountOps(ops: readonly TransactOp[]): TransactOp[] {
  const out: TransactOp[] = [];
  const byKey = new Map<string, Record<string, number>>();
  for (const op of ops) {
    if (!isCountOp(op)) {
      out.push(op);
      continue;
    }
    const id = `${op.key.PK}\u0000${op.key.SK}`;
    let add = byKey.get(id);
    if (!add) {
      add = {};
      byKey.set(id, add);
      out.push({ ...op, update: { set: { type: STATE_COUNTS_TYPE }, add } });
    }
    for (const [state, d] of Object.entries(op.update.add ?? {})) add[state] = (add[state] ?? 0) + d;
  }
  for (const add of byKey.values()) for (const [state, d] of Object.entries(add)) if (d === 0) delete add[state];
  return out.filter((op) => !isCountOp(op) || Object.keys(op.update.add ?? {}).length > 0);
}

export interface StateCounts {
  states: Record<VersionState, number>;
  total: number;
}

function emptyCounts(): Record<VersionState, number> {
  return Object.fromEntries(VERSION_STATES.map((s) => [s, 0])) as Record<VersionState, number>;
}

/** The counts one counter item holds (absent states: 0). */
function countsOf(item: Item | undefined): Record<VersionState, number> {
  const counts = emptyCounts();
  for (const s of VERSION_STATES) counts[s] = typeof item?.[s] === 'number' ? (item[s] as number) : 0;
  return counts;
}

/** The counter items among `items` (by their type: anything else a read returned is skipped), summed. */
function sumCounters(items: readonly Item[]): StateCounts {
  const states = emptyCounts();
  for (const item of items) {
    if (item.type !== STATE_COUNTS_TYPE) continue;
    const counts = countsOf(item);
    for (const s of VERSION_STATES) states[s] += counts[s];
  }
  return { states, total: Object.values(states).reduce((a, b) => a + b, 0) };
}

/**
 * The counters summed over every shard, with whether they are exact (the installation record says
 * the backfill ran, or the installation was created with counters). One batchGet of N + 1 items.
 */
export async function readStateCounts(ctx: ServiceContext): Promise<StateCounts & { exact: boolean }> {
  const items = await ctx.items.batchGet([{ ...INSTALLATION_KEY }, ...allStateCountKeys(ctx.layout.index_shards)]);
  const record = items.find((i) => i.PK === INSTALLATION_KEY.PK && i.SK === INSTALLATION_KEY.SK);
  return { ...sumCounters(items), exact: stateCountsExact(record) };
}

/** Versions counted by state and by counter suffix, fed the pages of a scan of the base table. */
export class StateRecount {
  readonly byShard = new Map<string, Record<VersionState, number>>();

  add(items: readonly Item[]): void {
    for (const item of items) {
      if (item.type !== 'version') continue;
      const v = item as VersionItem;
      const shard = counterShardOf(v);
      let counts = this.byShard.get(shard);
      if (!counts) this.byShard.set(shard, (counts = emptyCounts()));
      counts[v.state] += 1;
    }
  }
}

/** Every version counted by state and by counter suffix, from a scan of the base table (consistent). */
export async function recountStates(ctx: Pick<ServiceContext, 'items'>): Promise<Map<string, Record<VersionState, number>>> {
  const recount = new StateRecount();
  let cursor: string | undefined;
  do {
    const page = await ctx.items.scan(cursor ? { cursor } : {});
    recount.add(page.items);
    cursor = page.cursor;
  } while (cursor);
  return recount.byShard;
}

export interface StateCountCheck {
  /**
   * `checked`: the counters were compared with the recount; `not_exact`: the installation's counters
   * were never backfilled (they cannot equal a recount: nothing to judge); `busy`: a counter changed
   * while the versions were recounted (a state change committed meanwhile), run it again when quieter.
   */
  status: 'checked' | 'not_exact' | 'busy';
  exact: boolean;
  /** Counter shards whose counts differ from a recount: shard suffix, state, counted, recounted. */
  mismatches: Array<{ shard: string; state: VersionState; counter: number; recount: number }>;
}

/** The counters of the layout's shards as read before a recount (compareStateCounts). */
export interface CounterReading {
  exact: boolean;
  counts: Map<string, Record<VersionState, number>>;
}

const shardOfKey = (key: ItemKey) => key.PK.slice(STATE_COUNTS_PK.length);

/** The counts of each of `shards` among `items` (a shard without a counter item: all 0). */
function countsByShard(items: readonly Item[], shards: readonly string[]): Map<string, Record<VersionState, number>> {
  const byPk = new Map(items.filter((i) => i.type === STATE_COUNTS_TYPE).map((i) => [i.PK, i]));
  return new Map(shards.map((s) => [s, countsOf(byPk.get(stateCountsPk(s)))]));
}

/** Reads every counter of the layout, and whether they are exact (one batchGet): the "before" of a check. */
export async function readCounterReading(ctx: ServiceContext): Promise<CounterReading> {
  const keys = allStateCountKeys(ctx.layout.index_shards);
  const items = await ctx.items.batchGet([{ ...INSTALLATION_KEY }, ...keys], { consistent: true });
  const record = items.find((i) => i.PK === INSTALLATION_KEY.PK && i.SK === INSTALLATION_KEY.SK);
  return { exact: stateCountsExact(record), counts: countsByShard(items, keys.map(shardOfKey)) };
}

const sameCounts = (a: Record<VersionState, number> | undefined, b: Record<VersionState, number> | undefined) =>
  VERSION_STATES.every((s) => (a?.[s] ?? 0) === (b?.[s] ?? 0));

/**
 * Compares every counter with a recount taken after `before` was read. The counters are read again:
 * had a state change committed during the recount, its counter would differ from `before` (a change
 * that was undone on the same counter within the recount escapes this: check with writers stopped
 * for a verdict that cannot be a race), and the check is `busy` rather than a mismatch.
 */
export async function compareStateCounts(
  ctx: ServiceContext,
  before: CounterReading,
  recount: ReadonlyMap<string, Record<VersionState, number>>,
): Promise<StateCountCheck> {
  // Every shard of the layout, and any a version names outside it (counted nowhere: a mismatch).
  const shards = [...new Set([...before.counts.keys(), ...recount.keys()])];
  const after = countsByShard(await ctx.items.batchGet(shards.map(stateCountsKey), { consistent: true }), shards);
  const moved = [...before.counts].some(([shard, counts]) => !sameCounts(counts, after.get(shard)));
  const mismatches: StateCountCheck['mismatches'] = [];
  for (const shard of shards) {
    const counted = after.get(shard) ?? emptyCounts();
    const want = recount.get(shard) ?? emptyCounts();
    for (const state of VERSION_STATES) {
      if (counted[state] !== want[state]) mismatches.push({ shard, state, counter: counted[state], recount: want[state] });
    }
  }
  const status = !before.exact ? 'not_exact' : moved ? 'busy' : 'checked';
  return { status, exact: before.exact, mismatches };
}

/** Compares every counter with a recount of the versions (reconcile runs it beside its own scan). */
export async function checkStateCounts(ctx: ServiceContext): Promise<StateCountCheck> {
  const before = await readCounterReading(ctx);
  return compareStateCounts(ctx, before, await recountStates(ctx));
}

/** Counter items written per maintenance transaction (the rest of the 100 is the fence's checks). */
const BACKFILL_CHUNK = 90;

/**
 * Makes the counters exact on an installation that has versions they never saw: under the
 * maintenance fence (no state change can commit meanwhile) it recounts every version from the base
 * table, overwrites every counter item with the recount (a put: whatever deltas were added before
 * are replaced) and, last, marks the installation record. Idempotent: a crash anywhere leaves the
 * mark unset (readers keep paging the index) and a rerun recounts from scratch.
 */
export async function backfillStateCounts(ctx: ServiceContext, epoch: number, owner: string): Promise<StateCounts> {
  return withMaintenance(
    ctx,
    epoch,
    owner,
    async (m) => {
      const recount = await recountStates(ctx);
      const puts: TransactOp[] = allStateCountKeys(ctx.layout.index_shards).map((key) => ({
        op: 'put',
        item: { ...key, type: STATE_COUNTS_TYPE, ...(recount.get(shardOfKey(key)) ?? emptyCounts()) },
      }));
      for (let i = 0; i < puts.length; i += BACKFILL_CHUNK) await m.commit(puts.slice(i, i + BACKFILL_CHUNK));
      await m.commit([markStateCountsExactOp()]);
      return sumCounters(puts.map((p) => (p as { item: Item }).item));
    },
    { purpose: 'state counts backfill' },
  );
}
