/**
 * The CLI's one entry function: parses argv, runs the command, and turns every failure into one line on
 * stderr, `alp: {CODE}: {message}`, and an exit code (0 ok, 1 internal, 2 usage or invalid input,
 * 3 not found, 4 conflict, 5 integrity, 6 unauthenticated or forbidden). `main.ts` calls it for the
 * process; tests call it in-process (the CLI fuzz test).
 */
import path from 'node:path';
import { CommanderError } from 'commander';
import { type AlpError, ExitCode, NotFound, toAlpError, UsageError } from '../core/errors.ts';
import { redactTokens } from '../core/ids.ts';
import { escapeForDisplay } from '../core/object-keys.ts';
import { buildProgram } from './program.ts';
import { ALP_VERSION } from './version.ts';

export { redactTokens };

export async function runCli(argv: string[]): Promise<number> {
  const program = buildProgram();
  // `--version` is a per-command option (artifact versions), so the program's own version is only
  // answered as the sole argument.
  if (argv.length === 3 && (argv[2] === '--version' || argv[2] === '-V')) {
    process.stdout.write(`${ALP_VERSION}\n`);
    return ExitCode.OK;
  }
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : ExitCode.OK;
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') return ExitCode.OK;
      process.stderr.write(`alp: USAGE: ${redactTokens(oneLine(e.message.replace(/^error: /, '')))}\n`);
      return ExitCode.USAGE;
    }
    const err = userPathError(e, argv) ?? toAlpError(e);
    process.stderr.write(`alp: ${err.code}: ${redactTokens(oneLine(err.message))}\n`);
    if (process.env.ALP_DEBUG && e instanceof Error) process.stderr.write(`${e.stack}\n`);
    return err.exitCode;
  }
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

/** One line on a terminal: line breaks folded, anything that could steer the display escaped. */
function oneLine(s: string): string {
  return escapeForDisplay(s.replace(/\s*\n\s*/g, ' '));
}
