/**
 * The CLI's one entry function: parses argv, runs the command, and turns every failure into one line on
 * stderr — `alp: {CODE}: {message}`, or with --json one JSON document `{"error":{…}}` (runtime.ts
 * errorLine) — and an exit code (0 ok, 1 internal, 2 usage or invalid input, 3 not found, 4 conflict,
 * 5 integrity, 6 unauthenticated or forbidden). `main.ts` calls it for the process; tests call it
 * in-process (the CLI fuzz test).
 */
import path from 'node:path';
import { type Command, CommanderError, Help, Option } from 'commander';
import { type AlpError, ExitCode, NotFound, toAlpError, UsageError } from '../core/errors.ts';
import { redactTokens } from '../core/ids.ts';
import { buildProgram } from './program.ts';
import { errorLine } from './runtime.ts';
import { ALP_VERSION } from './version.ts';

export { redactTokens };

export async function runCli(argv: string[]): Promise<number> {
  const program = buildProgram();
  const args = argv.slice(2);
  // `--version` is a per-command option (artifact versions), so the program's own version is only
  // answered as the sole argument (and listed in the program's help).
  if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
    process.stdout.write(`${ALP_VERSION}\n`);
    return ExitCode.OK;
  }
  listVersionOption(program);
  let json = wantsJson(argv);
  // Once parsed, the command's own --json decides (a "--json" that was another option's value does not).
  program.hook('preAction', (_program, action) => {
    json = action.optsWithGlobals().json === true;
  });
  let failedAt: Command | undefined;
  for (const cmd of allCommands(program)) {
    cmd.exitOverride((e) => {
      failedAt ??= cmd;
      throw e;
    });
  }
  try {
    if (args.length === 0) program.help({ error: true });
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : ExitCode.OK;
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version') return ExitCode.OK;
      // Help shown because the command line named no (sub)command: printed on stderr, a usage error.
      if (e.code === 'commander.help') return e.exitCode === 0 ? ExitCode.OK : ExitCode.USAGE;
      const message = `${e.message.replace(/^error: /, '')}${mixUpHint(e, failedAt ?? program, args)}`;
      process.stderr.write(errorLine(new UsageError(message), json));
      return ExitCode.USAGE;
    }
    const err = userPathError(e, argv) ?? toAlpError(e);
    process.stderr.write(errorLine(err, json));
    if (process.env.ALP_DEBUG && e instanceof Error) process.stderr.write(`${e.stack}\n`);
    return err.exitCode;
  }
}

/** Whether the command line asks for --json (before any `--`): how errors are printed before it is parsed. */
export function wantsJson(argv: string[]): boolean {
  const args = argv.slice(2);
  const end = args.indexOf('--');
  return (end < 0 ? args : args.slice(0, end)).includes('--json');
}

function allCommands(cmd: Command): Command[] {
  return [cmd, ...cmd.commands.flatMap(allCommands)];
}

/** `alp --help` lists `-V, --version` although it is not a program option (see runCli). */
function listVersionOption(program: Command): void {
  const version = new Option('-V, --version', 'print the ALP version and exit (as the only argument)');
  program.configureHelp({
    visibleOptions(cmd) {
      const shown = Help.prototype.visibleOptions.call(this as Help, cmd);
      if (cmd !== program) return shown;
      const help = shown.findIndex((o) => o.long === '--help');
      shown.splice(help < 0 ? shown.length : help, 0, version);
      return shown;
    },
  });
}

/**
 * A hint for the mix-ups commander's own suggestion (an edit distance of at most 3) misses: an option
 * that is a longer or shorter form of a known one (`--filename` where only `--file` exists), a required
 * option missing while its look-alike was given (`--filename` without `--file`), a subcommand asked
 * for under the wrong parent (`alp artifact compensate` is `alp compensate`).
 */
function mixUpHint(e: CommanderError, at: Command, args: string[]): string {
  if (e.code === 'commander.unknownOption' && !/Did you mean/i.test(e.message)) {
    const given = /unknown option '([^'=]+)/.exec(e.message)?.[1];
    const like = given ? lookAlikes(given, knownFlags(at)) : [];
    return like.length === 1 ? ` (did you mean ${like[0]}?)` : '';
  }
  if (e.code === 'commander.missingMandatoryOptionValue') {
    const missing = /option '(--[\w-]+)/.exec(e.message)?.[1];
    const given = givenFlags(args);
    const like = missing ? lookAlikes(missing, given) : [];
    return like.length ? ` (${like.join(', ')} was given: did you mean ${missing}?)` : '';
  }
  if (e.code === 'commander.unknownCommand' && !/Did you mean/i.test(e.message)) {
    const name = /unknown command '([^']+)'/.exec(e.message)?.[1];
    const elsewhere = name ? commandPathsNamed(rootOf(at), name) : [];
    return elsewhere.length ? ` (did you mean ${elsewhere.map((p) => `alp ${p}`).join(' or ')}?)` : '';
  }
  return '';
}

/** Flags in `candidates` that `flag` is a prefix of, or that are a prefix of it (past the dashes, 3+ characters). */
function lookAlikes(flag: string, candidates: string[]): string[] {
  const short = (a: string, b: string) => a.length >= 5 && b.startsWith(a) && a !== b;
  return [...new Set(candidates)].filter((c) => short(c, flag) || short(flag, c));
}

/** The long flags a command takes, its ancestors' included (the global options). */
function knownFlags(cmd: Command): string[] {
  const flags: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) flags.push(...c.options.flatMap((o) => (o.long ? [o.long] : [])));
  return flags;
}

/** The long flags on a command line (before any `--`), without their `=value`. */
function givenFlags(args: string[]): string[] {
  const end = args.indexOf('--');
  return (end < 0 ? args : args.slice(0, end)).filter((a) => a.startsWith('--') && a.length > 2).map((a) => a.split('=')[0] as string);
}

function rootOf(cmd: Command): Command {
  let c = cmd;
  while (c.parent) c = c.parent;
  return c;
}

/** The paths (`compensate`, `history show`) of the commands called `name`, anywhere in the tree. */
function commandPathsNamed(root: Command, name: string): string[] {
  const out: string[] = [];
  const walk = (cmd: Command, prefix: string[]) => {
    for (const sub of cmd.commands) {
      const p = [...prefix, sub.name()];
      if (sub.name() === name || sub.aliases().includes(name)) out.push(p.join(' '));
      walk(sub, p);
    }
  };
  walk(root, []);
  return out;
}

const PATH_PROBLEMS: Record<string, string> = {
  EEXIST: 'a file is in the way',
  ENOTDIR: 'a path component is not a directory',
  EISDIR: 'it is a directory',
  ENAMETOOLONG: 'the name is too long',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ELOOP: 'too many symbolic links',
};

/**
 * A filesystem error on a path the user gave (an argument, or below one): their input cannot be used,
 * which is a usage error (or not found), not an internal failure. Errors on other paths pass through.
 */
export function userPathError(e: unknown, argv: string[]): AlpError | undefined {
  const err = e as NodeJS.ErrnoException | undefined;
  if (typeof err?.code !== 'string' || typeof err.path !== 'string') return undefined;
  const why = err.code === 'ENOENT' ? 'no such file or directory' : PATH_PROBLEMS[err.code];
  if (!why) return undefined;
  const target = path.resolve(err.path);
  const given = argv
    .slice(2)
    .map((a) => (a.startsWith('--') && a.includes('=') ? a.slice(a.indexOf('=') + 1) : a))
    .concat(process.env.ALP_DATA ? [process.env.ALP_DATA] : [])
    .filter((a) => a.length > 0 && !a.startsWith('-'))
    .map((a) => path.resolve(a));
  const related = (a: string, b: string) => a === b || a.startsWith(`${b}${path.sep}`);
  if (!given.some((g) => related(target, g) || related(g, target))) return undefined;
  const message = `cannot use ${err.path}: ${why} (${err.code})`;
  return err.code === 'ENOENT' ? new NotFound(message) : new UsageError(message);
}
