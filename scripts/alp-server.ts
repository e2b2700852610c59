/**
 * `alp start` in a child process for the long campaigns (scripts/fuzz-http.ts, scripts/soak.ts): its
 * own working directory and environment, loopback only, a free port; resolves with the status line it
 * prints (URL, bootstrap tokens). Also: the resident memory of a process, and a CLI run.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { ALP_FROM_SOURCE, type AlpProcessHandle, cleanAlpEnv, repoRoot, startAlpProcess } from '../test/helpers/alp-process.ts';

export const root = repoRoot;
export type AlpServer = AlpProcessHandle;

export function startAlpServer(opts: { args: string[]; cwd: string; env?: Record<string, string> }): Promise<AlpServer> {
  return startAlpProcess(opts);
}

/** Runs the CLI to its end; resolves with its exit code and output. */
export function runCliProcess(
  args: string[],
  opts: { cwd: string; env?: Record<string, string> },
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...ALP_FROM_SOURCE, ...args], {
      cwd: opts.cwd,
      env: cleanAlpEnv(opts.env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString('utf8');
    });
    child.stderr.on('data', (b: Buffer) => {
      err += b.toString('utf8');
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout: out, stderr: err }));
  });
}

/** Resident set size of a process, in bytes (Linux /proc). */
export function rssBytes(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  if (!kb) throw new Error(`no VmRSS for ${pid}`);
  return Number(kb) * 1024;
}

/** Samples a process's RSS every `everyMs`; stop() returns the samples (ms since start, bytes). */
export function sampleRss(pid: number, everyMs: number): { samples: Array<[number, number]>; stop(): Array<[number, number]> } {
  const started = performance.now();
  const samples: Array<[number, number]> = [];
  const take = () => {
    try {
      samples.push([performance.now() - started, rssBytes(pid)]);
    } catch {
      // the process ended
    }
  };
  take();
  const timer = setInterval(take, everyMs);
  timer.unref();
  return {
    samples,
    stop() {
      clearInterval(timer);
      take();
      return samples;
    },
  };
}

/** Parses `--name value` flags (and `--name=value`) into a map. */
export function flags(argv: string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (!a.startsWith('--')) continue;
    const eq = a.indexOf('=');
    if (eq > 0) out.set(a.slice(2, eq), a.slice(eq + 1));
    else if (i + 1 < argv.length && !(argv[i + 1] as string).startsWith('--')) out.set(a.slice(2), argv[++i] as string);
    else out.set(a.slice(2), 'true');
  }
  return out;
}

export const MiB = 1024 * 1024;
export const mib = (b: number) => (b / MiB).toFixed(1);

/** Runs a campaign's main: its result is the exit code; a throw prints and exits 1. */
export function runMain(main: () => Promise<number>): void {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
