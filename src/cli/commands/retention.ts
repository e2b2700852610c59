import type { Command } from 'commander';
import { parseDigest } from '../../core/digest.ts';
import { ExitCode, UsageError } from '../../core/errors.ts';
import { localTrustedHost } from '../../retention/host.ts';
import { explainRetention, retentionPlan, retentionStatus } from '../../retention/report.ts';
import { ArtifactRetention } from '../../retention/retention.ts';
import { retentionApprover } from '../../runtime/human-rules.ts';
import { actingPrincipal, output, parseIntOption, withRuntime } from '../runtime.ts';

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** `alp retention plan|run|explain|status`: the CLI is the trusted host (seed 004). Never over HTTP. */
export function registerRetentionCommands(program: Command): void {
  const retention = program.command('retention').description('reclaim unreferenced immutable objects: grace, quarantine, approved purge');
  retention
    .command('plan')
    .description('dry run: unreferenced objects, their grace or quarantine age, and totals (changes nothing)')
    .option('--pin <digest>', 'a digest to keep (repeatable)', collect, [])
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const plan = await retentionPlan(
          rt.ctx,
          (o.pin as string[]).map((d) => parseDigest(d)),
        );
        output(rt.opts, plan, () => [
          ...plan.rows.map(
            (r) =>
              `${r.state.padEnd(11)} ${r.eligible_for ? `eligible for ${r.eligible_for}`.padEnd(24) : `in ${r.eligible_in_days ?? '?'} d`.padEnd(24)} ${String(r.size).padStart(10)}  ${r.key}`,
          ),
          `totals: ${Object.entries(plan.totals)
            .map(([k, v]) => `${k}=${v}`)
            .join(' ')}`,
        ]);
      }),
    );
  retention
    .command('run')
    .description('under the maintenance fence: observe, then quarantine or purge what an approval covers')
    .requiredOption('--action <action>', 'QUARANTINE | PURGE')
    .requiredOption('--epoch <n>', 'the current epoch (alp epoch show)')
    .option('--max <n>', 'at most this many candidates (1–1000, default 100)')
    .option('--approver <id>', 'the human principal approving (default: the acting principal)')
    .requiredOption('--evidence <ref>', 'evidence reference for the approval (ticket, review)')
    .requiredOption('--restore <path-or-url>', 'the verified, activated restore of this installation the approval rests on')
    .option('--pin <digest>', 'a digest to keep (repeatable)', collect, [])
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const action = String(o.action).toUpperCase();
        if (action !== 'QUARANTINE' && action !== 'PURGE') throw new UsageError('--action is QUARANTINE or PURGE');
        const actor = await actingPrincipal(rt);
        const approver = retentionApprover(actor, o.approver);
        const host = localTrustedHost(rt.ctx, {
          owner: `retention ${actor.id}`,
          approver,
          evidenceRef: o.evidence,
          restore: o.restore,
          pins: (o.pin as string[]).map((d) => parseDigest(d)),
          holdOnFailure: action === 'PURGE',
        });
        const retentionRun = new ArtifactRetention(rt.ctx.items, rt.ctx.content, { clock: rt.ctx.clock });
        try {
          const r = await retentionRun.run(parseIntOption('--epoch', o.epoch, { min: 1 }) as number, action, host, {
            maxArtifacts: parseIntOption('--max', o.max, { min: 1, max: 1000 }) ?? 100,
          });
          output(rt.opts, r, () => [
            `${r.status}${r.reason ? `: ${r.reason}` : ''}`,
            ...(r.plan_digest ? [`plan ${r.plan_digest}: ${r.plan?.candidates.length} candidate(s), ${r.plan?.total_bytes} bytes`] : []),
            ...r.observed.map((k) => `  observed (grace starts) ${k}`),
            ...r.reset.map((k) => `  reset (referenced again) ${k}`),
            ...r.quarantined.map((k) => `  quarantined ${k}`),
            ...r.purged.map((k) => `  purged ${k}`),
            ...r.skipped.map((s) => `  skipped ${s.key}: ${s.reason}`),
          ]);
          if (r.status === 'REFUSED') process.exitCode = ExitCode.CONFLICT;
        } finally {
          await retentionRun.close();
        }
      }),
    );
  retention
    .command('explain <digest-or-key>')
    .description('why an object is kept: the first reference path found, or its grace/quarantine status')
    .action(async (subject: string, _o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const e = await explainRetention(rt.ctx, subject);
        output(rt.opts, e, () => JSON.stringify(e, null, 2));
      }),
    );
  retention
    .command('status')
    .description('observations by state and the latest runs')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const s = await retentionStatus(rt.ctx);
        output(rt.opts, s, () => JSON.stringify(s, null, 2));
      }),
    );
}
