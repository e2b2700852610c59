/**
 * `alp start --json` in a child process: loopback, a free port, a clean ALP environment. Resolves with
 * the status line it prints (URL, installation, bootstrap tokens of a new installation). Shared by the
 * tests that need the server in its own process (memory, signals, the browser) and the long campaigns
 * (scripts/fuzz-http.ts, scripts/soak.ts).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';

export const repoRoot = path.resolve(import.meta.dirname, '../..');
const tsx = import.meta.resolve('tsx');
/** The CLI from source (through tsx), or the build `npm start` runs. */
export const ALP_FROM_SOURCE = ['--import', tsx, path.join(repoRoot, 'src/cli/main.ts')];
export const ALP_BUILT = [path.join(repoRoot, 'dist/cli/main.js')];

const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

export interface AlpStatus {
  created?: boolean;
  url: string;
  installation_id: string;
  tokens: Array<{ principal: string; kind: string; token: string }>;
}

export interface AlpProcessHandle {
  child: ChildProcess;
  pid: number;
  url: string;
  status: AlpStatus;
  /** The status line itself (it shows new tokens, once). */
  statusLine: string;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or signal) when the process ends. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** The environment a child `alp` gets: this one without ALP's own variables, plus `env`. */
export function cleanAlpEnv(env: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    ALP_TOKEN: undefined,
    ALP_DATA: undefined,
    ALP_NOW: undefined,
    ALP_METADATA: undefined,
    ALP_CONTENT: undefined,
    ALP_URL: undefined,
    ALP_PROFILE: undefined,
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    ...env,
  } as NodeJS.ProcessEnv;
}

export async function startAlpProcess(opts: {
  args: string[];
  cwd?: string;
  env?: Record<string, string>;
  alp?: string[];
  timeoutMs?: number;
}): Promise<AlpProcessHandle> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const child = spawn(
    process.execPath,
    [...(opts.alp ?? ALP_FROM_SOURCE), 'start', '--host', '127.0.0.1', '--port', '0', '--json', ...opts.args],
    {
      cwd: opts.cwd ?? repoRoot,
      env: cleanAlpEnv(opts.env),
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  running.add(child);
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
      running.delete(child);
      resolve({ code, signal });
    }),
  );
  let statusLine = '';
  const status = await new Promise<AlpStatus>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`alp start did not report within ${timeoutMs / 1000} s:\n${out}\n${err}`)), timeoutMs);
    const look = () => {
      for (const line of out.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const doc = JSON.parse(line) as AlpStatus;
          if (doc.installation_id && doc.url) {
            statusLine = line;
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
    statusLine,
    stdout: () => out,
    stderr: () => err,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
