/**
 * Storage-class lifecycle (RFC-012 §9.3): artifacts/ to STANDARD_IA after 30 days, executions/ after
 * 14, provenance/ never, archive/ written as GLACIER. On an engine with storage classes (S3) the rules
 * are applied as the bucket's lifecycle configuration, keeping rules of other owners; elsewhere the
 * status reports what each object's class would be, from the ages the items record.
 *
 * S3 refuses transitions to STANDARD_IA earlier than 30 days after creation, so the executions/ rule
 * is applied at 30 days and the deviation is reported with every apply and status — never silently.
 */
import type { LifecycleRule, StorageClass } from '../content/content-store.ts';
import { DAY_MS } from '../core/clock.ts';
import type { ServiceContext } from '../system/context.ts';
import { allHeads } from './artifacts.ts';
import { listExecutions } from './executions.ts';
import { listVersions } from './versions.ts';

export interface RfcRule {
  prefix: 'artifacts/' | 'executions/' | 'provenance/' | 'archive/';
  /** Days after creation to STANDARD_IA, or null for none. */
  infrequentAccessAfterDays: number | null;
  /** Written with this class. */
  writtenAs: StorageClass;
}

export const RFC_RULES: readonly RfcRule[] = [
  { prefix: 'artifacts/', infrequentAccessAfterDays: 30, writtenAs: 'STANDARD' },
  { prefix: 'executions/', infrequentAccessAfterDays: 14, writtenAs: 'STANDARD' },
  { prefix: 'provenance/', infrequentAccessAfterDays: null, writtenAs: 'STANDARD' },
  { prefix: 'archive/', infrequentAccessAfterDays: null, writtenAs: 'GLACIER' },
];

/** S3's minimum age for a transition to STANDARD_IA. */
export const S3_MIN_IA_DAYS = 30;

export interface Deviation {
  prefix: string;
  requested: string;
  applied: string;
  reason: string;
}

/** The bucket rules that implement RFC-012 §9.3 on S3, and every place they differ from it. */
export function plannedRules(): { rules: LifecycleRule[]; deviations: Deviation[] } {
  const rules: LifecycleRule[] = [];
  const deviations: Deviation[] = [];
  for (const r of RFC_RULES) {
    const id = `alp-${r.prefix.replace('/', '')}`;
    if (r.infrequentAccessAfterDays !== null) {
      const days = Math.max(r.infrequentAccessAfterDays, S3_MIN_IA_DAYS);
      if (days !== r.infrequentAccessAfterDays) {
        deviations.push({
          prefix: r.prefix,
          requested: `STANDARD_IA after ${r.infrequentAccessAfterDays} days`,
          applied: `STANDARD_IA after ${days} days`,
          reason: `S3 refuses transitions to STANDARD_IA earlier than ${S3_MIN_IA_DAYS} days after creation`,
        });
      }
      rules.push({ id, prefix: r.prefix, transitions: [{ days, storageClass: 'STANDARD_IA' }] });
    } else if (r.writtenAs === 'GLACIER') {
      // Archive copies are written as GLACIER; the rule catches anything written otherwise.
      rules.push({ id, prefix: r.prefix, transitions: [{ days: 0, storageClass: 'GLACIER' }] });
    }
  }
  deviations.push({
    prefix: 'artifacts/, executions/',
    requested: 'every object transitions',
    applied: 'objects of 128 KiB and more transition',
    reason: 'S3 does not transition objects smaller than 128 KiB by default',
  });
  return { rules, deviations };
}

export interface ApplyResult {
  applied: boolean;
  rules: LifecycleRule[];
  deviations: Deviation[];
  note?: string;
}

export async function applyStorageRules(ctx: ServiceContext): Promise<ApplyResult> {
  const { rules, deviations } = plannedRules();
  if (!ctx.content.putLifecycleRules) {
    return {
      applied: false,
      rules,
      deviations: [],
      note: `the ${ctx.content.engine} content engine has no storage classes; use \`alp lifecycle status\` to see what each object's class would be`,
    };
  }
  await ctx.content.putLifecycleRules(rules);
  return { applied: true, rules, deviations };
}

export interface ObjectClass {
  key: string;
  age_days: number;
  storage_class: StorageClass;
}

export interface StorageStatus {
  engine: string;
  rules_in_force?: LifecycleRule[];
  in_sync?: boolean;
  rules_error?: string;
  deviations: Deviation[];
  /** Object counts per prefix and (would-be) class. */
  summary: Record<string, Partial<Record<StorageClass, number>>>;
  objects?: ObjectClass[];
}

/** The class an object of `prefix` has (or would have) at `ageDays` under RFC-012 §9.3. */
export function rfcClass(key: string, ageDays: number): StorageClass {
  const rule = RFC_RULES.find((r) => key.startsWith(r.prefix));
  if (!rule) return 'STANDARD';
  if (rule.writtenAs !== 'STANDARD') return rule.writtenAs;
  return rule.infrequentAccessAfterDays !== null && ageDays >= rule.infrequentAccessAfterDays ? 'STANDARD_IA' : 'STANDARD';
}

export async function storageStatus(ctx: ServiceContext, opts: { objects?: boolean } = {}): Promise<StorageStatus> {
  const planned = plannedRules();
  const status: StorageStatus = { engine: ctx.content.engine, deviations: [], summary: {} };
  if (ctx.content.getLifecycleRules) {
    status.deviations = planned.deviations;
    try {
      const inForce = await ctx.content.getLifecycleRules();
      status.rules_in_force = inForce;
      status.in_sync = JSON.stringify(sortRules(inForce)) === JSON.stringify(sortRules(planned.rules));
    } catch (e) {
      // The objects' classes are still worth reporting when the endpoint cannot show its rules.
      status.in_sync = false;
      status.rules_error = e instanceof Error ? e.message : String(e);
    }
  }
  const now = ctx.clock.now().getTime();
  const objects: ObjectClass[] = [];
  const add = (key: string, createdAt: string) => {
    const age = Math.max(0, Math.floor((now - new Date(createdAt).getTime()) / DAY_MS));
    objects.push({ key, age_days: age, storage_class: rfcClass(key, age) });
  };
  for await (const head of allHeads(ctx)) {
    for (const v of await listVersions(ctx.items, head.artifact_id)) {
      add(v.content_key, v.created_at);
      add(v.metadata_key, v.created_at);
      for (const a of (v.archive_objects as Array<{ archive_key: string }> | undefined) ?? [])
        add(a.archive_key, head.archived?.at ?? v.created_at);
    }
    for (const e of await listExecutions(ctx, head.artifact_id))
      for (const o of Object.values(e.outputs)) add(o.key, e.timestamp as string);
    if (typeof head.provenance_key === 'string') add(head.provenance_key, head.created_at);
  }
  for (const o of objects) {
    const prefix = `${o.key.split('/')[0]}/`;
    const bucket = (status.summary[prefix] ??= {});
    bucket[o.storage_class] = (bucket[o.storage_class] ?? 0) + 1;
  }
  if (opts.objects) status.objects = objects;
  return status;
}

function sortRules(rules: LifecycleRule[]): LifecycleRule[] {
  return [...rules].sort((a, b) => (a.id < b.id ? -1 : 1));
}
