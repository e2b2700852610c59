import type { Command } from 'commander';
import { ExitCode, UsageError } from '../../core/errors.ts';
import { createToken } from '../../lifecycle/principals.ts';
import { collectRefs, verifyObjects } from '../../lifecycle/verify-content.ts';
import { type StartupStatus, startInstallation } from '../../runtime/startup.ts';
import { progressBar } from '../progress.ts';
import { actingPrincipal, output, type Runtime, withRuntime } from '../runtime.ts';

/** The shared startup sequence (runtime/startup.ts), warning on stderr about each path it made private. */
export async function initAndDescribe(rt: Runtime, opts: { bootstrapTokens?: boolean } = {}): Promise<StartupStatus> {
  return startInstallation(rt.ctx, rt.config, {
    ...opts,
    onTightened: (t) =>
      process.stderr.write(`alp: warning: ${t.path} was open to other local users (mode ${t.from.toString(8)}); now ${t.to.toString(8)}\n`),
  });
}

export function registerAdminCommands(program: Command): void {
  program
    .command('init')
    .description('create or open the installation; prints its id')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const { bootstrapPending: _b, ...status } = await initAndDescribe(rt);
        output(rt.opts, status, () => [
          `${status.created ? 'created' : 'opened'} installation ${status.installation_id}`,
          `  metadata: ${status.metadata}`,
          `  content:  ${status.content}`,
        ]);
      }),
    );

  const token = program.command('token').description('bearer tokens for the HTTP API');
  token
    .command('create')
    .description('create a token for a principal; it is printed once and only its hash is stored')
    .requiredOption('--principal <id>', 'principal id')
    .requiredOption('--kind <kind>', 'human | agent | service')
    .option('--label <text>', 'a note on what the token is for')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const actor = await actingPrincipal(rt);
        const { token: secret, principal } = await createToken(rt.ctx, { principal: o.principal, kind: o.kind, label: o.label }, actor);
        output(rt.opts, { token: secret, principal }, () => secret);
      }),
    );

  program
    .command('verify [id]')
    .description('re-hash every object an artifact (or, with --all, every artifact) names')
    .option('--all', 'verify every artifact')
    .action(async (id: string | undefined, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        if (!id && !o.all) throw new UsageError('give an artifact id or --all');
        const refs = await collectRefs(rt.ctx, o.all ? undefined : id);
        const bar = progressBar('verify', rt.opts.json);
        const report = await verifyObjects(rt.ctx, refs, bar).finally(() => bar.stop());
        output(rt.opts, report, () => [
          `${report.ok}/${report.objects} objects verified, ${report.bytes} bytes hashed`,
          ...report.findings.map((f) => `${f.problem.toUpperCase()} ${f.key} (${f.source}): ${f.detail}`),
        ]);
        if (report.findings.length > 0) {
          process.stderr.write(
            `alp: INTEGRITY: ${report.findings.length} object(s) failed verification, first: ${report.findings[0]?.key}\n`,
          );
          process.exitCode = ExitCode.INTEGRITY;
        }
      }),
    );
}
