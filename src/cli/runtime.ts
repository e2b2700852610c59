/**
 * What every CLI command needs: the storage named by the global options, the clock (ALP_NOW), the
 * acting principal, and output in the two forms (human lines, or one JSON document with --json).
 */
import type { Command } from 'commander';
import { type Clock, FixedClock, systemClock } from '../core/clock.ts';
import { resolveStorageConfig, type StorageConfig } from '../core/config.ts';
import { UsageError } from '../core/errors.ts';
import type { ServiceContext } from '../lifecycle/context.ts';
import type { Principal } from '../lifecycle/model.ts';
import { localOperator, resolveToken } from '../lifecycle/principals.ts';
import { openInstallation } from '../runtime/open.ts';

export interface GlobalOptions {
  data?: string;
  metadata?: string;
  content?: string;
  json?: boolean;
  token?: string;
}

export function globals(cmd: Command): GlobalOptions {
  return cmd.optsWithGlobals() as GlobalOptions;
}

let warnedClock = false;

/** The process clock: the system clock, or a fixed instant from ALP_NOW (with a warning every run). */
export function cliClock(env: NodeJS.ProcessEnv = process.env): Clock {
  const fixed = env.ALP_NOW;
  if (!fixed) return systemClock;
  const at = new Date(fixed);
  if (Number.isNaN(at.getTime())) throw new UsageError(`ALP_NOW is not an ISO time: ${JSON.stringify(fixed)}`);
  if (!warnedClock) {
    process.stderr.write(`alp: warning: ALP_NOW is set; the clock reads ${at.toISOString()}\n`);
    warnedClock = true;
  }
  return new FixedClock(at);
}

export interface Runtime {
  ctx: ServiceContext;
  config: StorageConfig;
  opts: GlobalOptions;
  close(): Promise<void>;
}

export async function openRuntime(cmd: Command): Promise<Runtime> {
  const opts = globals(cmd);
  const config = resolveStorageConfig(opts);
  const { ctx, close } = await openInstallation(config, cliClock());
  return { ctx, config, opts, close };
}

/** Opens the runtime, runs `fn`, always closes. */
export async function withRuntime<T>(cmd: Command, fn: (rt: Runtime) => Promise<T>): Promise<T> {
  const rt = await openRuntime(cmd);
  try {
    return await fn(rt);
  } finally {
    await rt.close();
  }
}

/** The principal the CLI acts as: the token's, or the local operator (a human). */
export async function actingPrincipal(rt: Runtime): Promise<Principal> {
  const token = rt.opts.token ?? process.env.ALP_TOKEN;
  if (token) return resolveToken(rt.ctx, token);
  return localOperator();
}

/** Prints a result: the JSON document with --json, else the human rendering. */
export function output(opts: GlobalOptions, value: unknown, human: () => string | string[]): void {
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
    return;
  }
  const text = human();
  const lines = Array.isArray(text) ? text : [text];
  if (lines.length) process.stdout.write(`${lines.join('\n')}\n`);
}

export function parseIntOption(
  name: string,
  value: string | undefined,
  { min = 0, max = Number.MAX_SAFE_INTEGER } = {},
): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError(`${name} must be a whole number`);
  const n = Number(value);
  if (n < min || n > max) throw new UsageError(`${name} must be between ${min} and ${max}`);
  return n;
}
