import type { Command } from 'commander';
import { parseDuration } from '../../core/clock.ts';
import { UsageError } from '../../core/errors.ts';
import { decide } from '../../lifecycle/approvals.ts';
import { archiveArtifact } from '../../lifecycle/archive.ts';
import { parseState } from '../../lifecycle/artifacts.ts';
import { propose, transition, withdraw } from '../../lifecycle/transitions.ts';
import { versionView } from '../../lifecycle/versions.ts';
import { actingPrincipal, output, withRuntime } from '../runtime.ts';
import { chooseVersion, outputChosen, resolveArtifactRef } from '../targets.ts';

export function registerLifecycleCommands(program: Command, artifact: Command): void {
  registerReviewCommands(artifact);
  registerMoveCommands(program, artifact);
}

/** alp artifact propose | withdraw | approve | reject */
function registerReviewCommands(artifact: Command): void {
  artifact
    .command('propose <id>')
    .description('DRAFT → PROPOSED (earlier open versions become SUPERSEDED); an APPROVED version whose approvals expired → PROPOSED')
    .option('--version <n>', 'version (default: the latest)')
    .option('--reason <text>', 'why')
    .action(async (ref: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const id = await resolveArtifactRef(rt.ctx, ref);
        const choice = await chooseVersion(rt.ctx, id, o.version, 'latest');
        const v = await propose(rt.ctx, await actingPrincipal(rt), id, choice.version, o.reason);
        outputChosen(rt.opts, id, choice, versionView(v), () => `${v.artifact_id} v${v.version} ${v.state}`);
      }),
    );

  artifact
    .command('withdraw <id>')
    .description('PROPOSED → DRAFT (approvals given so far no longer count)')
    .option('--version <n>', 'version (default: the PROPOSED one, else the latest)')
    .option('--reason <text>', 'why')
    .action(async (ref: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const id = await resolveArtifactRef(rt.ctx, ref);
        const choice = await chooseVersion(rt.ctx, id, o.version, 'proposed');
        const v = await withdraw(rt.ctx, await actingPrincipal(rt), id, choice.version, o.reason);
        outputChosen(rt.opts, id, choice, versionView(v), () => `${v.artifact_id} v${v.version} ${v.state}`);
      }),
    );

  for (const decision of ['approve', 'reject'] as const) {
    artifact
      .command(`${decision} <id>`)
      .description(decision === 'approve' ? 'approve a PROPOSED version (humans only)' : 'reject a PROPOSED version (humans only)')
      .option('--version <n>', 'version (default: the PROPOSED one, else the latest)')
      .requiredOption('--evidence <ref>', 'evidence reference (ticket, review, test run)')
      .option('--expires-in <duration>', 'lifetime of the approval, e.g. 7d, 12h', '7d')
      .option('--digest <sha256>', 'the content digest you reviewed (default: the version’s)')
      .option('--comment <text>', 'comment')
      .action(async (ref: string, o, cmd: Command) =>
        withRuntime(cmd, async (rt) => {
          const ttl = parseDuration(o.expiresIn);
          if (ttl === undefined) throw new UsageError('--expires-in takes a duration like 7d, 12h, 30m');
          const id = await resolveArtifactRef(rt.ctx, ref);
          const choice = await chooseVersion(rt.ctx, id, o.version, 'proposed');
          const { approval, version } = await decide(rt.ctx, await actingPrincipal(rt), id, choice.version, {
            decision: decision === 'approve' ? 'APPROVE' : 'REJECT',
            evidenceRef: o.evidence,
            expiresInMs: ttl,
            contentHash: o.digest,
            comment: o.comment,
          });
          outputChosen(rt.opts, id, choice, { approval, version: versionView(version) }, () => [
            `${approval.decision} by ${approval.actor.id} on ${id} v${version.version}: ${approval.counted ? 'counted' : `not counted (${approval.not_counted_reason})`}`,
            `${id} v${version.version} is ${version.state}`,
          ]);
        }),
      );
  }
}

/** alp artifact transition, alp archive */
function registerMoveCommands(program: Command, artifact: Command): void {
  artifact
    .command('transition <id>')
    .description('a manual state change (others happen through approve, exec, compensate, archive)')
    .option('--version <n>', 'version (default: the latest)')
    .requiredOption('--to <state>', 'target state')
    .option('--reason <text>', 'why')
    .action(async (ref: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const to = parseState(o.to);
        const id = await resolveArtifactRef(rt.ctx, ref);
        const choice = await chooseVersion(rt.ctx, id, o.version, 'latest');
        const v = await transition(rt.ctx, await actingPrincipal(rt), id, choice.version, to, o.reason);
        outputChosen(rt.opts, id, choice, versionView(v), () => `${v.artifact_id} v${v.version} ${v.state}`);
      }),
    );

  program
    .command('archive <id>')
    .description('copy every object of a settled artifact to archive/, verify, and move its versions to ARCHIVED')
    .action(async (ref: string, _o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const id = await resolveArtifactRef(rt.ctx, ref);
        const result = await archiveArtifact(rt.ctx, await actingPrincipal(rt), id);
        output(rt.opts, result, () => [
          `archived ${id}: ${result.archived.length} objects`,
          ...result.archived.map((a) => `  ${a.archive_key}`),
        ]);
      }),
    );
}
