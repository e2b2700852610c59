/**
 * `alp start` (what `npm start` runs) in a child process on 127.0.0.1 with a free port, for tests that
 * need the server in its own process (memory sampling, signals). Resolves once it prints its status.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');
const tsx = import.meta.resolve('tsx');
const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

export interface ServerProcess {
  child: ChildProcess;
  pid: number;
  url: string;
  /** The status line `alp start --json` printed. */
  status: { created: boolean; url: string; tokens: Array<{ principal: string; kind: string; token: string }>; installation_id: string };
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or signal) when the process ends. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export async function startServerProcess(data: string, args: string[] = [], env: Record<string, string> = {}): Promise<ServerProcess> {
  const child = spawn(
    process.execPath,
    ['--import', tsx, path.join(root, 'src/cli/main.ts'), 'start', '--data', data, '--port', '0', '--json', ...args],
    {
      cwd: root,
      env: { ...process.env, ALP_TOKEN: undefined, ALP_DATA: undefined, ALP_NOW: undefined, ...env } as NodeJS.ProcessEnv,
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
  const status = await new Promise<ServerProcess['status']>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`alp start did not report within 30 s:\n${out}\n${err}`)), 30_000);
    const look = () => {
      for (const line of out.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const doc = JSON.parse(line) as ServerProcess['status'] & { msg?: string };
          if (doc.installation_id && 'url' in doc) {
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
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
