/**
 * The scale projection (issue 16): recorded key traces (test/helpers/contention-store.ts) projected to
 * the goal load. A projection from key traces, not a throughput measurement.
 *
 * The trace is one node's, run on the injected clock at the goal's pace per node (goal versions/s ÷
 * nodes), so time-based behaviour (the per-node token cache, leases) is traced as it would run. Per key
 * (an item `PK|SK`, a base partition PK, a GSI1 partition GSI1PK), the recorded units per traced
 * second become units/s at the goal by what the key names:
 * - per-artifact (the key names the artifact, its name or one of its runs, and only operations on that
 *   artifact touch it): units per version of that artifact × the hottest artifact's peak rate;
 * - per-human (an approver's own keys): units per decision of that human × a human's peak decision rate;
 * - per-node (INSTANCE# leases: one node's own items): units per traced second (one node);
 * - sharded (the key carries a shard suffix of the layout): the key's family (the key without its
 *   suffix) at units per traced second × nodes, spread over the N shards by the uniform hash: / N,
 *   plus what the hottest artifact at its peak rate puts on its one shard (mean + hottest artifact);
 * - listings (operations on no artifact) that touch a per-artifact or per-human key add their units
 *   per traced second × nodes (every node's agents list the same newest entries);
 * - shared (anything else): units per traced second × nodes. For work done per operation this is the
 *   share of the trace's versions that touched the key × the goal rate × its units.
 */

import type { Layout } from '../src/system/layout.ts';
import { componentShards, hasShardSuffix } from '../test/helpers/contention-analysis.ts';
import type { Access, OperationTrace } from '../test/helpers/contention-store.ts';

export interface Goal {
  nodes: number;
  versionsPerSecond: number;
  totalVersions: number;
  /** Versions/s of the hottest single artifact (its own items and partition). */
  hottestArtifactVersionsPerSecond: number;
  /** Decisions/s of the busiest human approver. */
  humanDecisionsPerSecond: number;
}

export const GOAL: Goal = {
  nodes: 200,
  versionsPerSecond: 5000,
  totalVersions: 50_000_000,
  hottestArtifactVersionsPerSecond: 10,
  humanDecisionsPerSecond: 1,
};

export const LIMITS = { itemWcu: 1000, itemRcu: 3000, partitionWcu: 1000, partitionRcu: 3000, tableWru: 40_000, tableRru: 40_000 };

export type KeyClass = 'per-artifact' | 'per-human' | 'per-node' | 'sharded' | 'shared';

export interface Projected {
  scope: 'item' | 'base partition' | 'GSI1 partition';
  key: string;
  cls: KeyClass;
  wcu: number;
  rcu: number;
  /** Operations of the trace that touched the key. */
  ops: number;
}

interface Acc {
  wcu: number;
  rcu: number;
  ops: Set<OperationTrace>;
  /** The part of wcu/rcu from installation-wide operations (listings: no artifact of their own). */
  wideWcu: number;
  wideRcu: number;
  /** Units per artifact whose operations touched the key. */
  byArtifact: Map<string, { wcu: number; rcu: number }>;
}

/** What the workload traced: versions and the clock seconds they took on the one traced node. */
export interface TracedRun {
  versions: number;
  seconds: number;
}

export interface Projection {
  versions: number;
  seconds: number;
  items: Projected[];
  partitions: Projected[];
  tableWcu: number;
  tableRcu: number;
  bytesPerVersion: number;
}

function accumulate(traces: OperationTrace[], keyOf: (a: Access) => string | undefined): Map<string, Acc> {
  const m = new Map<string, Acc>();
  for (const t of traces)
    for (const a of t.accesses) {
      const k = keyOf(a);
      if (k === undefined) continue;
      let e = m.get(k);
      if (!e) m.set(k, (e = { wcu: 0, rcu: 0, ops: new Set(), wideWcu: 0, wideRcu: 0, byArtifact: new Map() }));
      if (t.artifact) {
        const u = e.byArtifact.get(t.artifact) ?? { wcu: 0, rcu: 0 };
        e.byArtifact.set(t.artifact, { wcu: u.wcu + a.wcu, rcu: u.rcu + a.rcu });
      }
      e.wcu += a.wcu;
      e.rcu += a.rcu;
      if (!t.artifact) {
        e.wideWcu += a.wcu;
        e.wideRcu += a.rcu;
      }
      e.ops.add(t);
    }
  return m;
}

/** The entity every touching operation shares and the key names, if any. */
function ownEntity(key: string, ops: Set<OperationTrace>): string | undefined {
  const [first, ...rest] = [...ops];
  if (!first) return undefined;
  return first.entities.find((e) => key.includes(e) && rest.every((t) => t.entities.includes(e)));
}

/** Classified by the operations on artifacts; installation-wide ones (listings) project as shared. */
function classify(key: string, ops: Set<OperationTrace>, layout: Layout): { cls: KeyClass; entity?: string } {
  const bare = key.split('|')[0] as string;
  if (bare.startsWith('INSTANCE#')) return { cls: 'per-node' };
  if (hasShardSuffix(key, layout)) return { cls: 'sharded' };
  const own = new Set([...ops].filter((t) => t.artifact));
  const e = own.size === 0 ? undefined : ownEntity(key, own);
  if (e === undefined) return { cls: 'shared' };
  return e.startsWith('reviewer-') ? { cls: 'per-human', entity: e } : { cls: 'per-artifact', entity: e };
}

const stripSuffix = (key: string) => key.replace(/#\d+(?=$|\|)/g, '');

function project(
  scope: Projected['scope'],
  m: Map<string, Acc>,
  traces: OperationTrace[],
  run: TracedRun,
  layout: Layout,
  goal: Goal,
): Projected[] {
  const allNodes = goal.nodes / run.seconds;
  const versionsOf = new Map<string, number>();
  const decisionsOf = new Map<string, number>();
  for (const t of traces) {
    if (t.kind === 'create' || t.kind === 'version') versionsOf.set(t.artifact, (versionsOf.get(t.artifact) ?? 0) + 1);
    if (t.kind === 'approve') for (const e of t.entities) if (e.startsWith('reviewer-')) decisionsOf.set(e, (decisionsOf.get(e) ?? 0) + 1);
  }
  // A shard family: its total (spread evenly by the hash), and the most one artifact puts on one of its
  // shards per version (the hottest artifact, at its peak rate, lands on some shard on top of the mean).
  const families = new Map<string, { wcu: number; rcu: number; peakWcu: number; peakRcu: number }>();
  for (const [key, a] of m)
    if (hasShardSuffix(key, layout)) {
      const f = families.get(stripSuffix(key)) ?? { wcu: 0, rcu: 0, peakWcu: 0, peakRcu: 0 };
      let { peakWcu, peakRcu } = f;
      for (const [artifact, u] of a.byArtifact) {
        const v = Math.max(1, versionsOf.get(artifact) ?? 1);
        peakWcu = Math.max(peakWcu, u.wcu / v);
        peakRcu = Math.max(peakRcu, u.rcu / v);
      }
      families.set(stripSuffix(key), { wcu: f.wcu + a.wcu, rcu: f.rcu + a.rcu, peakWcu, peakRcu });
    }
  const out: Projected[] = [];
  for (const [key, a] of m) {
    const { cls, entity } = classify(key, a.ops, layout);
    let scale = allNodes;
    let { wcu, rcu } = a;
    if (cls === 'per-node') scale = 1 / run.seconds;
    let wide = { wcu: 0, rcu: 0 };
    if (cls === 'sharded') {
      const f = families.get(stripSuffix(key)) as { wcu: number; rcu: number; peakWcu: number; peakRcu: number };
      ({ wcu, rcu } = f);
      scale = allNodes / componentShards(key, layout);
      const r = goal.hottestArtifactVersionsPerSecond;
      wide = { wcu: f.peakWcu * r, rcu: f.peakRcu * r };
    }
    if (cls === 'per-artifact' || cls === 'per-human') {
      // The entity's own operations at the entity's peak rate, plus the listings' reads of it as shared.
      wide = { wcu: a.wideWcu * allNodes, rcu: a.wideRcu * allNodes };
      wcu -= a.wideWcu;
      rcu -= a.wideRcu;
    }
    if (cls === 'per-artifact') {
      const artifact = [...a.ops].find((t) => t.artifact)?.artifact ?? '';
      scale = goal.hottestArtifactVersionsPerSecond / Math.max(1, versionsOf.get(artifact) ?? 1);
    }
    if (cls === 'per-human') scale = goal.humanDecisionsPerSecond / Math.max(1, decisionsOf.get(entity as string) ?? 1);
    out.push({ scope, key, cls, wcu: wcu * scale + wide.wcu, rcu: rcu * scale + wide.rcu, ops: a.ops.size });
  }
  return out;
}

export function projectTraces(traces: OperationTrace[], run: TracedRun, layout: Layout, goal: Goal = GOAL): Projection {
  const items = project(
    'item',
    accumulate(traces, (a) => (a.table === 'base' && a.op !== 'query' && a.op !== 'scan' ? a.key : undefined)),
    traces,
    run,
    layout,
    goal,
  );
  const base = project(
    'base partition',
    accumulate(traces, (a) => (a.table === 'base' ? a.pk : undefined)),
    traces,
    run,
    layout,
    goal,
  );
  const gsi = project(
    'GSI1 partition',
    accumulate(traces, (a) => (a.table === 'GSI1' ? a.pk : undefined)),
    traces,
    run,
    layout,
    goal,
  );
  let wcu = 0;
  let rcu = 0;
  for (const t of traces)
    for (const a of t.accesses) {
      wcu += a.wcu;
      rcu += a.rcu;
    }
  const written = new Map<string, number>();
  for (const t of traces)
    for (const a of t.accesses) if (a.table === 'base' && a.mode === 'write' && !a.failed) written.set(a.key, a.bytes);
  const bytes = [...written.values()].reduce((n, b) => n + b, 0);
  return {
    versions: run.versions,
    seconds: run.seconds,
    items,
    partitions: [...base, ...gsi],
    tableWcu: (wcu * goal.nodes) / run.seconds,
    tableRcu: (rcu * goal.nodes) / run.seconds,
    bytesPerVersion: bytes / run.versions,
  };
}

/** Requests per version of the workload: 9 lifecycle requests + 3 listings per artifact of 2 versions. */
export const REQUESTS_PER_VERSION = 9 + 3 / 2;

/** The clock time per request that makes the traced node run at its share of the goal. */
export function goalMsPerRequest(goal: Goal = GOAL): number {
  return (1000 * goal.nodes) / (goal.versionsPerSecond * REQUESTS_PER_VERSION);
}

/** Keys over their limit (items: 1,000 WCU/s, 3,000 RCU/s; partitions the same per partition). */
export function overLimit(p: Projection): Projected[] {
  return [...p.items, ...p.partitions].filter((x) => x.wcu > LIMITS.itemWcu || x.rcu > LIMITS.itemRcu);
}
