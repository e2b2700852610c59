import type { Command } from 'commander';
import { parseDigest } from '../../core/digest.ts';
import { ExitCode, UsageError } from '../../core/errors.ts';
import { localTrustedHost } from '../../retention/host.ts';
import type { RetentionAction } from '../../retention/model.ts';
import { explainRetention, type PlanRow, retentionPlan, retentionStatus } from '../../retention/report.ts';
import { ArtifactRetention } from '../../retention/retention.ts';
import { retentionApprover } from '../../runtime/human-rules.ts';
import { phaseBars } from '../progress.ts';
import { actingPrincipal, output, parseIntOption, withRuntime } from '../runtime.ts';

const collect = (value: string, previous: string[] = []) => [...previous, value];

function actionOf(text: unknown): RetentionAction {
  const action = String(text).toUpperCase();
  if (action !== 'QUARANTINE' && action !== 'PURGE') throw new UsageError('--action is QUARANTINE or PURGE');
  return action;
}

/** The scan's progress (phase, done, total) as one bar or counter per phase, on a terminal (stderr) only. */
function scanProgress(json: boolean | undefined) {
  const bars = phaseBars(json);
  let phase = '';
  let last = 0;
  let bar: ReturnType<typeof bars> = {};
  const onProgress = (p: string, done: number, total?: number) => {
    if (p !== phase) {
      phase = p;
      last = 0;
      bar = bars(`retention ${p}`, total);
    }
    bar.tick?.(Math.max(0, done - last));
    last = Math.max(last, done);
  };
  return { onProgress, stop: () => bars.stop() };
}

function rowLine(r: PlanRow): string {
  const when = r.eligible_for ? `eligible for ${r.eligible_for}` : `in ${r.eligible_in_days ?? '?'} d`;
  return `${r.state.padEnd(11)} ${when.padEnd(24)} ${String(r.size).padStart(10)}  ${r.key}`;
}

/** `alp retention plan|run|explain|status`: the CLI is the trusted host (seed 004). Never over HTTP. */
export function registerRetentionCommands(program: Command): void {
  const retention = program.command('retention').description('reclaim unreferenced immutable objects: grace, quarantine, approved purge');
  retention
    .command('plan')
    .description(
      'the plan a run of ACTION would carry out now, and its digest for `retention run --plan-digest` (read-only: no fence, no writes)',
    )
    .requiredOption('--action <action>', 'QUARANTINE | PURGE')
    .requiredOption('--epoch <n>', 'the current epoch (alp epoch show)')
    .option('--max <n>', 'at most this many candidates (1–1000, default 100)')
    .option('--pin <digest>', 'a digest to keep (repeatable; pass the same pins to `retention run`)', collect, [])
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const progress = scanProgress(rt.opts.json);
        const human = !rt.opts.json;
        const r = await retentionPlan(rt.ctx, {
          action: actionOf(o.action),
          epoch: parseIntOption('--epoch', o.epoch, { min: 1 }) as number,
          maxArtifacts: parseIntOption('--max', o.max, { min: 1, max: 1000 }) ?? 100,
          pins: (o.pin as string[]).map((d) => parseDigest(d)),
          onProgress: progress.onProgress,
          // Text output streams one row per unreferenced object; --json collects them into the document.
          ...(human ? { onRow: (row: PlanRow) => process.stdout.write(`${rowLine(row)}\n`) } : {}),
        }).finally(progress.stop);
        output(rt.opts, r, () => [
          `totals: ${Object.entries(r.totals)
            .map(([k, v]) => `${k}=${v}`)
            .join(' ')}`,
          `plan ${r.action} (epoch ${r.plan.epoch}): ${r.plan.candidates.length} candidate(s), ${r.plan.total_bytes} bytes; a run first observes ${r.observe.starts} new and lapses ${r.observe.resets}`,
          ...r.plan.candidates.map((c) => `  ${c.state.padEnd(11)} ${String(c.size).padStart(10)}  ${c.key}  ${c.digest}`),
          ...r.skipped.map((s) => `  skipped ${s.key}: ${s.reason}`),
          `plan digest ${r.plan_digest}`,
          `to carry it out: alp retention run --action ${r.action} --epoch ${r.plan.epoch} --plan-digest ${r.plan_digest} --evidence … --restore …`,
        ]);
      }),
    );
  retention
    .command('run')
    .description(
      'carry out the reviewed plan: recomputed outside the fence, refused if it differs; under the fence only re-validated and acted on',
    )
    .requiredOption('--action <action>', 'QUARANTINE | PURGE')
    .requiredOption('--epoch <n>', 'the current epoch (alp epoch show)')
    .requiredOption('--plan-digest <digest>', 'the digest `alp retention plan` printed for the plan you reviewed')
    .option('--max <n>', 'at most this many candidates (1–1000, default 100; as in the plan)')
    .option('--approver <id>', 'the human principal approving (default: the acting principal)')
    .requiredOption('--evidence <ref>', 'evidence reference for the approval (ticket, review)')
    .requiredOption('--restore <path-or-url>', 'the verified, activated restore of this installation the approval rests on')
    .option('--pin <digest>', 'a digest to keep (repeatable; as in the plan)', collect, [])
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const action = actionOf(o.action);
        const planDigest = parseDigest(o.planDigest);
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
        const progress = scanProgress(rt.opts.json);
        const retentionRun = new ArtifactRetention(rt.ctx.items, rt.ctx.content, { clock: rt.ctx.clock, layout: rt.ctx.layout });
        try {
          const r = await retentionRun.run(parseIntOption('--epoch', o.epoch, { min: 1 }) as number, action, host, {
            maxArtifacts: parseIntOption('--max', o.max, { min: 1, max: 1000 }) ?? 100,
            planDigest,
            onProgress: progress.onProgress,
          });
          progress.stop();
          output(rt.opts, r, () => [
            `${r.status}${r.reason ? `: ${r.reason}` : ''}`,
            ...(r.plan_digest ? [`plan ${r.plan_digest}: ${r.plan?.candidates.length} candidate(s), ${r.plan?.total_bytes} bytes`] : []),
            `fence held ${r.fence_ms} ms (plan ${r.plan_ms} ms outside it)`,
            ...r.observed.map((k) => `  observed (grace starts) ${k}`),
            ...r.reset.map((k) => `  reset (referenced again, gone or changed) ${k}`),
            ...r.quarantined.map((k) => `  quarantined ${k}`),
            ...r.purged.map((k) => `  purged ${k}`),
            ...r.skipped.map((s) => `  skipped ${s.key}: ${s.reason}`),
          ]);
          if (r.status === 'REFUSED') process.exitCode = ExitCode.CONFLICT;
        } finally {
          progress.stop();
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
