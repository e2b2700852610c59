import type { Command } from 'commander';
import type * as T from '../../client/types.ts';
import { parseDigest } from '../../core/digest.ts';
import { UsageError } from '../../core/errors.ts';
import type { Backend } from '../backend.ts';
import { type ExecRunLifecycle, execRun } from '../exec-run.ts';
import { output, parseIntOption } from '../runtime.ts';
import { withBackend } from '../session.ts';
import { type ChosenVersion, chooseVersion, outputChosen, resolveArtifactRef } from '../targets.ts';

export function registerExecCommands(program: Command): void {
  const exec = program.command('exec').description('executions: start, upload outputs, finish');
  exec
    .command('start <id>')
    .description('APPROVED → EXECUTING; re-checks the approvals; prints the run id')
    .option('--version <n>', 'version or @alias (default: the APPROVED one, else the latest)')
    .action(async (ref: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = await resolveArtifactRef(b, ref);
        const choice = await chooseVersion(b, id, o.version, 'approved');
        const e = await b.startExecution(id, choice.version);
        outputChosen(opts, id, choice, e, () => e.run_id);
      }),
    );
  exec
    .command('upload <run> <output>')
    .description('stream output.json, stdout.log or stderr.log of a running execution')
    .requiredOption('--file <path>', 'file, or - for stdin')
    .option('--digest <sha256>', 'expected digest')
    .action(async (run: string, name: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const rec = await b.uploadOutput(run, name, { file: o.file, filename: name, digest: o.digest ? parseDigest(o.digest) : undefined });
        output(opts, rec, () => `${rec.key} ${rec.digest} ${rec.size} bytes`);
      }),
    );
  exec
    .command('finish <run>')
    .description('EXECUTING → EXECUTED (SUCCEEDED) or FAILED')
    .requiredOption('--status <status>', 'SUCCEEDED | FAILED')
    .requiredOption('--exit-code <n>', 'the process exit code')
    .option('--signal <name>', 'the signal that ended the command (SIGKILL…; status FAILED)')
    .action(async (run: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        if (!/^-?\d+$/.test(o.exitCode)) throw new UsageError('--exit-code must be an integer');
        const e = await b.finishExecution(run, {
          status: String(o.status).toUpperCase(),
          exitCode: Number(o.exitCode),
          signal: o.signal !== undefined ? String(o.signal) : undefined,
        });
        output(opts, e, () => `run ${e.run_id} ${e.status} (exit ${String(e.exit_code)})`);
      }),
    );
  exec
    .command('run <id> <command...>')
    .description('start a run of the APPROVED version, run the command (after --), record its logs and outcome; exits with its exit code')
    .option('--version <n>', 'version or @alias (default: the APPROVED one)')
    .option('--output-json <file>', 'once the command exited, record this file as the run’s output.json')
    .action(async (ref: string, command: string[], o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const json = opts.json === true;
        const id = await resolveArtifactRef(b, ref);
        const lifecycle = runLifecycle(b);
        const r = await execRun(lifecycle, {
          artifactId: id,
          version: parseIntOption('--version', o.version, { min: 1 }),
          outputJson: o.outputJson,
          command,
          // With --json stdout is the one result document: the command's output is echoed on stderr.
          echo: { stdout: json ? process.stderr : process.stdout, stderr: process.stderr },
          note: (line) => process.stderr.write(`alp exec run: ${line}\n`),
        });
        const e = r.execution;
        output(opts, lifecycle.chosen ? { ...e, chosen_version: lifecycle.chosen } : e, () => []);
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
      withBackend(cmd, async (b, opts) => {
        const e = await b.showExecution(run);
        output(opts, e, () => executionText(e));
      }),
    );

  registerCompensate(program);
}

/**
 * What `exec run` does to the lifecycle — what exec start, upload and finish call — on whichever
 * backend the command has (the installation, or a server over HTTP); `chosen` is the version it chose
 * when --version was not given (exec run's own note says which).
 */
function runLifecycle(b: Backend): ExecRunLifecycle & { chosen?: ChosenVersion } {
  const lifecycle: ExecRunLifecycle & { chosen?: ChosenVersion } = {
    chooseVersion: async (id) => {
      const { version, chosen } = await chooseVersion(b, id, undefined, 'approved');
      if (chosen) lifecycle.chosen = chosen;
      return { version, state: chosen?.state ?? 'APPROVED' };
    },
    start: async (id, version) => (await b.startExecution(id, version)).run_id,
    upload: async (run, name, file) => {
      await b.uploadOutput(run, name, { file, filename: name });
    },
    finish: async (run, outcome) => b.finishExecution(run, outcome),
  };
  return lifecycle;
}

/** `exec show` without --json: the run's facts, one per line, then its outputs (logs with their sizes). */
function executionText(e: T.Execution): string[] {
  const outputs = (e.outputs ?? {}) as Record<string, { key: string; digest: string; size: number }>;
  const by = (e.started_by as { id?: string } | undefined)?.id ?? '?';
  const names = Object.keys(outputs).sort();
  const inProgress = (e.uploads_in_progress as string[] | undefined) ?? [];
  return [
    `run ${String(e.run_id)}  ${String(e.status)}`,
    `  artifact:  ${String(e.artifact_id)} v${String(e.version)} (${String(e.content_hash)})`,
    `  exit code: ${e.exit_code === undefined ? '-' : String(e.exit_code)}${e.signal ? `  signal: ${String(e.signal)}` : ''}`,
    `  started:   ${String(e.started_at)} by ${by}`,
    `  finished:  ${e.finished_at ? String(e.finished_at) : '- (running)'}`,
    `  outputs:${names.length ? '' : '   none'}`,
    ...names.map((n) => `    ${n.padEnd(12)} ${String(outputs[n]?.size).padStart(10)} bytes  ${String(outputs[n]?.digest)}`),
    ...(inProgress.length ? [`  uploading: ${inProgress.join(', ')}`] : []),
  ];
}

function registerCompensate(program: Command): void {
  program
    .command('compensate <id>')
    .description('create the compensation (rollback) artifact of an EXECUTED or FAILED version')
    .option('--version <n>', 'the version to compensate, or @alias (default: the latest EXECUTED or FAILED one)')
    .requiredOption('--file <path>', 'rollback content, or - for stdin')
    .option('--filename <filename>', 'filename (stored as rollback-{filename})')
    .option('--reason <text>', 'why')
    .action(async (ref: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = await resolveArtifactRef(b, ref);
        const choice = await chooseVersion(b, id, o.version, 'executed');
        const r = await b.compensate(id, choice.version, { file: o.file, filename: o.filename, reason: o.reason });
        outputChosen(opts, id, choice, r, () => [
          `compensation artifact ${r.compensation.artifact_id} (${r.version.content_key})`,
          `${id} v${r.compensated.version} is ${r.compensated.state}`,
        ]);
      }),
    );
}
