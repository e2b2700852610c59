/**
 * Hostile argv for the CLI, run in-process through the same entry function the `alp` binary uses
 * (src/cli/run.ts), with fast-check-generated command lines: every (sub)command but the two that serve
 * forever, with their options given hostile values (huge, unicode, bidi overrides, zero-width,
 * numbers out of range, malformed digests, ids and URLs), unknown flags, `--` tricks, `--opt=value`
 * forms, repeated and missing values. Every run must end with an exit code 0..6; an error is exactly
 * one `alp: CODE: message` line on stderr (with --json: one `{"error":{…}}` JSON line; a command line
 * naming no subcommand: the help, exit 2), never a stack trace, never INTERNAL (exit 1) for bad input,
 * and a token never appears on stderr. Paths given to the CLI stay inside a sandbox directory, which
 * is the working directory, so nothing is written anywhere else.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Command } from 'commander';
import fc from 'fast-check';
import { buildProgram } from '../../src/cli/program.ts';
import { redactTokens } from '../../src/cli/run.ts';
import { captureCli as capture, patchCliOutput } from '../helpers/cli-inprocess.ts';
import { tempDir } from '../helpers/tmp.ts';

const RUNS = Number(process.env.ALP_CLI_FUZZ_RUNS ?? 2000);
/** Commands that serve until a signal (or stdin ends): covered by the server and MCP tests, not by one-shot runs. */
const LONG_RUNNING = new Set(['serve', 'start', 'mcp']);
const ERROR_LINE = /^alp: [A-Z_]+: \S.*$/;

/**
 * The code of a one-line error: `alp: CODE: message`, or — only when the command line has --json
 * before any `--` — the JSON document `{"error":{"code":…,"message":…}}`. Undefined for anything else.
 */
function errorCodeOf(errLines: string[], args: string[]): string | undefined {
  const line = errLines[0] ?? '';
  if (ERROR_LINE.test(line)) return /^alp: ([A-Z_]+):/.exec(line)?.[1];
  const end = args.indexOf('--');
  if (!(end < 0 ? args : args.slice(0, end)).includes('--json')) return undefined;
  try {
    const doc = JSON.parse(line) as { error?: { code?: unknown; message?: unknown } };
    const { code, message } = doc.error ?? {};
    return typeof code === 'string' && /^[A-Z_]+$/.test(code) && typeof message === 'string' && message.length > 0 ? code : undefined;
  } catch {
    return undefined;
  }
}

interface CommandSpec {
  path: string[];
  args: Array<{ required: boolean }>;
  options: Array<{ long: string; takesValue: boolean; mandatory: boolean }>;
}

function commandSpecs(): CommandSpec[] {
  const out: CommandSpec[] = [];
  const walk = (cmd: Command, prefix: string[]) => {
    for (const sub of cmd.commands) {
      const p = [...prefix, sub.name()];
      if (LONG_RUNNING.has(p[0] as string)) continue;
      out.push({
        path: p,
        args: sub.registeredArguments.map((a) => ({ required: a.required })),
        options: sub.options.map((o) => ({ long: o.long as string, takesValue: o.required || o.optional, mandatory: o.mandatory })),
      });
      walk(sub, p);
    }
  };
  walk(buildProgram(), []);
  return out;
}

describe('CLI: hostile argv', () => {
  const realCwd = process.cwd();
  const repoDataBefore = fs.existsSync(path.join(realCwd, 'alp-data'));
  const savedEnv = { ...process.env };
  const unpatch: Array<() => void> = [];
  let sandbox: string;
  let fixtures: { artifact: string; proposed: string; run: string; file: string; tokens: string[] };

  before(async () => {
    unpatch.push(patchCliOutput());
    sandbox = tempDir('alp-cli-fuzz');
    fs.mkdirSync(path.join(sandbox, 'in'));
    fs.writeFileSync(path.join(sandbox, 'in', 'run.sh'), 'echo fuzz\n');
    fs.writeFileSync(path.join(sandbox, 'in', 'payload.json'), '{"ok":true}\n');
    fs.writeFileSync(path.join(sandbox, 'in', 'empty'), '');
    process.chdir(sandbox);
    for (const k of ['ALP_TOKEN', 'ALP_NOW', 'ALP_METADATA', 'ALP_CONTENT', 'ALP_DEBUG', 'ALP_HOST', 'ALP_PORT']) delete process.env[k];
    process.env.ALP_DATA = path.join(sandbox, 'data');
    const json = async (args: string[]) => {
      const r = await capture([...args, '--json']);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      return JSON.parse(r.stdout) as Record<string, unknown>;
    };
    await json(['init']);
    // One operator proposes and approves below: the approval policy must count a proposer's own approval (issue 20 item 4).
    await json(['policy', 'set', '--self-approval', 'counted', '--reason', 'single-operator fixture']);
    const file = path.join(sandbox, 'in', 'run.sh');
    const artifact = (await json(['artifact', 'create', '--name', 'fuzz', '--file', file])).artifact_id as string;
    const proposed = (await json(['artifact', 'create', '--name', 'fuzz-p', '--file', file])).artifact_id as string;
    await json(['artifact', 'propose', proposed, '--version', '1']);
    const ran = (await json(['artifact', 'create', '--name', 'fuzz-r', '--file', file])).artifact_id as string;
    await json(['artifact', 'propose', ran, '--version', '1']);
    await json(['artifact', 'approve', ran, '--version', '1', '--evidence', 'CR-1']);
    const run = (await json(['exec', 'start', ran, '--version', '1'])).run_id as string;
    const tokens: string[] = [];
    for (const kind of ['human', 'agent', 'service'])
      tokens.push((await json(['token', 'create', '--principal', `fuzz-${kind}`, '--kind', kind])).token as string);
    fixtures = { artifact, proposed, run, file, tokens };
  });
  after(() => {
    for (const u of unpatch) u();
    process.chdir(realCwd);
    for (const k of Object.keys(process.env)) if (!(k in savedEnv)) delete process.env[k];
    Object.assign(process.env, savedEnv);
  });

  function argvs(n: number): string[][] {
    const specs = commandSpecs();
    const { artifact, proposed, run, tokens } = fixtures;
    const tenKb = 'n'.repeat(10 * 1024);
    const hostileText = fc.constantFrom(
      '',
      ' ',
      'x',
      tenKb,
      'é'.repeat(5000),
      'e\u0301', // NFD
      'caf\u00e9', // NFC
      'ﬁle', // ligature (NFKC differs)
      'ＡＢＣ', // fullwidth
      'K', // Kelvin sign
      'abc\u202Egnp.exe', // RTL override
      '\u2066isolate\u2069',
      'zero\u200Bwidth',
      'bom\uFEFF',
      'rlm\u200F',
      'tag\u{E0041}',
      '😀'.repeat(100),
      '\uD800',
      'line\nbreak',
      'tab\there',
      '\u001b[31mred',
      '$(id)',
      '`id`',
      "'; DROP TABLE items; --",
      '%s%s%n',
      '../../../../etc/passwd',
      '..',
      '.',
      'metadata.json',
      'rollback-x',
      '.alp-tmp',
      'a/b',
      'a\\b',
      '=',
      'k=',
      '=v',
      'team=ops',
      'team=\u202Eops',
      `k${'=v'.repeat(2000)}`,
      '-',
      '--',
      '-1',
      '0',
      '1',
      '2',
      '1.5',
      '1e309',
      '99999999999999999999',
      'NaN',
      'Infinity',
      '0x10',
      '-0',
      '7d',
      '0s',
      '-1d',
      '400d',
      'forever',
      'PROPOSED',
      'DRAFT',
      'APPROVED',
      'EXECUTED',
      'proposed',
      'SUCCEEDED',
      'FAILED',
      'QUARANTINE',
      'PURGE',
      'json',
      'in-toto',
      'stdout',
      'output.json',
      'stdout.log',
      'stderr.log',
      '2026-03-01',
      '2026-13-45',
      '1970-01-01',
      '9999-12-31',
      `sha256:${'0'.repeat(64)}`,
      `sha256:${'A'.repeat(64)}`,
      'sha256:00',
      'md5:abc',
      '{}',
      '[]',
      '{"a":',
      'null',
      '{"__proto__":{"polluted":1}}',
      '01ARZ3NDEKTSV4RRFFQ69G5FAV',
      '01arz3ndektsv4rrffq69g5fav',
      'ZZZZZZZZZZZZZZZZZZZZZZZZZZ',
      artifact,
      proposed,
      run,
      ...tokens,
      'alp_notarealtokenbutlongenoughtolooklikeone',
      'human',
      'agent',
      'service',
      'robot',
      'os:root',
    );
    const garbage = fc
      .string({ unit: 'binary', maxLength: 40 })
      .filter((s) => !s.includes('\u0000') && !s.startsWith('-'))
      .map((s) => s.replace(/[\ud800-\udfff]/g, '?'));
    const text = fc.oneof({ weight: 4, arbitrary: hostileText }, { weight: 1, arbitrary: garbage });
    // Paths stay inside the sandbox (the working directory): existing files, directories, missing ones.
    const sandboxPath = fc.constantFrom(
      'in/run.sh',
      'in/payload.json',
      'in/empty',
      'in',
      'missing/file',
      'data',
      'data/alp.db',
      'out.bin',
      'out/dir/x',
      'backups',
      'backups/b1',
      'restored',
      'other-data',
      path.join(sandbox, 'in', 'run.sh'),
      `in/${'x'.repeat(300)}`,
      'in/\u202Egnp.sh',
      '',
    );
    const storageUrl = fc.constantFrom(
      'sqlite:data/alp.db',
      'sqlite:',
      'sqlite:other/alp.db',
      'file:data/content',
      'file:',
      'file:other/content',
      'dynamodb://',
      'dynamodb://x',
      'dynamodb://bad table',
      's3://',
      's3://UPPER',
      's3://b?endpoint=ftp://x',
      'http://example.com',
      'mysql://x',
      '::::',
      '%zz',
    );
    const valueFor = (long: string) => {
      switch (long) {
        case '--file':
        case '--out':
        case '--from':
        case '--data':
        case '--restore':
        case '--fetch-content':
          return sandboxPath;
        case '--metadata':
        case '--content':
          return storageUrl;
        case '--to':
          return fc.constantFrom('stdout', 'ftp://x', 'http://example.com/', 'not a url', '');
        default:
          return text;
      }
    };
    const unknownFlag = fc.constantFrom('--bogus', '-x', '-Z', '---', '--=', '--json=1', '--no-json', '-vv', '--help=1', '--Version');
    const globalOpt = fc.oneof(
      fc.constant(['--json']),
      fc.constantFrom(...tokens, 'alp_bad', 'garbage', '').map((t) => ['--token', t]),
      valueFor('--data').map((p) => ['--data', p]),
      valueFor('--metadata').map((u) => ['--metadata', u]),
      valueFor('--content').map((u) => ['--content', u]),
    );
    const line = fc.constantFrom(...specs).chain((spec) => {
      const valued = (o: { long: string; takesValue: boolean }) =>
        o.takesValue
          ? fc.oneof(
              { weight: 4, arbitrary: valueFor(o.long).map((v) => [o.long, v]) },
              { weight: 1, arbitrary: valueFor(o.long).map((v) => [`${o.long}=${v}`]) },
              { weight: 1, arbitrary: fc.constant([o.long]) },
            )
          : fc.constant([o.long]);
      const option = fc
        .constantFrom(...(spec.options.length ? spec.options : [{ long: '--bogus', takesValue: false, mandatory: false }]))
        .chain(valued);
      // Often a well-formed call (its arguments and required options present) with hostile values, so
      // the services see the input and not only the parser.
      const wellFormed = fc.tuple(
        fc.tuple(...spec.args.filter((a) => a.required).map(() => text)),
        fc.tuple(...spec.options.filter((o) => o.mandatory).map((o) => valueFor(o.long).map((v) => [o.long, v]))),
      );
      const positional = text.map((t) => [t]);
      const piece = fc.oneof(
        { weight: 6, arbitrary: option },
        { weight: 3, arbitrary: positional },
        { weight: 1, arbitrary: unknownFlag.map((f) => [f]) },
        { weight: 1, arbitrary: fc.constant(['--']) },
        { weight: 1, arbitrary: fc.constantFrom(['--help'], ['-h'], ['help']) },
      );
      const chaos = fc
        .tuple(fc.array(globalOpt, { maxLength: 2 }), fc.option(wellFormed), fc.array(piece, { maxLength: 4 }), fc.boolean())
        .map(([globals, base, pieces, globalsFirst]) => {
          const rest = [...(base ? [...base[0], ...base[1].flat()] : []), ...pieces.flat()];
          return globalsFirst ? [...globals.flat(), ...spec.path, ...rest] : [...spec.path, ...rest, ...globals.flat()];
        });
      // A well-formed call with hostile values in its options: what the services have to refuse.
      const wellFormedCall = fc
        .tuple(
          fc.array(
            globalOpt.filter((g) => g[0] !== '--metadata' && g[0] !== '--content'),
            { maxLength: 2 },
          ),
          wellFormed,
          fc.array(option, { maxLength: 3 }),
        )
        .map(([globals, base, options]) => [...spec.path, ...base[0], ...base[1].flat(), ...options.flat(), ...globals.flat()]);
      return fc.oneof({ weight: 3, arbitrary: wellFormedCall }, { weight: 2, arbitrary: chaos });
    });
    const nonsense = fc.array(text, { minLength: 0, maxLength: 4 });
    return fc.sample(fc.oneof({ weight: 12, arbitrary: line }, { weight: 1, arbitrary: nonsense }), { numRuns: n, seed: 20261130 });
  }

  it(`ends ${RUNS} hostile command lines with exit 0..6 and one clear error line, never INTERNAL`, async (t) => {
    const lines = argvs(RUNS);
    const failures: string[] = [];
    const codes = new Map<number, number>();
    const errorCodes = new Map<string, number>();
    let slowest = 0;
    for (const args of lines) {
      const shown = JSON.stringify(args.map((a) => (a.length > 60 ? `${a.slice(0, 60)}…(${a.length})` : a)));
      const r = await capture(args);
      slowest = Math.max(slowest, r.ms);
      codes.set(r.code, (codes.get(r.code) ?? 0) + 1);
      if (!Number.isInteger(r.code) || r.code < 0 || r.code > 6) failures.push(`${shown}: exit ${r.code}`);
      const errLines = r.stderr.split('\n').filter((l) => l.length > 0);
      if (/\n\s+at .+:\d+:\d+/.test(r.stderr)) failures.push(`${shown}: stack trace on stderr: ${r.stderr.slice(0, 300)}`);
      for (const tok of fixtures.tokens) if (r.stderr.includes(tok)) failures.push(`${shown}: a token on stderr`);
      if (r.stderr !== redactTokens(r.stderr)) failures.push(`${shown}: something token-like on stderr: ${r.stderr.slice(0, 200)}`);
      if (r.code === 0) {
        const stray = errLines.filter((l) => /^alp: [A-Z_]+:/.test(l));
        if (stray.length) failures.push(`${shown}: exit 0 with an error line: ${stray[0]}`);
      } else if (r.code === 2 && r.stderr.startsWith('Usage: alp')) {
        // A command line naming no (sub)command: the help on stderr, a usage error.
        errorCodes.set('(help)', (errorCodes.get('(help)') ?? 0) + 1);
      } else {
        const code = errorCodeOf(errLines, args);
        if (errLines.length !== 1 || code === undefined)
          failures.push(`${shown}: exit ${r.code} with stderr ${JSON.stringify(r.stderr.slice(0, 300))}`);
        if (process.env.ALP_CLI_FUZZ_VERBOSE) console.error(`${shown} => ${errLines[0]}`);
        errorCodes.set(code ?? '?', (errorCodes.get(code ?? '?') ?? 0) + 1);
        if (r.code === 1 || code === 'INTERNAL') failures.push(`${shown}: INTERNAL for bad input: ${errLines[0]}`);
      }
    }
    t.diagnostic(`exit codes: ${JSON.stringify(Object.fromEntries([...codes].sort((a, b) => a[0] - b[0])))}`);
    t.diagnostic(`error codes: ${JSON.stringify(Object.fromEntries(errorCodes))}; slowest run ${slowest.toFixed(0)} ms`);
    assert.deepEqual(failures.slice(0, 15), [], `${failures.length} failures`);
    // The mix reached the parser's errors and the services' refusals alike.
    for (const c of [0, 2, 3]) assert.ok((codes.get(c) ?? 0) > 0, `no exit ${c} among ${JSON.stringify([...codes])}`);
    assert.ok((errorCodes.get('USAGE') ?? 0) > 0 && (errorCodes.get('INVALID') ?? 0) > 0);
    assert.equal(({} as Record<string, unknown>).polluted, undefined, 'no prototype pollution');
    // Nothing was written outside the sandbox: the repository has no alp-data of its own.
    assert.equal(fs.existsSync(path.join(realCwd, 'alp-data')), repoDataBefore);
  });
});
