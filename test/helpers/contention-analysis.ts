/**
 * What the contention test asserts and the scale bench projects, computed from ContentionStore traces
 * (test/helpers/contention-store.ts). TEST AND BENCH ONLY.
 *
 * Rules (issue 16, "Deliver" 1):
 * (a) a writable item (put/update/delete), a condition-checked item (a ConditionCheck is billed as a
 *     transactional write and makes concurrent transactions on the item conflict) or a base-table
 *     partition written by operations on different artifacts must carry a shard suffix of the layout;
 *     for those, and for every GSI1 partition key written, at most c/N of the operations of one kind may
 *     touch one key (N: the component's shard count);
 * (b) no item or base partition read strongly by operations on different artifacts more often than
 *     c/N of the operations of a kind (a global pre-read), N as in (a), and N = index_shards for a key
 *     without a shard suffix.
 * A node's own process lease (`INSTANCE#{id}` / LEASE, lifecycle/instance.ts) is written by whichever
 * upload finds it older than half its life: at most once a minute per node, whatever the operation
 * rate. It is held to the spread bound of (a) with N = index_shards instead of needing a suffix: written
 * by every reservation (as it once was) it fails; as a heartbeat it passes.
 * c: the shard of an operation is a hash of its artifact (or aggregate), so the touches of one shard
 * are Binomial(n, 1/N). With the workload's n ≥ 40 operations per kind and N = 8, c = 3 puts the bound
 * at ≥ 4.8 standard deviations above the mean (mean n/8, sd √(n·7/64)): a uniform spread fails it with
 * probability of about 1e-5 per key (1.1e-5 for n = 40: exact tail in test/system/contention.test.ts), while an unsharded key
 * touched by every operation of its kind (share 1 > 3/8) always fails it.
 * (c) a key a node answers from a time-bounded cache (the bearer token, lifecycle/token-cache.ts) is
 *     read because time passed, not because of the operation's kind: which operations happen to miss
 *     depends on how concurrent walkers interleave their clock advances. Such keys are held to the
 *     cache's own rule instead of (b): at most ⌊clock span ÷ TTL⌋ + 1 strong reads of each over the run
 *     (concurrent misses share one read). With the cache off or without the single flight, every
 *     request, or every concurrent miss, reads: over the bound.
 */
import type { Layout } from '../../src/system/layout.ts';
import type { Access, OperationTrace } from './contention-store.ts';

export const DEFAULT_C = 3;

export interface Offender {
  rule: 'shared-write' | 'spread-write' | 'gsi-spread' | 'global-read' | 'cache-bound';
  table: 'base' | 'GSI1';
  /** Item `PK|SK`, or a partition key (prefixed `partition:` for base partitions). */
  key: string;
  kind?: string;
  artifacts: number;
  touches?: number;
  ops?: number;
  bound?: number;
}

/** The component a key belongs to, for its shard count. */
export function componentShards(key: string, layout: Layout): number {
  if (/TELQ|telemetry/i.test(key)) return layout.telemetry_shards;
  if (/fence/i.test(key)) return layout.fence_shards;
  return layout.index_shards;
}

/** Whether the PK or SK of `key` (`PK|SK` or a partition key) ends with a shard suffix of its component. */
export function hasShardSuffix(key: string, layout: Layout): boolean {
  const n = componentShards(key, layout);
  if (n <= 1) return false;
  const width = String(n - 1).length;
  const re = new RegExp(`#(\\d{${width}})$`);
  return key.split('|').some((part) => {
    const m = re.exec(part);
    return m !== null && Number(m[1]) < n;
  });
}

interface Touch {
  artifacts: Set<string>;
  /** op kind → operations of the kind that touched the key (each operation once). */
  byKind: Map<string, Set<OperationTrace>>;
}

/** key → who touched it, for the accesses `pick` selects (a key per access: item, or its partition). */
export function touches(traces: OperationTrace[], pick: (a: Access) => string | undefined): Map<string, Touch> {
  const out = new Map<string, Touch>();
  for (const t of traces)
    for (const a of t.accesses) {
      const key = pick(a);
      if (key === undefined) continue;
      let e = out.get(key);
      if (!e) out.set(key, (e = { artifacts: new Set(), byKind: new Map() }));
      if (t.artifact) e.artifacts.add(t.artifact);
      let ops = e.byKind.get(t.kind);
      if (!ops) e.byKind.set(t.kind, (ops = new Set()));
      ops.add(t);
    }
  return out;
}

export function opsPerKind(traces: OperationTrace[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const t of traces) m.set(t.kind, (m.get(t.kind) ?? 0) + 1);
  return m;
}

function spread(
  rule: Offender['rule'],
  table: Offender['table'],
  key: string,
  e: Touch,
  kinds: Map<string, number>,
  n: number,
  c: number,
): Offender[] {
  const out: Offender[] = [];
  for (const [kind, ops] of e.byKind) {
    const total = kinds.get(kind) ?? 0;
    const bound = (c * total) / n;
    if (ops.size > bound) out.push({ rule, table, key, kind, artifacts: e.artifacts.size, touches: ops.size, ops: total, bound });
  }
  return out;
}

/** A process lease item or partition (`INSTANCE#{id}`): a per-node heartbeat (see the rules above). */
const isNodeLease = (key: string) => key.startsWith('INSTANCE#');

const isWrite = (a: Access) => a.mode === 'write' || a.mode === 'check';

/** Rule (a): shared writable items and base partitions, and the spread of sharded and GSI1 keys. */
export function writeOffenders(traces: OperationTrace[], layout: Layout, c = DEFAULT_C): Offender[] {
  const kinds = opsPerKind(traces);
  const out: Offender[] = [];
  const base = [
    touches(traces, (a) => (a.table === 'base' && isWrite(a) ? a.key : undefined)),
    touches(traces, (a) => (a.table === 'base' && isWrite(a) ? `partition:${a.pk}` : undefined)),
  ];
  for (const map of base)
    for (const [key, e] of map) {
      if (e.artifacts.size < 2) continue;
      const bare = key.replace(/^partition:/, '');
      if (isNodeLease(bare)) out.push(...spread('spread-write', 'base', key, e, kinds, layout.index_shards, c));
      else if (!hasShardSuffix(bare, layout)) out.push({ rule: 'shared-write', table: 'base', key, artifacts: e.artifacts.size });
      else out.push(...spread('spread-write', 'base', key, e, kinds, componentShards(bare, layout), c));
    }
  for (const [key, e] of touches(traces, (a) => (a.table === 'GSI1' && a.mode === 'write' ? a.pk : undefined)))
    out.push(...spread('gsi-spread', 'GSI1', key, e, kinds, layout.index_shards, c));
  return out;
}

/** Rule (c): the items (by PK prefix) a node caches for `ttlMs` of clock time, and the span the workload took. */
export interface CachedReads {
  pkPrefix: string;
  ttlMs: number;
  spanMs: number;
}

/** The strong reads of one cached item rule (c) allows over `spanMs`. */
export function cachedReadBound(rule: CachedReads): number {
  return Math.floor(rule.spanMs / rule.ttlMs) + 1;
}

/** Rule (c): every strong read of a cached item, whatever the operation, counts against the cache's bound. */
export function cachedReadOffenders(traces: OperationTrace[], rule: CachedReads): Offender[] {
  const reads = new Map<string, { n: number; artifacts: Set<string> }>();
  for (const t of traces)
    for (const a of t.accesses) {
      if (!(a.mode === 'read' && a.table === 'base' && a.consistent && a.op === 'get' && a.pk.startsWith(rule.pkPrefix))) continue;
      let e = reads.get(a.key);
      if (!e) reads.set(a.key, (e = { n: 0, artifacts: new Set() }));
      e.n += 1;
      if (t.artifact) e.artifacts.add(t.artifact);
    }
  const bound = cachedReadBound(rule);
  return [...reads]
    .filter(([, e]) => e.n > bound)
    .map(([key, e]) => ({ rule: 'cache-bound' as const, table: 'base' as const, key, artifacts: e.artifacts.size, touches: e.n, bound }));
}

/**
 * Rule (b): strong reads of one item or base partition by a large share of the operations of a kind;
 * the items `cached` names (a node cache's rule each) are held to rule (c) instead.
 */
export function readOffenders(
  traces: OperationTrace[],
  layout: Layout,
  c = DEFAULT_C,
  cached: CachedReads | CachedReads[] = [],
): Offender[] {
  const kinds = opsPerKind(traces);
  const rules = Array.isArray(cached) ? cached : [cached];
  const out: Offender[] = rules.flatMap((rule) => cachedReadOffenders(traces, rule));
  const strong = (a: Access) => a.mode === 'read' && a.table === 'base' && a.consistent;
  const isCached = (a: Access) => a.op === 'get' && rules.some((rule) => a.pk.startsWith(rule.pkPrefix));
  const maps = [
    touches(traces, (a) => (strong(a) && a.op === 'get' && !isCached(a) ? a.key : undefined)),
    touches(traces, (a) => (strong(a) && a.op === 'query' ? `partition:${a.pk}` : undefined)),
  ];
  for (const map of maps)
    for (const [key, e] of map) {
      // Installation-wide operations (listings) have no artifact: a key they read strongly is shared too.
      const global = [...e.byKind.values()].some((ops) => [...ops].some((t) => !t.artifact));
      if (e.artifacts.size < 2 && !global) continue;
      const bare = key.replace(/^partition:/, '');
      const n = hasShardSuffix(bare, layout) ? componentShards(bare, layout) : layout.index_shards;
      out.push(...spread('global-read', 'base', key, e, kinds, n, c));
    }
  return out;
}

export function describe(o: Offender): string {
  const who = `${o.artifacts} artifacts`;
  if (o.rule === 'shared-write') return `${o.table} ${o.key}: written or condition-checked by operations on ${who}, no shard suffix`;
  if (o.rule === 'cache-bound')
    return `${o.table} ${o.key}: ${o.touches} strong reads over the run, the cache allows ${o.bound} (${who}) [cache-bound]`;
  return `${o.table} ${o.key}: ${o.touches} of ${o.ops} '${o.kind}' operations (bound ${o.bound?.toFixed(1)}, ${who}) [${o.rule}]`;
}
