/**
 * `alp exec run`: starts a run of an APPROVED version, runs a command under it, records its logs and
 * output.json, and finishes the run with the command's outcome. The lifecycle is reached only through
 * `ExecRunLifecycle` (the calls of `exec start | upload | finish`), so a remote CLI can supply its own.
 *
 * Memory stays bounded whatever the command writes: each of its streams goes chunk by chunk (with
 * backpressure) to a temp file and to the terminal, and the files are uploaded as streams afterwards.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { toAlpError } from '../core/errors.ts';
import type { ExecutionOutput } from '../core/object-keys.ts';

export interface ExecRunLifecycle {
  /** The version to run when none is given: the APPROVED one, else the latest (which start then refuses). */
  chooseVersion(artifactId: string): Promise<{ version: number; state: string }>;
  /** APPROVED → EXECUTING (refused unless the approvals are valid); the run id. */
  start(artifactId: string, version: number): Promise<string>;
  upload(runId: string, name: ExecutionOutput, file: string): Promise<void>;
  finish(runId: string, outcome: { status: 'SUCCEEDED' | 'FAILED'; exitCode: number; signal?: string }): Promise<Record<string, unknown>>;
}

export interface ExecRunInput {
  artifactId: string;
  version?: number | undefined;
  outputJson?: string | undefined;
  command: string[];
  /** Where the command's stdout and stderr are echoed while it runs. */
  echo: { stdout: Writable; stderr: Writable };
  /** A progress line for the person running it (never the command's own output). */
  note(line: string): void;
}

/** How the command ended. */
export interface CommandOutcome {
  exitCode: number;
  signal?: NodeJS.Signals;
  /** Set when the command could not be started at all (spawn failed). */
  spawnError?: string;
}

export interface ExecRunResult {
  execution: Record<string, unknown>;
  outcome: CommandOutcome;
  /** Outputs that could not be recorded; the run was finished regardless. */
  uploadErrors: Error[];
}

/** Why a log's temp file is incomplete, by stream. */
type LogErrors = { stdout?: string; stderr?: string };

const FORWARDED_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

export async function execRun(lifecycle: ExecRunLifecycle, input: ExecRunInput): Promise<ExecRunResult> {
  let version = input.version;
  if (version === undefined) {
    const chosen = await lifecycle.chooseVersion(input.artifactId);
    version = chosen.version;
    input.note(`version ${version} (${chosen.state === 'APPROVED' ? 'the APPROVED one' : `the latest, ${chosen.state}`})`);
  }
  const runId = await lifecycle.start(input.artifactId, version);
  input.note(`run ${runId} of ${input.artifactId} v${version}: ${input.command.join(' ')}`);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'alp-exec-run-'));
  try {
    const logs = { stdout: path.join(dir, 'stdout.log'), stderr: path.join(dir, 'stderr.log') };
    const { outcome, logErrors } = await superviseCommand(input.command, logs, input.echo);
    const why = outcomeNote(outcome);
    if (why) {
      input.note(why);
      // The run's record names a signal; the stderr log keeps why in words (the signal, the spawn error).
      if (!logErrors.stderr) await fs.appendFile(logs.stderr, `alp exec run: ${why}\n`).catch((e: Error) => (logErrors.stderr = e.message));
    }
    const uploadErrors = await uploadOutputs(lifecycle, runId, logs, logErrors, input);
    const status = outcome.exitCode === 0 ? 'SUCCEEDED' : 'FAILED';
    const execution = await lifecycle.finish(runId, {
      status,
      exitCode: outcome.exitCode,
      ...(outcome.signal ? { signal: outcome.signal } : {}),
    });
    return { execution, outcome, uploadErrors };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

function outcomeNote(o: CommandOutcome): string | undefined {
  if (o.spawnError) return `the command could not be started: ${o.spawnError} (exit code ${o.exitCode})`;
  if (o.signal) return `the command was killed by ${o.signal} (exit code ${o.exitCode})`;
  return undefined;
}

async function uploadOutputs(
  lifecycle: ExecRunLifecycle,
  runId: string,
  logs: { stdout: string; stderr: string },
  logErrors: LogErrors,
  input: ExecRunInput,
): Promise<Error[]> {
  const errors: Error[] = [];
  const upload = (name: ExecutionOutput, file: string) =>
    lifecycle.upload(runId, name, file).catch((e: unknown) => {
      const err = toAlpError(e);
      errors.push(new Error(`${name} not recorded: ${err.code}: ${err.message}`));
    });
  // A log whose temp file failed is incomplete: recording part of it as the run's log would mislead.
  for (const stream of ['stdout', 'stderr'] as const) {
    const failed = logErrors[stream];
    if (failed) errors.push(new Error(`${stream}.log not recorded: its temp file failed: ${failed}`));
    else await upload(`${stream}.log`, logs[stream]);
  }
  if (input.outputJson !== undefined) {
    const stat = await fs.stat(input.outputJson).catch(() => undefined);
    if (stat?.isFile()) await upload('output.json', input.outputJson);
    else input.note(`no output.json recorded: ${input.outputJson} ${stat ? 'is not a regular file' : 'does not exist'}`);
  }
  return errors;
}

/**
 * Runs the command to its end, its stdout and stderr copied to the two files and echoed; SIGINT,
 * SIGTERM and SIGHUP sent to this process meanwhile are forwarded to it.
 *
 * With stdin a terminal the command shares this process's terminal (it can prompt), so a Ctrl-C there
 * reaches it directly and SIGINT is not sent a second time. Otherwise it runs in its own session and
 * process group, which alone forwarding reaches: every signal arrives exactly once, to its whole group.
 */
export async function superviseCommand(
  command: string[],
  logs: { stdout: string; stderr: string },
  echo: { stdout: Writable; stderr: Writable },
): Promise<{ outcome: CommandOutcome; logErrors: LogErrors }> {
  const [file, ...args] = command as [string, ...string[]];
  const sharesTerminal = process.stdin.isTTY === true;
  const child = spawn(file, args, { stdio: ['inherit', 'pipe', 'pipe'], detached: !sharesTerminal });
  const forward = (signal: NodeJS.Signals) => {
    if (signal === 'SIGINT' && sharesTerminal) return;
    sendSignal(child, signal, !sharesTerminal);
  };
  for (const s of FORWARDED_SIGNALS) process.on(s, forward);
  try {
    const ended = childEnd(child);
    const [outcome, stdout, stderr] = await Promise.all([
      ended,
      copyStream(child.stdout as Readable, logs.stdout, echo.stdout),
      copyStream(child.stderr as Readable, logs.stderr, echo.stderr),
    ]);
    return { outcome, logErrors: { ...(stdout ? { stdout } : {}), ...(stderr ? { stderr } : {}) } };
  } finally {
    for (const s of FORWARDED_SIGNALS) process.off(s, forward);
  }
}

function sendSignal(child: ChildProcess, signal: NodeJS.Signals, group: boolean): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    if (group) process.kill(-child.pid, signal);
    else child.kill(signal);
  } catch {
    // Already gone: its end is recorded by childEnd.
  }
}

/** The command's outcome once it exited and its streams closed; a spawn failure is exit 127 or 126 (as a shell says). */
function childEnd(child: ChildProcess): Promise<CommandOutcome> {
  return new Promise((resolve) => {
    let spawnError: NodeJS.ErrnoException | undefined;
    child.on('error', (e: NodeJS.ErrnoException) => {
      spawnError ??= e;
    });
    child.on('close', (code, signal) => {
      if (spawnError && child.pid === undefined) {
        resolve({ exitCode: spawnError.code === 'ENOENT' ? 127 : 126, spawnError: spawnError.message });
      } else if (signal) {
        resolve({ exitCode: 128 + (os.constants.signals[signal] ?? 0), signal });
      } else {
        resolve({ exitCode: code ?? 1 });
      }
    });
  });
}

/**
 * Copies a stream to a new file and echoes it, one chunk at a time: the next chunk is read only once
 * both took this one, so memory holds a chunk whatever the command writes. A failed echo (a closed
 * terminal) stops the echo only; a failed file write stops the file (returned as the error) while the
 * stream is still drained, so the command is never blocked on a full pipe.
 */
async function copyStream(stream: Readable, file: string, echo: Writable): Promise<string | undefined> {
  let fileError: string | undefined;
  const fh = await fs.open(file, 'wx', 0o600).catch((e: Error) => {
    fileError = e.message;
    return undefined;
  });
  let echoing = true;
  const ignore = () => {};
  echo.on('error', ignore);
  try {
    for await (const chunk of stream) {
      const buf = chunk as Buffer;
      const toFile =
        fh && !fileError
          ? writeAll(fh, buf).catch((e: Error) => {
              fileError = e.message;
            })
          : undefined;
      const toEcho = echoing
        ? new Promise<void>((resolve) =>
            echo.write(buf, (e) => {
              echoing = !e;
              resolve();
            }),
          )
        : undefined;
      await Promise.all([toFile, toEcho]);
    }
  } finally {
    echo.off('error', ignore);
    await fh?.close().catch((e: Error) => {
      fileError ??= e.message;
    });
  }
  return fileError;
}

async function writeAll(fh: fs.FileHandle, buf: Buffer): Promise<void> {
  let offset = 0;
  while (offset < buf.length) offset += (await fh.write(buf, offset, buf.length - offset)).bytesWritten;
}
