import type { Command } from 'commander';
import { applyStorageRules } from '../../lifecycle/storage-rules.ts';
import { type StorageStatus, storageStatus } from '../../lifecycle/storage-status.ts';
import { output, withRuntime } from '../runtime.ts';

/** `alp lifecycle apply|status`: the storage-class rules of RFC-012 §9.3. */
export function registerStorageRuleCommands(program: Command): void {
  const lifecycle = program.command('lifecycle').description('storage-class lifecycle rules (RFC-012 §9.3)');
  lifecycle
    .command('apply')
    .description('write the rules into the bucket lifecycle configuration (idempotent; other rules are kept)')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const r = await applyStorageRules(rt.ctx);
        output(rt.opts, r, () => [
          r.applied ? `applied ${r.rules.length} rules` : `not applied: ${r.note}`,
          ...r.rules.map(
            (x) => `  ${x.id}: ${x.prefix} → ${(x.transitions ?? []).map((t) => `${t.storageClass} after ${t.days} d`).join(', ')}`,
          ),
          ...r.deviations.map((d) => `  deviation ${d.prefix}: ${d.requested} → ${d.applied} (${d.reason})`),
        ]);
      }),
    );
  lifecycle
    .command('status')
    .description("the rules in force, and each object's class: what the storage says, or what the rules would do (labelled)")
    .option('--objects', 'list every object (archive copies included) with its age, size and class')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const s = await storageStatus(rt.ctx, { objects: Boolean(o.objects) });
        output(rt.opts, s, () => statusLines(s));
      }),
    );
}

const SOURCE_LABEL = {
  storage: 'what the storage says',
  rules_in_force: 'what the rules in force would do',
  planned_rules: 'what the planned rules would do',
} as const;

function statusLines(s: StorageStatus): string[] {
  const rules = s.rules_evaluated === 'in_force' ? 'the rules in force' : 'the rules `alp lifecycle apply` installs';
  const counts = (c: Record<string, number>) =>
    Object.entries(c)
      .map(([k, n]) => `${k}=${n}`)
      .join(' ');
  return [
    `engine: ${s.engine}${s.in_sync === undefined ? ' (no storage classes)' : s.in_sync ? ', rules in sync' : s.rules_error ? `, rules unknown: ${s.rules_error}` : ', rules NOT in sync: run alp lifecycle apply'}`,
    `classes: ${Object.entries(s.sources)
      .map(([k, n]) => `${n} by ${SOURCE_LABEL[k as keyof typeof SOURCE_LABEL]} (${k})`)
      .join(', ')}; rules evaluated: ${rules} (S3 moves no object under 128 KiB)`,
    ...Object.entries(s.summary).map(([p, c]) => `  ${p.padEnd(13)} ${counts(c)}`),
    `RFC-012 §9.3 day counts, for comparison only (not what S3 does):`,
    ...Object.entries(s.rfc_summary).map(([p, c]) => `  ${p.padEnd(13)} ${counts(c as Record<string, number>)}`),
    ...s.deviations.map((d) => `  deviation ${d.prefix}: ${d.requested} → ${d.applied} (${d.reason})`),
    ...(s.objects ?? []).map(
      (x) =>
        `  ${x.storage_class.padEnd(12)} ${x.source.padEnd(14)} ${String(x.age_days).padStart(5)} d ${String(x.size ?? '?').padStart(10)} B  ${x.key}${x.missing ? '  (missing)' : ''}`,
    ),
  ];
}
