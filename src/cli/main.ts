#!/usr/bin/env node
import { CommanderError } from 'commander';
import { ExitCode, toAlpError } from '../core/errors.ts';
import { ALP_VERSION, buildProgram } from './program.ts';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

/** Errors are always one line on stderr: `alp: {CODE}: {message}`; the exit code says what kind. */
export async function main(argv: string[]): Promise<number> {
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
      process.stderr.write(`alp: USAGE: ${e.message.replace(/^error: /, '')}\n`);
      return ExitCode.USAGE;
    }
    const err = toAlpError(e);
    process.stderr.write(`alp: ${err.code}: ${oneLine(err.message)}\n`);
    if (process.env.ALP_DEBUG && e instanceof Error) process.stderr.write(`${e.stack}\n`);
    return err.exitCode;
  }
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ');
}

let settled = false;
// If the event loop drains while a command is still pending, something never settled: never let that
// pass as success.
process.on('beforeExit', () => {
  if (!settled) {
    settled = true;
    process.stderr.write('alp: INTERNAL: the command stopped before completing\n');
    process.exitCode = ExitCode.INTERNAL;
  }
});

main(process.argv).then(
  (code) => {
    settled = true;
    process.exitCode = code;
  },
  (e) => {
    settled = true;
    process.stderr.write(`alp: INTERNAL: ${String(e)}\n`);
    process.exitCode = ExitCode.INTERNAL;
  },
);
