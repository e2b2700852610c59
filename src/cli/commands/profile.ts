/**
 * `alp profile set | list | remove`: the remote CLI's config file (profiles.ts). A profile is a server
 * and its token; `--profile NAME` / ALP_PROFILE then selects both. The file is the caller's own,
 * written 0600; `list` never prints a token.
 */
import fs from 'node:fs/promises';
import type { Command } from 'commander';
import { NotFound, UsageError } from '../../core/errors.ts';
import { globals } from '../options.ts';
import { checkProfileName, checkServerUrl, configPath, readProfiles, writeProfiles } from '../profiles.ts';
import { output } from '../runtime.ts';

/** The first line of stdin: a token piped in (`--token-stdin`), so it is never on a command line. */
async function tokenFromStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    chunks.push(chunk as Buffer);
    size += (chunk as Buffer).length;
    if (size > 64 * 1024) throw new UsageError('--token-stdin: more than 64 KiB on stdin; give the token alone');
  }
  const token = Buffer.concat(chunks).toString('utf8').split('\n')[0]?.trim() ?? '';
  if (!token) throw new UsageError('--token-stdin: stdin held no token');
  return token;
}

export function registerProfileCommands(program: Command): void {
  const profile = program
    .command('profile')
    .description(
      'servers and tokens for the remote CLI, kept in a config file only you can read (ALP_CONFIG, else ~/.config/alp/config.json)',
    );
  profile
    .command('set <name>')
    .description('add or replace a profile: the server of --server (or ALP_URL) and the token of --token, ALP_TOKEN or --token-stdin')
    .option('--token-stdin', 'read the token from stdin (keeps it off the command line)')
    .action(async (name: string, o, cmd: Command) => {
      const opts = globals(cmd);
      checkProfileName(name);
      if (!opts.server) throw new UsageError('alp profile set NAME --server URL: the profile needs a server (--server or ALP_URL)');
      const server = checkServerUrl(opts.server, '--server');
      const token = o.tokenStdin ? await tokenFromStdin() : opts.token;
      const file = configPath();
      const doc = await readProfiles(file);
      doc.profiles[name] = { server, ...(token ? { token } : {}) };
      await writeProfiles(doc, file);
      const mode = ((await fs.stat(file)).mode & 0o777).toString(8).padStart(4, '0');
      output(
        opts,
        { file, profile: name, server, token: token !== undefined, mode },
        () => `profile ${name}: ${server}${token ? ' with a token' : ' without a token'} in ${file} (mode ${mode})`,
      );
    });
  profile
    .command('list')
    .description('the profiles: name, server, whether a token is stored (never the token)')
    .action(async (_o, cmd: Command) => {
      const file = configPath();
      const { profiles } = await readProfiles(file);
      const rows = Object.entries(profiles).map(([name, p]) => ({ name, server: p.server, token: p.token !== undefined }));
      output(globals(cmd), { file, profiles: rows }, () =>
        rows.length === 0 ? [`no profiles in ${file}`] : rows.map((r) => `${r.name}  ${r.server}  ${r.token ? 'token' : 'no token'}`),
      );
    });
  profile
    .command('remove <name>')
    .description('remove a profile (and the token it holds)')
    .action(async (name: string, _o, cmd: Command) => {
      const file = configPath();
      const doc = await readProfiles(file);
      if (!Object.hasOwn(doc.profiles, name)) throw new NotFound(`no profile ${JSON.stringify(name)} in ${file}`);
      delete doc.profiles[name];
      await writeProfiles(doc, file);
      output(globals(cmd), { file, removed: name }, () => `removed profile ${name} from ${file}`);
    });
}
