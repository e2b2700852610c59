/**
 * Read-only views of retention: the dry-run plan, why an object is kept, and the status of
 * observations and runs. They scan without the fence, so they are advisory; only a run decides.
 */
import { DAY_MS } from '../core/clock.ts';
import { isDigest } from '../core/digest.ts';
import { RETENTION_RUN_SK_PREFIX, retentionPk } from '../core/keys.ts';
import type { ServiceContext } from '../system/context.ts';
import { contentRootId, GRACE_MS, type Observation, QUARANTINE_MS } from './model.ts';
import { scanReferences } from './references.ts';
import { ArtifactRetention } from './retention.ts';

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

export async function retentionPlan(
  ctx: ServiceContext,
  pins: string[] = [],
): Promise<{ rows: PlanRow[]; totals: Record<string, number>; scan: unknown }> {
  const observations = await new ArtifactRetention(ctx.items, ctx.content, { clock: ctx.clock, layout: ctx.layout }).observations();
  const scan = await scanReferences(ctx, { pins });
  const now = ctx.clock.now().getTime();
  const rows: PlanRow[] = [];
  for (const c of scan.candidates) {
    const o = observations.get(c.key);
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
    rows.push(row);
  }
  const totals: Record<string, number> = {
    candidates: rows.length,
    bytes: rows.reduce((n, r) => n + r.size, 0),
    referenced: scan.referenced.size,
  };
  for (const r of rows) totals[r.state] = (totals[r.state] ?? 0) + 1;
  totals.eligible_quarantine = rows.filter((r) => r.eligible_for === 'QUARANTINE').length;
  totals.eligible_purge = rows.filter((r) => r.eligible_for === 'PURGE').length;
  return { rows, totals, scan: scan.stats };
}

/** Why an object (by key or digest) is kept: the first reference path found, or its retention state. */
export async function explainRetention(ctx: ServiceContext, subject: string, pins: string[] = []): Promise<Record<string, unknown>> {
  const scan = await scanReferences(ctx, { pins });
  const keys = isDigest(subject) ? [...scan.objects.values()].filter((o) => o.digest === subject).map((o) => o.key) : [subject];
  const digestReason = isDigest(subject) ? scan.digests.get(subject) : undefined;
  const observations = await new ArtifactRetention(ctx.items, ctx.content, { clock: ctx.clock, layout: ctx.layout }).observations();
  const objects = keys.map((key) => {
    const why = scan.referenced.get(key);
    const o = observations.get(key);
    const present = scan.objects.has(key);
    return {
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
    };
  });
  return { subject, ...(digestReason ? { digest_referenced_because: digestReason } : {}), objects };
}

export async function retentionStatus(ctx: ServiceContext): Promise<Record<string, unknown>> {
  const root = contentRootId(ctx.content.location);
  const observations = await new ArtifactRetention(ctx.items, ctx.content, { clock: ctx.clock, layout: ctx.layout }).observations();
  const byState: Record<string, { count: number; bytes: number }> = {};
  for (const o of observations.values()) {
    const s = (byState[o.state] ??= { count: 0, bytes: 0 });
    s.count++;
    s.bytes += o.size;
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
