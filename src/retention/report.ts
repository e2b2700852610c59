/**
 * Read-only views of retention: the plan a human reviews (its candidates, its digest, and a row per
 * unreferenced object), why an object is kept, and the status of observations and runs. They write
 * nothing and take no fence; only a run decides, re-validating under the fence (retention.ts).
 */
import { DAY_MS } from '../core/clock.ts';
import type { Digest } from '../core/digest.ts';
import { isDigest } from '../core/digest.ts';
import { OBSERVATION_SK_PREFIX, observationPartitions, RETENTION_RUN_SK_PREFIX, retentionPk } from '../core/keys.ts';
import type { ServiceContext } from '../system/context.ts';
import {
  contentRootId,
  GRACE_MS,
  type Observation,
  observationKey,
  QUARANTINE_MS,
  type RetentionAction,
  type RetentionPlan,
} from './model.ts';
import { storedPins } from './pins.ts';
import { scanReferences } from './references.ts';
import { openPlanSession } from './run-plan.ts';
import type { ScanStats } from './scan-result.ts';

export interface PlanRow {
  key: string;
  digest?: string;
  size: number;
  state: 'UNOBSERVED' | Observation['state'];
  /** Days since the first observation (grace) or the quarantine. */
  age_days?: number;
  eligible_for?: 'QUARANTINE' | 'PURGE';
  eligible_in_days?: number;
}

export interface PlanReport {
  action: RetentionAction;
  plan: RetentionPlan;
  plan_digest: Digest;
  observe: { starts: number; resets: number };
  skipped: Array<{ key: string; reason: string }>;
  /** One row per unreferenced object (streamed to `onRow` when given, else collected here). */
  rows: PlanRow[];
  totals: Record<string, number>;
  scan: ScanStats;
}

export interface PlanReportOptions {
  action: RetentionAction;
  epoch: number;
  maxArtifacts?: number;
  pins?: string[];
  /** Receives every row as it is found (then `rows` stays empty: nothing grows with the installation). */
  onRow?: (row: PlanRow) => void;
  onProgress?: (phase: string, done: number, total?: number) => void;
}

/** The plan `alp retention plan` prints: what `alp retention run --plan-digest` will recompute and compare. */
export async function retentionPlan(ctx: ServiceContext, o: PlanReportOptions): Promise<PlanReport> {
  const s = await openPlanSession(ctx, {
    epoch: o.epoch,
    action: o.action,
    ...(o.maxArtifacts !== undefined ? { maxArtifacts: o.maxArtifacts } : {}),
    pins: o.pins ?? [],
    ...(o.onProgress ? { onProgress: o.onProgress } : {}),
  });
  try {
    const rows: PlanRow[] = [];
    const totals: Record<string, number> = {
      candidates: 0,
      bytes: 0,
      referenced: s.scan.referencedCount(),
      eligible_quarantine: 0,
      eligible_purge: 0,
    };
    const now = ctx.clock.now().getTime();
    for (const c of s.scan.candidates()) {
      const row = rowOf(c, s.work.get(c.key), now);
      totals.candidates = (totals.candidates ?? 0) + 1;
      totals.bytes = (totals.bytes ?? 0) + row.size;
      totals[row.state] = (totals[row.state] ?? 0) + 1;
      if (row.eligible_for === 'QUARANTINE') totals.eligible_quarantine = (totals.eligible_quarantine ?? 0) + 1;
      if (row.eligible_for === 'PURGE') totals.eligible_purge = (totals.eligible_purge ?? 0) + 1;
      if (o.onRow) o.onRow(row);
      else rows.push(row);
    }
    totals.planned = s.plan.candidates.length;
    totals.planned_bytes = s.plan.total_bytes;
    return {
      action: o.action,
      plan: s.plan,
      plan_digest: s.digest,
      observe: s.work.counts(),
      skipped: s.skipped,
      rows,
      totals,
      scan: s.scan.stats,
    };
  } finally {
    s.close();
  }
}

function rowOf(c: { key: string; size: number; digest?: string }, o: Observation | undefined, now: number): PlanRow {
  const row: PlanRow = {
    key: c.key,
    size: c.size,
    state: o && o.state !== 'PURGED' ? o.state : 'UNOBSERVED',
    ...(c.digest ? { digest: c.digest } : {}),
  };
  if (o?.state === 'GRACE') {
    const age = now - Date.parse(o.first_observed_at);
    row.age_days = Math.floor(age / DAY_MS);
    if (age >= GRACE_MS) row.eligible_for = 'QUARANTINE';
    else row.eligible_in_days = Math.ceil((GRACE_MS - age) / DAY_MS);
  } else if (o?.state === 'QUARANTINED') {
    const age = now - Date.parse(o.quarantined_at as string);
    row.age_days = Math.floor(age / DAY_MS);
    if (age >= QUARANTINE_MS) row.eligible_for = 'PURGE';
    else row.eligible_in_days = Math.ceil((QUARANTINE_MS - age) / DAY_MS);
  } else if (o?.state === 'PREPARED') row.eligible_for = 'PURGE';
  return row;
}

/** The observation of `key` in the current content root, if any (one strong read of its shard). */
async function observationOf(ctx: ServiceContext, key: string): Promise<Observation | undefined> {
  const at = observationKey(contentRootId(ctx.content.location), key, ctx.layout.index_shards);
  return (await ctx.items.get(at, { consistent: true })) as Observation | undefined;
}

/** Why an object (by key or digest) is kept: the first reference path found, or its retention state. */
export async function explainRetention(ctx: ServiceContext, subject: string, pins: string[] = []): Promise<Record<string, unknown>> {
  const scan = await scanReferences(ctx, { pins: [...pins, ...(await storedPins(ctx.items))] });
  try {
    const keys = isDigest(subject) ? scan.keysWithDigest(subject) : [subject];
    const digestReason = isDigest(subject) ? scan.digestWhy(subject) : undefined;
    const objects = [];
    for (const key of keys) {
      const why = scan.referencedWhy(key);
      const o = await observationOf(ctx, key);
      const present = scan.object(key) !== undefined;
      objects.push({
        key,
        present,
        ...(why ? { kept_because: why } : {}),
        ...(o
          ? {
              observation: {
                state: o.state,
                first_observed_at: o.first_observed_at,
                quarantined_at: o.quarantined_at,
                purged_at: o.purged_at,
              },
            }
          : {}),
        ...(!why && !o && present ? { note: 'unreferenced and not yet observed: the next retention run starts its grace period' } : {}),
      });
    }
    return { subject, ...(digestReason ? { digest_referenced_because: digestReason } : {}), objects };
  } finally {
    scan.close();
  }
}

export async function retentionStatus(ctx: ServiceContext): Promise<Record<string, unknown>> {
  const root = contentRootId(ctx.content.location);
  const byState: Record<string, { count: number; bytes: number }> = {};
  // Streamed page by page: the counts, never the observations, are held.
  for (const pk of observationPartitions(root, ctx.layout.index_shards)) {
    let cursor: string | undefined;
    do {
      const page = await ctx.items.query({
        pk,
        sk: { beginsWith: OBSERVATION_SK_PREFIX },
        consistent: true,
        ...(cursor ? { cursor } : {}),
      });
      for (const o of page.items as Observation[]) {
        const s = (byState[o.state] ??= { count: 0, bytes: 0 });
        s.count++;
        s.bytes += o.size;
      }
      cursor = page.cursor;
    } while (cursor);
  }
  const runs = await ctx.items.query({
    pk: retentionPk(root),
    sk: { beginsWith: RETENTION_RUN_SK_PREFIX },
    descending: true,
    limit: 10,
    consistent: true,
  });
  return {
    content_root: ctx.content.location,
    observations: byState,
    recent_runs: runs.items.map(({ PK: _p, SK: _s, ...r }) => r),
  };
}
