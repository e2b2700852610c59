import type { Command } from 'commander';
import { parseDigest } from '../../core/digest.ts';
import { UsageError } from '../../core/errors.ts';
import { headView } from '../../lifecycle/artifacts.ts';
import { compensate } from '../../lifecycle/compensation.ts';
import { executionView, finishExecution, readExecution, startExecution, uploadOutput } from '../../lifecycle/executions.ts';
import { versionView } from '../../lifecycle/versions.ts';
import { openInputFile } from '../files.ts';
import { actingPrincipal, output, parseIntOption, withRuntime } from '../runtime.ts';

export function registerExecCommands(program: Command): void {
  const exec = program.command('exec').description('executions: start, upload outputs, finish');
  exec
    .command('start <id>')
    .description('APPROVED → EXECUTING; re-checks the approvals; prints the run id')
    .requiredOption('--version <n>', 'version')
    .action(async (id: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const e = await startExecution(rt.ctx, await actingPrincipal(rt), id, parseIntOption('--version', o.version, { min: 1 }) as number);
        output(rt.opts, executionView(e), () => e.run_id);
      }),
    );
  exec
    .command('upload <run> <output>')
    .description('stream output.json, stdout.log or stderr.log of a running execution')
    .requiredOption('--file <path>', 'file, or - for stdin')
    .option('--digest <sha256>', 'expected digest')
    .action(async (run: string, name: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const { body, size } = await openInputFile(o.file, name);
        const rec = await uploadOutput(rt.ctx, await actingPrincipal(rt), run, name, body, {
          size,
          ...(o.digest ? { expectedDigest: parseDigest(o.digest) } : {}),
        });
        output(rt.opts, rec, () => `${rec.key} ${rec.digest} ${rec.size} bytes`);
      }),
    );
  exec
    .command('finish <run>')
    .description('EXECUTING → EXECUTED (SUCCEEDED) or FAILED')
    .requiredOption('--status <status>', 'SUCCEEDED | FAILED')
    .requiredOption('--exit-code <n>', 'the process exit code')
    .action(async (run: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        if (!/^-?\d+$/.test(o.exitCode)) throw new UsageError('--exit-code must be an integer');
        const e = await finishExecution(rt.ctx, await actingPrincipal(rt), run, {
          status: String(o.status).toUpperCase(),
          exitCode: Number(o.exitCode),
        });
        output(rt.opts, executionView(e), () => `run ${e.run_id} ${e.status} (exit ${String(e.exit_code)})`);
      }),
    );
  exec
    .command('show <run>')
    .description('an execution and its outputs')
    .action(async (run: string, _o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const e = executionView(await readExecution(rt.ctx, run));
        output(rt.opts, e, () => JSON.stringify(e, null, 2));
      }),
    );

  program
    .command('compensate <id>')
    .description('create the compensation (rollback) artifact of an EXECUTED or FAILED version')
    .requiredOption('--version <n>', 'the version to compensate')
    .requiredOption('--file <path>', 'rollback content, or - for stdin')
    .option('--filename <filename>', 'filename (stored as rollback-{filename})')
    .option('--reason <text>', 'why')
    .action(async (id: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const { body, filename, size } = await openInputFile(o.file, o.filename);
        const r = await compensate(rt.ctx, await actingPrincipal(rt), id, parseIntOption('--version', o.version, { min: 1 }) as number, {
          filename,
          body,
          size,
          reason: o.reason,
        });
        output(
          rt.opts,
          { compensation: headView(r.compensation), version: versionView(r.version), compensated: versionView(r.compensated) },
          () => [
            `compensation artifact ${r.compensation.artifact_id} (${r.version.content_key})`,
            `${id} v${r.compensated.version} is ${r.compensated.state}`,
          ],
        );
      }),
    );
}
