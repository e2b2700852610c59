/**
 * Where a command's calls go, chosen once from the global options: a server selected by `--server`,
 * ALP_URL or a profile (remote.ts) makes them HTTP requests (backend-remote.ts), else they are the
 * services over the installation the storage options name (backend-local.ts, through withRuntime and
 * its access check). The command handler gets a Backend and never asks which.
 */
import type { Command } from 'commander';
import type { Backend } from './backend.ts';
import { localBackend } from './backend-local.ts';
import { remoteBackend } from './backend-remote.ts';
import { type GlobalOptions, globals } from './options.ts';
import { assertRemoteUsable, remoteTarget } from './remote.ts';
import { withRuntime } from './runtime.ts';

export async function withBackend<T>(cmd: Command, fn: (backend: Backend, opts: GlobalOptions) => Promise<T>): Promise<T> {
  const target = await remoteTarget(cmd);
  if (!target) return withRuntime(cmd, (rt) => fn(localBackend(rt), rt.opts));
  assertRemoteUsable(cmd, target);
  return fn(remoteBackend(target), globals(cmd));
}
