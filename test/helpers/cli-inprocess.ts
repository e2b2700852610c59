/**
 * The CLI in this process: the same entry function the `alp` binary runs (src/cli/run.ts), with what
 * it writes captured per run. stdout and stderr are patched once (patchCliOutput); a write made inside
 * a run (its async context) goes to that run's buffers, and the test runner's own output passes through.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { runCli } from '../../src/cli/run.ts';

export interface Captured {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

/**
 * What the CLI writes is captured per run: stdout and stderr are patched once, and a write made inside
 * a run (its async context) goes to that run's buffers; the test runner's own output passes through.
 */
const sinks = new AsyncLocalStorage<{ out: string[]; err: string[] }>();
function patchStream(stream: NodeJS.WriteStream, pick: (s: { out: string[]; err: string[] }) => string[]): () => void {
  const real = stream.write;
  stream.write = function (this: NodeJS.WriteStream, chunk: string | Uint8Array, ...rest: unknown[]) {
    const store = sinks.getStore();
    if (!store) return (real as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
    pick(store).push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    const cb = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
    cb?.();
    return true;
  } as typeof stream.write;
  return () => {
    stream.write = real;
  };
}

/** Runs the CLI in this process, capturing what it writes. */
export async function captureCli(args: string[]): Promise<Captured> {
  const store = { out: [] as string[], err: [] as string[] };
  process.exitCode = undefined;
  const started = performance.now();
  let code: number;
  try {
    code = await sinks.run(store, () => runCli(['node', 'alp', ...args]));
  } finally {
    process.exitCode = undefined;
  }
  return { code, stdout: store.out.join(''), stderr: store.err.join(''), ms: performance.now() - started };
}

/** Routes CLI output to the running capture; returns the function that restores the streams. */
export function patchCliOutput(): () => void {
  const undo = [patchStream(process.stdout, (s) => s.out), patchStream(process.stderr, (s) => s.err)];
  return () => {
    for (const u of undo) u();
  };
}

/**
 * The variables through which a developer's shell could point an in-process CLI run elsewhere (another
 * installation, a server, a profile, a fixed clock).
 */
const CLI_ENV = ['ALP_TOKEN', 'ALP_DATA', 'ALP_NOW', 'ALP_METADATA', 'ALP_CONTENT', 'ALP_URL', 'ALP_PROFILE', 'ALP_CONFIG'];

/** Unsets them for a suite's in-process runs; the function returned puts them back as they were. */
export function clearCliEnv(): () => void {
  const saved = new Map(CLI_ENV.map((k) => [k, process.env[k]]));
  for (const k of CLI_ENV) delete process.env[k];
  return () => {
    for (const [k, v] of saved)
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  };
}
