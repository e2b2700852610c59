import type { Command } from 'commander';
import { applyStorageRules, storageStatus } from '../../lifecycle/storage-rules.ts';
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
    .description('the rules in force, and what class each object has or would have')
    .option('--objects', 'list every object with its age and class')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const s = await storageStatus(rt.ctx, { objects: Boolean(o.objects) });
        output(rt.opts, s, () => [
          `engine: ${s.engine}${s.in_sync === undefined ? ' (no storage classes: classes below are what S3 would apply)' : s.in_sync ? ', rules in sync' : s.rules_error ? `, rules unknown: ${s.rules_error}` : ', rules NOT in sync: run alp lifecycle apply'}`,
          ...Object.entries(s.summary).map(
            ([p, c]) =>
              `  ${p.padEnd(13)} ${Object.entries(c)
                .map(([k, n]) => `${k}=${n}`)
                .join(' ')}`,
          ),
          ...s.deviations.map((d) => `  deviation ${d.prefix}: ${d.requested} → ${d.applied} (${d.reason})`),
          ...(s.objects ?? []).map((x) => `  ${x.storage_class.padEnd(12)} ${String(x.age_days).padStart(5)} d  ${x.key}`),
        ]);
      }),
    );
}
