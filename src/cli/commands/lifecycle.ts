import type { Command } from 'commander';
import { parseDuration } from '../../core/clock.ts';
import { UsageError } from '../../core/errors.ts';
import { parseState } from '../../lifecycle/artifacts.ts';
import { output } from '../runtime.ts';
import { withBackend } from '../session.ts';
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
    .option('--version <n>', 'version or @alias (default: the latest)')
    .option('--reason <text>', 'why')
    .action(async (ref: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = await resolveArtifactRef(b, ref);
        const choice = await chooseVersion(b, id, o.version, 'latest');
        const v = await b.transition(id, choice.version, 'PROPOSED', o.reason);
        outputChosen(opts, id, choice, v, () => `${v.artifact_id} v${v.version} ${v.state}`);
      }),
    );

  artifact
    .command('withdraw <id>')
    .description('PROPOSED → DRAFT (approvals given so far no longer count)')
    .option('--version <n>', 'version or @alias (default: the PROPOSED one, else the latest)')
    .option('--reason <text>', 'why')
    .action(async (ref: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = await resolveArtifactRef(b, ref);
        const choice = await chooseVersion(b, id, o.version, 'proposed');
        const v = await b.withdraw(id, choice.version, o.reason);
        outputChosen(opts, id, choice, v, () => `${v.artifact_id} v${v.version} ${v.state}`);
      }),
    );

  for (const decision of ['approve', 'reject'] as const) {
    artifact
      .command(`${decision} <id>`)
      .description(decision === 'approve' ? 'approve a PROPOSED version (humans only)' : 'reject a PROPOSED version (humans only)')
      .option('--version <n>', 'version or @alias (default: the PROPOSED one, else the latest)')
      .requiredOption('--evidence <ref>', 'evidence reference (ticket, review, test run)')
      .option('--expires-in <duration>', 'lifetime of the approval, e.g. 7d, 12h', '7d')
      .option('--digest <sha256>', 'the content digest you reviewed (default: the version’s)')
      .option('--comment <text>', 'comment')
      .action(async (ref: string, o, cmd: Command) =>
        withBackend(cmd, async (b, opts) => {
          const ttl = parseDuration(o.expiresIn);
          if (ttl === undefined) throw new UsageError('--expires-in takes a duration like 7d, 12h, 30m');
          const id = await resolveArtifactRef(b, ref);
          const choice = await chooseVersion(b, id, o.version, 'proposed');
          const result = await b.decide(id, choice.version, {
            decision: decision === 'approve' ? 'APPROVE' : 'REJECT',
            evidenceRef: o.evidence,
            expiresIn: o.expiresIn,
            expiresInMs: ttl,
            contentHash: o.digest,
            comment: o.comment,
          });
          const { approval, version } = result;
          outputChosen(opts, id, choice, result, () => [
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
    .option('--version <n>', 'version or @alias (default: the latest)')
    .requiredOption('--to <state>', 'target state')
    .option('--reason <text>', 'why')
    .action(async (ref: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const to = parseState(o.to);
        const id = await resolveArtifactRef(b, ref);
        const choice = await chooseVersion(b, id, o.version, 'latest');
        const v = await b.transition(id, choice.version, to, o.reason);
        outputChosen(opts, id, choice, v, () => `${v.artifact_id} v${v.version} ${v.state}`);
      }),
    );

  program
    .command('archive <id>')
    .description('copy every object of a settled artifact to archive/, verify, and move its versions to ARCHIVED')
    .action(async (ref: string, _o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = await resolveArtifactRef(b, ref);
        const result = await b.archive(id);
        output(opts, result, () => [
          `archived ${id}: ${result.archived.length} objects`,
          ...result.archived.map((a) => `  ${a.archive_key}`),
        ]);
      }),
    );
}
