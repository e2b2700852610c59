import type { Command } from 'commander';
import { parseDigest } from '../../core/digest.ts';
import { UsageError } from '../../core/errors.ts';
import { headView, showArtifact } from '../../lifecycle/artifacts.ts';
import { compensate } from '../../lifecycle/compensation.ts';
import { executionView, finishExecution, readExecution, startExecution, uploadOutput } from '../../lifecycle/executions.ts';
import { versionView } from '../../lifecycle/versions.ts';
import { type ExecRunLifecycle, execRun } from '../exec-run.ts';
import { openInputFile } from '../files.ts';
import { actingPrincipal, output, parseIntOption, type Runtime, withRuntime } from '../runtime.ts';

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
    .option('--signal <name>', 'the signal that ended the command (SIGKILL…; status FAILED)')
    .action(async (run: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        if (!/^-?\d+$/.test(o.exitCode)) throw new UsageError('--exit-code must be an integer');
        const e = await finishExecution(rt.ctx, await actingPrincipal(rt), run, {
          status: String(o.status).toUpperCase(),
          exitCode: Number(o.exitCode),
          ...(o.signal !== undefined ? { signal: String(o.signal) } : {}),
        });
        output(rt.opts, executionView(e), () => `run ${e.run_id} ${e.status} (exit ${String(e.exit_code)})`);
      }),
    );
  exec
    .command('run <id> <command...>')
    .description('start a run of the APPROVED version, run the command (after --), record its logs and outcome; exits with its exit code')
    .option('--version <n>', 'version (default: the APPROVED one)')
    .option('--output-json <file>', 'once the command exited, record this file as the run’s output.json')
    .action(async (id: string, command: string[], o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const json = rt.opts.json === true;
        const r = await execRun(await localLifecycle(rt), {
          artifactId: id,
          version: parseIntOption('--version', o.version, { min: 1 }),
          outputJson: o.outputJson,
          command,
          // With --json stdout is the one result document: the command's output is echoed on stderr.
          echo: { stdout: json ? process.stderr : process.stdout, stderr: process.stderr },
          note: (line) => process.stderr.write(`alp exec run: ${line}\n`),
        });
        const e = r.execution;
        output(rt.opts, e, () => []);
        if (!json) process.stderr.write(`alp exec run: run ${String(e.run_id)} ${String(e.status)} (exit ${String(e.exit_code)})\n`);
        // The run is recorded: an output that could not be is this command's error, else it exits as the command did.
        if (r.uploadErrors[0]) throw r.uploadErrors[0];
        process.exitCode = r.outcome.exitCode;
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

  registerCompensate(program);
}

/** What `exec run` does to the lifecycle, on this installation: what exec start, upload and finish call. */
async function localLifecycle(rt: Runtime): Promise<ExecRunLifecycle> {
  const actor = await actingPrincipal(rt);
  return {
    chooseVersion: async (id) => {
      const { versions } = await showArtifact(rt.ctx, id);
      const v = versions.findLast((x) => x.state === 'APPROVED') ?? versions.at(-1);
      if (!v) throw new UsageError(`artifact ${id} has no versions`);
      return { version: v.version, state: v.state };
    },
    start: async (id, version) => (await startExecution(rt.ctx, actor, id, version)).run_id,
    upload: async (run, name, file) => {
      const { body, size } = await openInputFile(file, name);
      await uploadOutput(rt.ctx, actor, run, name, body, { size });
    },
    finish: async (run, outcome) => executionView(await finishExecution(rt.ctx, actor, run, outcome)),
  };
}

function registerCompensate(program: Command): void {
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
