/**
 * What every CLI command needs: the storage named by the global options, the acting caller (checked
 * against the shared access table for every command), the clock (ALP_NOW, for a caller allowed to
 * set it), and output in the two forms (human lines, or one JSON document with --json).
 */
import type { Command } from 'commander';
import { problemTypeUri } from '../api/problem.ts';
import { type Clock, FixedClock, systemClock } from '../core/clock.ts';
import { resolveStorageConfig, type StorageConfig } from '../core/config.ts';
import { type AlpError, Forbidden, InternalError, UsageError } from '../core/errors.ts';
import { redactTokens } from '../core/ids.ts';
import { escapeForDisplay } from '../core/object-keys.ts';
import { assertMay, type Caller, mayPerform } from '../lifecycle/access.ts';
import type { Principal } from '../lifecycle/model.ts';
import { localOperator, resolveToken } from '../lifecycle/principals.ts';
import { openInstallation } from '../runtime/open.ts';
import type { ServiceContext } from '../system/context.ts';
import { createsInstallation, operationOf } from './operations.ts';
import { type GlobalOptions, globals } from './options.ts';
import { localOnly, remoteTarget } from './remote.ts';

export { type GlobalOptions, globals };

let warnedClock = false;

/** ALP_NOW as a fixed instant, or undefined when unset; a malformed value is a usage error. */
export function fixedNow(env: NodeJS.ProcessEnv = process.env): Date | undefined {
  const fixed = env.ALP_NOW;
  if (!fixed) return undefined;
  const at = new Date(fixed);
  if (Number.isNaN(at.getTime())) throw new UsageError(`ALP_NOW is not an ISO time: ${JSON.stringify(fixed)}`);
  return at;
}

/** The process clock: the system clock, or a fixed instant from ALP_NOW (with a warning every run). */
export function cliClock(env: NodeJS.ProcessEnv = process.env): Clock {
  const at = fixedNow(env);
  if (!at) return systemClock;
  if (!warnedClock) {
    process.stderr.write(`alp: warning: ALP_NOW is set; the clock reads ${at.toISOString()}\n`);
    warnedClock = true;
  }
  return new FixedClock(at);
}

/**
 * The clock a runtime is opened with, chosen once the caller is known (ALP_NOW is honoured only for
 * a caller allowed to set the clock). Reading it before then is a bug: nothing may depend on time
 * before the caller is authorised.
 */
class ChosenClock implements Clock {
  private chosen: Clock | undefined;
  choose(clock: Clock): void {
    this.chosen = clock;
  }
  now(): Date {
    if (!this.chosen) throw new InternalError('the CLI clock was read before the caller was authorised');
    return this.chosen.now();
  }
}

export interface Runtime {
  ctx: ServiceContext;
  config: StorageConfig;
  opts: GlobalOptions;
  /** Who runs the command: the local operator (no token) or the token's principal. */
  caller: Caller;
  close(): Promise<void>;
}

/** The caller: the token's principal (UNAUTHENTICATED when unknown), else the local operator. */
async function resolveCaller(ctx: ServiceContext, opts: GlobalOptions): Promise<Caller> {
  const token = opts.token ?? process.env.ALP_TOKEN;
  if (token) return { principal: await resolveToken(ctx, token), operator: false };
  return { principal: localOperator(), operator: true };
}

/**
 * Opens the installation and authorises the command against the shared access table: the command's
 * operation for the caller, and ALP_NOW (setClock) when it is set. Refused (exit 2) when a server is
 * selected: this command has no HTTP form.
 */
export async function openRuntime(cmd: Command): Promise<Runtime> {
  const opts = globals(cmd);
  // A server selected (--server, ALP_URL, a profile) reaches only the commands that go through
  // withBackend (session.ts); a command opening the installation itself runs where the storage is.
  const target = await remoteTarget(cmd);
  if (target) throw localOnly(cmd, target);
  const config = resolveStorageConfig(opts);
  const at = fixedNow();
  const clock = new ChosenClock();
  // Only the commands that create an installation (init, start, restore) may find none; every other
  // command refuses with NOT_FOUND instead of creating ./alp-data where it happens to run.
  const { ctx, close } = await openInstallation(config, clock, {
    ifMissing: createsInstallation(cmd) ? 'create' : 'refuse',
    warn: (message) => process.stderr.write(`alp: warning: ${oneLine(message)}\n`),
  });
  try {
    const caller = await resolveCaller(ctx, opts);
    assertMay(operationOf(cmd), caller);
    if (at && !mayPerform('setClock', caller)) {
      throw new Forbidden(
        `ALP_NOW may be set only by the local operator (no token) or a human token; ${caller.principal.id} is ${caller.principal.kind}`,
        { principal: caller.principal.id, kind: caller.principal.kind, operation: 'setClock' },
      );
    }
    clock.choose(cliClock());
    return { ctx, config, opts, caller, close };
  } catch (e) {
    await close();
    throw e;
  }
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
  return rt.caller.principal;
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

/**
 * The one line an error is printed as on stderr: `alp: {CODE}: {message}`, or with --json one JSON
 * document `{"error":{code, title, type, message, exit_code, details?}}` (the fields of the API's
 * problem+json where they apply: `type` is the same URN, `message` its `detail`). Tokens are redacted
 * and characters that could steer a terminal are escaped either way.
 */
export function errorLine(err: AlpError, json: boolean): string {
  if (!json) return `alp: ${err.code}: ${redactTokens(oneLine(err.message))}\n`;
  const error = {
    code: err.code,
    title: err.title,
    type: problemTypeUri(err.code),
    message: err.message,
    exit_code: err.exitCode,
    ...(err.details && err.code !== 'INTERNAL' ? { details: err.details } : {}),
  };
  let text: string;
  try {
    text = JSON.stringify({ error });
  } catch {
    text = JSON.stringify({ error: { ...error, details: undefined } });
  }
  return `${redactTokens(escapeJsonForDisplay(text))}\n`;
}

/** One line on a terminal: line breaks folded, anything that could steer the display escaped. */
export function oneLine(s: string): string {
  return escapeForDisplay(s.replace(/\s*\n\s*/g, ' '));
}

/** A JSON text with every character a terminal would act on written as a JSON \u escape (still the same JSON). */
function escapeJsonForDisplay(text: string): string {
  return text.replace(/[^\x20-\x7e]/gu, (c) =>
    escapeForDisplay(c) === c
      ? c
      : Array.from({ length: c.length }, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''),
  );
}
