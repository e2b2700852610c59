/**
 * Storage-class lifecycle (RFC-012 §9.3): artifacts/ to STANDARD_IA after 30 days, executions/ after
 * 14, provenance/ never, archive/ written as GLACIER. On an engine with storage classes (S3) the rules
 * are applied as the bucket's lifecycle configuration, keeping rules of other owners. The status
 * (storage-status.ts) reports what the storage says each object's class is, or what the rules in
 * force would make it, labelled; never the RFC's day counts as if they were the storage's.
 *
 * S3 refuses transitions to STANDARD_IA earlier than 30 days after creation, so the executions/ rule
 * is applied at 30 days and the deviation is reported with every apply and status — never silently.
 */
import type { LifecycleRule, StorageClass } from '../content/content-store.ts';
import type { ServiceContext } from '../system/context.ts';

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
/** S3 does not transition objects smaller than this (its default minimum object size for transitions). */
export const S3_MIN_TRANSITION_BYTES = 128 * 1024;

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

/** The class an object of `prefix` has at `ageDays` under RFC-012 §9.3's day counts (not what S3 does: see storage-status.ts). */
export function rfcClass(key: string, ageDays: number): StorageClass {
  const rule = RFC_RULES.find((r) => key.startsWith(r.prefix));
  if (!rule) return 'STANDARD';
  if (rule.writtenAs !== 'STANDARD') return rule.writtenAs;
  return rule.infrequentAccessAfterDays !== null && ageDays >= rule.infrequentAccessAfterDays ? 'STANDARD_IA' : 'STANDARD';
}

export function sortRules(rules: LifecycleRule[]): LifecycleRule[] {
  return [...rules].sort((a, b) => (a.id < b.id ? -1 : 1));
}
