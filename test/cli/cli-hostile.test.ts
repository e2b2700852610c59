/**
 * Regression tests for what the CLI fuzz (cli-fuzz.test.ts) found: user-given paths that cannot be
 * used were INTERNAL failures (exit 1) with raw errno messages; `artifact get --out ''` or `--out DIR`
 * wrote its temp file into the parent directory; `audit verify` of an unknown id claimed a broken chain
 * (exit 5); a token typed in the wrong place was echoed on stderr.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { redactTokens } from '../../src/cli/run.ts';
import { captureCli, patchCliOutput } from '../helpers/cli-inprocess.ts';
import { tempDir } from '../helpers/tmp.ts';

describe('CLI: hostile paths and arguments (fuzz regressions)', () => {
  const realCwd = process.cwd();
  let unpatch: () => void;
  let root: string;
  let sandbox: string;
  let data: string;
  let id: string;
  before(async () => {
    unpatch = patchCliOutput();
    root = tempDir('alp-cli-hostile');
    sandbox = path.join(root, 'sandbox');
    fs.mkdirSync(sandbox);
    data = path.join(sandbox, 'data');
    fs.writeFileSync(path.join(sandbox, 'run.sh'), 'echo hi\n');
    process.chdir(sandbox);
    assert.equal((await captureCli(['init', '--data', data])).code, 0);
    const r = await captureCli(['artifact', 'create', '--data', data, '--name', 'x', '--file', 'run.sh', '--json']);
    assert.equal(r.code, 0, r.stderr);
    id = JSON.parse(r.stdout).artifact_id;
  });
  after(() => {
    process.chdir(realCwd);
    unpatch();
  });

  const oneError = (r: { code: number; stderr: string }, code: number, errorCode: string) => {
    assert.equal(r.code, code, r.stderr);
    const lines = r.stderr.split('\n').filter(Boolean);
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0] as string, new RegExp(`^alp: ${errorCode}: `));
  };

  it('a data directory that is a file, or a name too long, is a usage error, not INTERNAL', async () => {
    oneError(await captureCli(['artifact', 'list', '--data', 'run.sh']), 2, 'USAGE');
    oneError(await captureCli(['artifact', 'list', '--data', 'x'.repeat(300)]), 2, 'USAGE');
    oneError(await captureCli(['artifact', 'list', '--metadata', 'sqlite:run.sh', '--content', 'file:c']), 2, 'USAGE');
    assert.equal(fs.readFileSync('run.sh', 'utf8'), 'echo hi\n', 'the file given as a database is untouched');
  });

  it('backup and restore paths that cannot be used are usage errors or not found', async () => {
    oneError(await captureCli(['backup', '--data', data, '--out', 'y'.repeat(300)]), 2, 'USAGE');
    oneError(await captureCli(['restore', '--from', 'run.sh/backup', '--data', path.join(sandbox, 'r')]), 2, 'USAGE');
  });

  it('artifact get --out "" or --out DIR refuses before writing anything, anywhere', async () => {
    const before = fs.readdirSync(root).sort();
    oneError(await captureCli(['artifact', 'get', id, '--data', data, '--out', '']), 2, 'USAGE');
    fs.mkdirSync('outdir');
    oneError(await captureCli(['artifact', 'get', id, '--data', data, '--out', 'outdir']), 2, 'USAGE');
    assert.deepEqual(fs.readdirSync(root).sort(), before, 'nothing written beside the sandbox');
    assert.deepEqual(fs.readdirSync('outdir'), []);
    assert.deepEqual(
      fs.readdirSync(sandbox).filter((f) => f.includes('alp-partial')),
      [],
    );
    const ok = await captureCli(['artifact', 'get', id, '--data', data, '--out', 'outdir/run.sh']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(fs.readFileSync('outdir/run.sh', 'utf8'), 'echo hi\n');
  });

  it('audit verify of an unknown artifact is NOT_FOUND (exit 3), not a broken chain', async () => {
    oneError(await captureCli(['audit', 'verify', '01ARZ3NDEKTSV4RRFFQ69G5FAV', '--data', data]), 3, 'NOT_FOUND');
    const good = await captureCli(['audit', 'verify', id, '--data', data]);
    assert.equal(good.code, 0, good.stderr);
  });

  it('an id with a carriage return, bidi override or invisible character is echoed escaped, never raw', async () => {
    for (const [raw, shown] of [
      ['abc\r', 'abc\\u{d}'],
      ['x\u202egnp.sh', 'x\\u{202e}gnp.sh'],
      ['a\u200bb\u001b[2J', 'a\\u{200b}b\\u{1b}[2J'],
    ]) {
      const r = await captureCli(['history', 'show', raw as string, '--data', data]);
      oneError(r, 3, 'NOT_FOUND');
      assert.ok(r.stderr.includes(shown as string), r.stderr);
      assert.doesNotMatch(r.stderr.slice(0, -1), /[\u0000-\u001f\u202e\u200b]/);
    }
  });

  it('a token typed where it does not belong is never echoed on stderr', async () => {
    const created = await captureCli(['token', 'create', '--data', data, '--principal', 'p', '--kind', 'agent', '--json']);
    const token = JSON.parse(created.stdout).token as string;
    for (const args of [
      ['artifact', 'show', token, '--data', data],
      ['artifact', 'list', `--tokne=${token}`, '--data', data],
      ['audit', 'verify', token, '--data', data],
      ['artifact', 'list', '--data', data, '--state', token],
      ['artifact', 'propose', id, '--version', '1', '--data', data, '--token', `${token}x`],
    ]) {
      const r = await captureCli(args);
      assert.notEqual(r.code, 0, `${args.join(' ')}: ${r.stdout}`);
      assert.equal(r.stderr.includes(token), false, `${args[1]}: ${r.stderr}`);
    }
    assert.equal(redactTokens(`see ${token}.`), 'see alp_[redacted].');
  });
});
