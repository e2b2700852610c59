#!/usr/bin/env node
import { ExitCode, InternalError } from '../core/errors.ts';
import { runCli, wantsJson } from './run.ts';
import { errorLine } from './runtime.ts';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

/**
 * Errors are always one line on stderr: `alp: {CODE}: {message}`, or a JSON document with --json; the
 * exit code says what kind (run.ts).
 */
export const main = runCli;

let settled = false;
// If the event loop drains while a command is still pending, something never settled: never let that
// pass as success.
process.on('beforeExit', () => {
  if (!settled) {
    settled = true;
    process.stderr.write(errorLine(new InternalError('the command stopped before completing'), wantsJson(process.argv)));
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
    process.stderr.write(errorLine(new InternalError(String(e)), wantsJson(process.argv)));
    process.exitCode = ExitCode.INTERNAL;
  },
);
