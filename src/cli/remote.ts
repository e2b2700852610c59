/**
 * Whether a command talks to a server (the remote CLI, issue 19 A3) or opens the installation itself,
 * decided once from the global options:
 *
 * - `--server URL` or ALP_URL names the server; else `--profile NAME` or ALP_PROFILE names a profile of
 *   the config file (profiles.ts) that gives it;
 * - the token is `--token` / ALP_TOKEN, else the profile's (only when the server is the profile's).
 *
 * Only the commands of REMOTE_COMMANDS (operations.ts) go remote; every other one (backup, restore,
 * retention, epoch, tokens…) has no HTTP route and is refused when a server is selected, with a usage
 * error saying it runs only where the storage is.
 */
import type { Command } from 'commander';
import { UsageError } from '../core/errors.ts';
import { commandPath, isRemoteCommand } from './operations.ts';
import { globals } from './options.ts';
import { checkServerUrl, configPath, readProfile } from './profiles.ts';

export interface RemoteTarget {
  url: string;
  token: string | undefined;
  /** Where the server came from, as the user gave it: `--server`, `ALP_URL`, `profile NAME`. */
  via: string;
}

/** The server the command line selects, if any. */
export async function remoteTarget(cmd: Command, env: NodeJS.ProcessEnv = process.env): Promise<RemoteTarget | undefined> {
  const opts = globals(cmd);
  // An empty value is no value: `ALP_URL= alp backup` runs locally.
  const profileName = opts.profile || env.ALP_PROFILE || undefined;
  const profile = profileName === undefined ? undefined : await readProfile(profileName, configPath(env));
  const server = opts.server || env.ALP_URL || undefined;
  if (server === undefined && !profile) return undefined;
  const via =
    server !== undefined
      ? cmd.getOptionValueSourceWithGlobals('server') === 'cli'
        ? '--server'
        : 'ALP_URL'
      : `profile ${profileName} (${configPath(env)})`;
  const url = checkServerUrl(server ?? (profile?.server as string), via);
  // A profile's token goes only to the profile's own server, never to another one given beside it.
  const profileToken = profile && checkServerUrl(profile.server, via) === url ? profile.token : undefined;
  return { url, token: opts.token || env.ALP_TOKEN || profileToken || undefined, via };
}

/**
 * The remote CLI's preconditions: the command has an HTTP form, no local storage option is given
 * beside the server, and ALP_NOW (which moves only a local installation's clock) is not set.
 */
export function assertRemoteUsable(cmd: Command, target: RemoteTarget, env: NodeJS.ProcessEnv = process.env): void {
  if (!isRemoteCommand(cmd)) throw localOnly(cmd, target);
  const local = (['data', 'metadata', 'content'] as const).filter((o) => cmd.getOptionValueSourceWithGlobals(o) === 'cli');
  if (local.length > 0) {
    throw new UsageError(
      `${local.map((o) => `--${o}`).join(', ')} names a local installation and ${target.via} a server: give one or the other`,
    );
  }
  if (env.ALP_NOW) {
    throw new UsageError(`ALP_NOW moves the clock of a local installation only; the server (${target.via}) keeps its own: unset it`);
  }
}

/** The refusal of a command that runs only where the storage is. */
export function localOnly(cmd: Command, target: RemoteTarget): UsageError {
  const name = commandPath(cmd) || 'alp';
  const unset =
    target.via === '--server' ? 'drop --server' : target.via === 'ALP_URL' ? 'unset ALP_URL' : 'drop --profile / unset ALP_PROFILE';
  return new UsageError(
    `alp ${name} is an operator command: it runs only on the installation's host, never over HTTP (it was given a server by ${target.via}); ${unset} and run it where the storage is, with --data or --metadata/--content`,
    { command: name, server_from: target.via, reason: 'LOCAL_ONLY' },
  );
}
