/**
 * `alp lifecycle status` (RFC-012 §9.3, issue 16 item 10): for every object the installation names
 * (version content and metadata, execution outputs, provenance, and the archive copies of all of
 * them), the storage class — labelled by where the figure comes from:
 *
 * - `storage`: what the storage says (S3 HeadObject `StorageClass`, ContentStore.storageClass);
 * - `rules_in_force`: what the lifecycle rules installed in the bucket would make it at the object's
 *   age and size (an engine that reports no class for the object);
 * - `planned_rules`: what the rules `alp lifecycle apply` installs would make it, when no rules in
 *   force can be read (the fs engine, an S3 endpoint without lifecycle configuration).
 *
 * Rules are evaluated as S3 applies them: a transition happens at its `days`, not at the RFC's count
 * (executions/ moves at 30 days, not 14), and objects smaller than 128 KiB are never transitioned
 * (S3's default minimum object size). The RFC's own day counts are reported beside, as `rfc`, for
 * comparison only.
 */
import type { LifecycleRule, StorageClass } from '../content/content-store.ts';
import { DAY_MS } from '../core/clock.ts';
import { forEachLimited } from '../core/limit.ts';
import type { ServiceContext } from '../system/context.ts';
import { allHeads } from './artifacts.ts';
import { listExecutions } from './executions.ts';
import { type Deviation, plannedRules, RFC_RULES, rfcClass, S3_MIN_TRANSITION_BYTES, sortRules } from './storage-rules.ts';
import { listVersions } from './versions.ts';

export type ClassSource = 'storage' | 'rules_in_force' | 'planned_rules';

export interface ObjectClass {
  key: string;
  age_days: number;
  /** Bytes, when known (from the record, else from the storage); undefined for a missing object. */
  size?: number;
  /** The figure reported: the storage's answer when it gives one, else what the rules would do. */
  storage_class: string;
  source: ClassSource;
  /** What the rules (in force, or planned when none can be read) would make it at this age and size. */
  by_rules: StorageClass;
  /** RFC-012 §9.3's day counts, for comparison only: not what S3 does. */
  rfc: StorageClass;
  /** The object is not in the content store (the storage has nothing to report). */
  missing?: true;
}

export interface StorageStatus {
  engine: string;
  rules_in_force?: LifecycleRule[];
  in_sync?: boolean;
  rules_error?: string;
  /** Which rules `by_rules` (and every figure whose source is not `storage`) evaluates. */
  rules_evaluated: 'in_force' | 'planned';
  deviations: Deviation[];
  /** Object counts per prefix and class, of `storage_class` (each counted under its own source). */
  summary: Record<string, Record<string, number>>;
  /** How many objects' figures came from each source. */
  sources: Partial<Record<ClassSource, number>>;
  /** The same objects under RFC-012 §9.3's day counts, for comparison only. */
  rfc_summary: Record<string, Partial<Record<StorageClass, number>>>;
  objects?: ObjectClass[];
}

/** The class S3 gives an object under `rules`, written as `writtenAs`, at `ageDays` and `size` bytes. */
export function ruleClass(rules: readonly LifecycleRule[], key: string, ageDays: number, size: number | undefined): StorageClass {
  const written = RFC_RULES.find((r) => key.startsWith(r.prefix))?.writtenAs ?? 'STANDARD';
  // S3 does not transition objects under 128 KiB (an unknown size is taken as small: it does not move).
  if (size === undefined || size < S3_MIN_TRANSITION_BYTES) return written;
  let best: { days: number; storageClass: StorageClass } | undefined;
  for (const r of rules) {
    if (!key.startsWith(r.prefix)) continue;
    for (const t of r.transitions ?? []) if (t.days <= ageDays && (!best || t.days >= best.days)) best = t;
  }
  if (!best || written === 'GLACIER') return written;
  return best.storageClass;
}

interface Named {
  key: string;
  createdAt: string;
  size?: number;
}

/** Every object the installation names, once each, with when it was written and its recorded size. */
async function namedObjects(ctx: ServiceContext): Promise<Named[]> {
  const byKey = new Map<string, Named>();
  const add = (key: string, createdAt: string, size?: number) => {
    if (!byKey.has(key)) byKey.set(key, { key, createdAt, ...(typeof size === 'number' && size >= 0 ? { size } : {}) });
  };
  const archived = (list: unknown, at: string) => {
    for (const a of (list as Array<{ archive_key: string; size?: number }> | undefined) ?? []) add(a.archive_key, at, a.size);
  };
  for await (const head of allHeads(ctx)) {
    const at = head.archived?.at;
    for (const v of await listVersions(ctx.items, head.artifact_id)) {
      add(v.content_key, v.created_at, v.size);
      add(v.metadata_key, v.created_at);
      archived(v.archive_objects, at ?? v.created_at);
    }
    for (const e of await listExecutions(ctx, head.artifact_id)) {
      for (const o of Object.values(e.outputs)) add(o.key, e.timestamp as string, o.size);
      // The archive copies of execution outputs are recorded on the execution item.
      archived(e.archive_objects, at ?? (e.timestamp as string));
    }
    if (head.archived) archived(head.archived.objects, head.archived.at);
    if (typeof head.provenance_key === 'string') add(head.provenance_key, head.created_at);
  }
  return [...byKey.values()];
}

async function rulesToEvaluate(ctx: ServiceContext, status: StorageStatus, planned: LifecycleRule[]): Promise<LifecycleRule[]> {
  if (!ctx.content.getLifecycleRules) return planned;
  try {
    const inForce = await ctx.content.getLifecycleRules();
    status.rules_in_force = inForce;
    status.in_sync = JSON.stringify(sortRules(inForce)) === JSON.stringify(sortRules(planned));
    status.rules_evaluated = 'in_force';
    return inForce;
  } catch (e) {
    // The objects' classes are still worth reporting when the endpoint cannot show its rules.
    status.in_sync = false;
    status.rules_error = e instanceof Error ? e.message : String(e);
    return planned;
  }
}

export async function storageStatus(ctx: ServiceContext, opts: { objects?: boolean } = {}): Promise<StorageStatus> {
  const planned = plannedRules();
  const status: StorageStatus = {
    engine: ctx.content.engine,
    rules_evaluated: 'planned',
    deviations: ctx.content.getLifecycleRules ? planned.deviations : [],
    summary: {},
    sources: {},
    rfc_summary: {},
  };
  const rules = await rulesToEvaluate(ctx, status, planned.rules);
  const source: ClassSource = status.rules_evaluated === 'in_force' ? 'rules_in_force' : 'planned_rules';
  const now = ctx.clock.now().getTime();
  const named = await namedObjects(ctx);
  const objects: ObjectClass[] = new Array(named.length);
  await forEachLimited(
    named.map((n, i) => ({ n, i })),
    8,
    async ({ n, i }) => {
      const age = Math.max(0, Math.floor((now - new Date(n.createdAt).getTime()) / DAY_MS));
      const reported = ctx.content.storageClass ? await ctx.content.storageClass(n.key) : undefined;
      const size = n.size ?? (await ctx.content.head(n.key))?.size;
      const byRules = ruleClass(rules, n.key, age, size);
      objects[i] = {
        key: n.key,
        age_days: age,
        ...(size !== undefined ? { size } : {}),
        storage_class: reported ?? byRules,
        source: reported !== undefined ? 'storage' : source,
        by_rules: byRules,
        rfc: rfcClass(n.key, age),
        ...(reported === undefined && ctx.content.storageClass && ctx.content.hasStorageClasses ? { missing: true as const } : {}),
      };
    },
  );
  for (const o of objects) {
    const prefix = `${o.key.split('/')[0]}/`;
    const bucket = (status.summary[prefix] ??= {});
    bucket[o.storage_class] = (bucket[o.storage_class] ?? 0) + 1;
    status.sources[o.source] = (status.sources[o.source] ?? 0) + 1;
    const rfc = (status.rfc_summary[prefix] ??= {});
    rfc[o.rfc] = (rfc[o.rfc] ?? 0) + 1;
  }
  if (opts.objects) status.objects = objects;
  return status;
}
