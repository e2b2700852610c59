import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { sha256 } from '../../src/core/digest.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { tempDir } from '../helpers/tmp.ts';

describe('alp CLI: the first slice', () => {
  it('init creates the installation once and reports it', async () => {
    const dir = tempDir('alp-cli');
    const first = await alpJson(['init', '--data', path.join(dir, 'd')]);
    assert.equal(first.created, true);
    assert.match(first.installation_id as string, /^[0-9A-HJKMNP-TV-Z]{26}$/);
    const again = await alpJson(['init', '--data', path.join(dir, 'd')]);
    assert.equal(again.created, false);
    assert.equal(again.installation_id, first.installation_id);
  });

  it('creates, versions, shows, lists and gets verified content', async () => {
    const dir = tempDir('alp-cli');
    const data = path.join(dir, 'd');
    await alpJson(['init', '--data', data]);
    fs.writeFileSync(path.join(dir, 'run.sh'), '#!/bin/sh\necho one\n');
    const v1 = await alpJson([
      'artifact',
      'create',
      '--data',
      data,
      '--name',
      'runner',
      '--file',
      path.join(dir, 'run.sh'),
      '--kind',
      'script',
      '--label',
      'team=ops',
    ]);
    assert.equal(v1.state, 'DRAFT');
    assert.equal(v1.content_hash, sha256('#!/bin/sh\necho one\n'));
    const id = v1.artifact_id as string;
    const v2 = await alpJson(['artifact', 'version', id, '--data', data, '--file', '-', '--filename', 'run.sh'], { input: 'echo two\n' });
    assert.equal(v2.version, 2);
    const shown = await alpJson<{ versions: Array<{ version: number }>; labels: Record<string, string> }>([
      'artifact',
      'show',
      id,
      '--data',
      data,
    ]);
    assert.deepEqual(
      shown.versions.map((v) => v.version),
      [1, 2],
    );
    assert.deepEqual(shown.labels, { team: 'ops' });
    const page = await alpJson<{ items: Array<{ version: number }>; cursor?: string }>([
      'artifact',
      'list',
      '--data',
      data,
      '--state',
      'DRAFT',
      '--limit',
      '1',
    ]);
    assert.equal(page.items.length, 1);
    assert.ok(page.cursor);
    const next = await alpJson<{ items: Array<{ version: number }>; cursor?: string }>([
      'artifact',
      'list',
      '--data',
      data,
      '--state',
      'DRAFT',
      '--limit',
      '1',
      '--cursor',
      page.cursor as string,
    ]);
    assert.equal(next.items.length, 1);
    const out = path.join(dir, 'out.sh');
    await alpJson(['artifact', 'get', id, '--data', data, '--version', '1', '--out', out]);
    assert.equal(fs.readFileSync(out, 'utf8'), '#!/bin/sh\necho one\n');
    const stdout = await runAlp(['artifact', 'get', id, '--data', data, '--out', '-']);
    assert.equal(stdout.code, 0);
    assert.equal(stdout.stdout, 'echo two\n');
  });

  it('a flipped byte makes get exit 5 with one INTEGRITY line and no output file; verify --all names the object', async () => {
    const dir = tempDir('alp-cli');
    const data = path.join(dir, 'd');
    await alpJson(['init', '--data', data]);
    fs.writeFileSync(path.join(dir, 'f.bin'), Buffer.alloc(300_000, 1));
    const v = await alpJson(['artifact', 'create', '--data', data, '--name', 'blob', '--file', path.join(dir, 'f.bin')]);
    const objectPath = path.join(data, 'content', v.content_key as string);
    const bytes = fs.readFileSync(objectPath);
    bytes[123] = 2;
    fs.writeFileSync(objectPath, bytes);
    const out = path.join(dir, 'out.bin');
    const got = await runAlp(['artifact', 'get', v.artifact_id as string, '--data', data, '--out', out]);
    assert.equal(got.code, 5);
    const lines = got.stderr.trim().split('\n');
    assert.equal(lines.length, 1);
    assert.match(lines[0] as string, /^alp: INTEGRITY: /);
    assert.equal(fs.existsSync(out), false);
    assert.deepEqual(
      fs.readdirSync(dir).filter((f) => f.includes('out')),
      [],
      'no partial file either',
    );
    const verify = await runAlp(['verify', '--all', '--data', data, '--json']);
    assert.equal(verify.code, 5);
    const report = JSON.parse(verify.stdout) as { findings: Array<{ key: string; problem: string }> };
    assert.deepEqual(
      report.findings.map((f) => [f.key, f.problem]),
      [[v.content_key, 'corrupt']],
    );
    assert.match(verify.stderr, /alp: INTEGRITY: .*artifacts\//);
  });

  it('maps errors to exit codes with one stderr line: usage 2, invalid 2, not found 3', async () => {
    const dir = tempDir('alp-cli');
    const data = path.join(dir, 'd');
    await alpJson(['init', '--data', data]);
    fs.writeFileSync(path.join(dir, 'f'), 'x');
    const cases: Array<[string[], number, RegExp]> = [
      [['bogus'], 2, /^alp: USAGE: /],
      [['artifact', 'create', '--data', data, '--file', path.join(dir, 'f')], 2, /^alp: USAGE: .*--name/],
      [['artifact', 'create', '--data', data, '--name', 'n', '--file', path.join(dir, 'f'), '--filename', '../x'], 2, /^alp: INVALID: /],
      [['artifact', 'create', '--data', data, '--name', 'n', '--file', path.join(dir, 'missing')], 3, /^alp: NOT_FOUND: /],
      [['artifact', 'show', '01NOPE', '--data', data], 3, /^alp: NOT_FOUND: /],
      [['artifact', 'list', '--data', data, '--limit', 'x'], 2, /^alp: USAGE: /],
      [
        ['artifact', 'create', '--data', data, '--name', 'n', '--file', path.join(dir, 'f'), '--digest', sha256('y')],
        5,
        /^alp: INTEGRITY: /,
      ],
    ];
    for (const [args, code, pattern] of cases) {
      const r = await runAlp(args);
      assert.equal(r.code, code, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, pattern);
    }
  });

  it('ALP_NOW fixes the clock and warns on stderr every time', async () => {
    const dir = tempDir('alp-cli');
    const data = path.join(dir, 'd');
    await alpJson(['init', '--data', data]);
    fs.writeFileSync(path.join(dir, 'f'), 'x');
    const r = await runAlp(['artifact', 'create', '--data', data, '--name', 'n', '--file', path.join(dir, 'f'), '--json'], {
      env: { ALP_NOW: '2030-05-06T07:08:09Z' },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).created_at, '2030-05-06T07:08:09.000Z');
    assert.equal(r.stderr, 'alp: warning: ALP_NOW is set; the clock reads 2030-05-06T07:08:09.000Z\n');
  });
});
