/** The program's global options (program.ts), as every command reads them. */
import type { Command } from 'commander';

export interface GlobalOptions {
  data?: string;
  metadata?: string;
  content?: string;
  json?: boolean;
  token?: string;
  /** An `alp serve` to talk to over HTTP (`--server`, ALP_URL): the remote CLI (remote.ts). */
  server?: string;
  /** A profile of the config file (`--profile`, ALP_PROFILE): a server and its token (profiles.ts). */
  profile?: string;
}

export function globals(cmd: Command): GlobalOptions {
  return cmd.optsWithGlobals() as GlobalOptions;
}
