import { spawn } from 'node:child_process';
import path from 'node:path';
import { alpFromSource } from './cli-bundle.ts';

const root = path.resolve(import.meta.dirname, '../..');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the CLI from source in a child process (a real process: exit codes, stdout, stderr); the source
 * is bundled once per test process (test/helpers/cli-bundle.ts).
 */
export function runAlp(
  args: string[],
  opts: {
    cwd?: string;
    env?: Record<string, string | undefined>;
    input?: string | Buffer;
    /** The node arguments that run the CLI (default: this checkout's, bundled: alpFromSource). */
    cli?: string[];
  } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...(opts.cli ?? alpFromSource()), ...args], {
      cwd: opts.cwd ?? root,
      // The remote CLI's variables too: a developer's ALP_URL or ALP_PROFILE would send every local test to a server.
      env: {
        ...process.env,
        ALP_TOKEN: undefined,
        ALP_DATA: undefined,
        ALP_NOW: undefined,
        ALP_URL: undefined,
        ALP_PROFILE: undefined,
        ...opts.env,
      } as NodeJS.ProcessEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({ code: code ?? -1, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }),
    );
    child.stdin.end(opts.input ?? '');
  });
}

/** Runs the CLI with --json and parses stdout; fails the test with stderr when it exits non-zero. */
export async function alpJson<T = Record<string, unknown>>(args: string[], opts: Parameters<typeof runAlp>[1] = {}): Promise<T> {
  const r = await runAlp([...args, '--json'], opts);
  if (r.code !== 0) throw new Error(`alp ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

/**
 * The error a CLI run printed, as the text line `alp: CODE: message` whether it ran with `--json` (one
 * JSON line `{"error":{…}}` on stderr) or without (that text line itself); stderr as is otherwise.
 */
export function cliErrorText(stderr: string): string {
  for (const line of stderr.split('\n')) {
    if (!line.startsWith('{"error":')) continue;
    const { error } = JSON.parse(line) as { error: { code: string; message: string } };
    return `alp: ${error.code}: ${error.message}`;
  }
  return stderr;
}
