/**
 * `alp start` in a child process for the long campaigns (scripts/fuzz-http.ts, scripts/soak.ts): its
 * own working directory and environment, loopback only, a free port; resolves with the status line it
 * prints (URL, bootstrap tokens). Also: the resident memory of a process, and a CLI run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const root = path.resolve(import.meta.dirname, '..');
const tsx = import.meta.resolve('tsx');
const MAIN = path.join(root, 'src/cli/main.ts');

export interface AlpServer {
  child: ChildProcess;
  pid: number;
  url: string;
  status: { url: string; installation_id: string; tokens: Array<{ principal: string; kind: string; token: string }> };
  stdout(): string;
  stderr(): string;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const cleanEnv = (env: Record<string, string>) =>
  ({
    ...process.env,
    ALP_TOKEN: undefined,
    ALP_DATA: undefined,
    ALP_NOW: undefined,
    ALP_METADATA: undefined,
    ALP_CONTENT: undefined,
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    ...env,
  }) as NodeJS.ProcessEnv;

export async function startAlpServer(opts: { args: string[]; cwd: string; env?: Record<string, string> }): Promise<AlpServer> {
  const child = spawn(process.execPath, ['--import', tsx, MAIN, 'start', '--host', '127.0.0.1', '--port', '0', '--json', ...opts.args], {
    cwd: opts.cwd,
    env: cleanEnv(opts.env ?? {}),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  let out = '';
  let err = '';
  child.stdout?.on('data', (b: Buffer) => {
    out += b.toString('utf8');
  });
  child.stderr?.on('data', (b: Buffer) => {
    err += b.toString('utf8');
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      process.off('exit', kill);
      resolve({ code, signal });
    }),
  );
  const status = await new Promise<AlpServer['status']>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`alp start did not report within 60 s:\n${out}\n${err}`)), 60_000);
    const look = () => {
      for (const line of out.split('\n')) {
        if (!line.startsWith('{"installation_id"') && !line.includes('"url"')) continue;
        try {
          const doc = JSON.parse(line) as AlpServer['status'];
          if (doc.installation_id && doc.url) {
            clearTimeout(timer);
            child.stdout?.off('data', look);
            resolve(doc);
            return;
          }
        } catch {
          // a partial line
        }
      }
    };
    child.stdout?.on('data', look);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`alp start exited (${code ?? signal}) before serving:\n${out}\n${err}`));
    });
  });
  return {
    child,
    pid: child.pid as number,
    url: status.url,
    status,
    stdout: () => out,
    stderr: () => err,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Runs the CLI to its end; resolves with its exit code and output. */
export function runCliProcess(
  args: string[],
  opts: { cwd: string; env?: Record<string, string> },
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', tsx, MAIN, ...args], {
      cwd: opts.cwd,
      env: cleanEnv(opts.env ?? {}),
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
