/**
 * Aliases and search from the CLI (issue 20 item 6), on the installation and with `--server` against a
 * real `alp start` process: the same documents either way; `alp alias set|rm` refused for an agent
 * token (exit 6) on both; `--version @prod` resolved for reads and lifecycle commands (and said like a
 * chosen version); `alp audit verify` clean after the moves.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import type { Captured } from '../helpers/cli-inprocess.ts';
import { remoteAndLocalCli } from '../helpers/remote-cli.ts';

type Json = Record<string, unknown>;

describe('CLI: alp alias and alp search, local and --server (issue 20 item 6)', () => {
  const cli = remoteAndLocalCli('alp-alias-cli', 'human');
  const { dir, data, remote, local, ok, rjson, ljson, same, file } = cli;
  let human = '';
  let agent = '';
  before(() => {
    ({ human, agent } = cli.tokens);
  });
  const fails = async (run: Promise<Captured>, code: number, pattern: RegExp) => {
    const r = await run;
    assert.equal(r.code, code, `${r.stderr}`);
    assert.match(r.stderr, pattern);
  };

  it('sets, resolves, lists, removes and searches the same way over HTTP and locally', async () => {
    const v1 = await rjson(['artifact', 'create', '--name', 'deploy', '--file', file('d1.sh', 'echo 1\n'), '--label', 'team=ops'], agent);
    const id = String(v1.artifact_id);
    await rjson(['artifact', 'create', '--name', 'report', '--file', file('r.txt', 'r\n'), '--label', 'team=dev'], agent);
    await rjson(['artifact', 'propose', 'deploy'], agent);
    await rjson(['artifact', 'approve', 'deploy', '--evidence', 'CR-1']);

    for (const run of [remote, (a: string[], t: string) => local(a, t)]) {
      await fails(run(['alias', 'set', 'deploy', 'prod', '--version', '1'], agent), 6, /FORBIDDEN/);
      await fails(run(['alias', 'set', 'deploy', 'Prod', '--version', '1'], human), 2, /did you mean @prod/);
    }
    const set = await rjson(['alias', 'set', 'deploy', 'prod', '--version', '1', '--reason', 'release 1']);
    assert.deepEqual([set.changed, (set.alias as Json).version, (set.alias as Json).state], [true, 1, 'APPROVED']);
    const staged = await ljson(['alias', 'set', 'deploy', 'staging', '--version', '@prod']);
    assert.equal((staged.alias as Json).version, 1);
    const list = await same(['alias', 'list', 'deploy'], agent);
    assert.deepEqual(
      (list.aliases as Json[]).map((a) => [a.name, a.version]),
      [
        ['prod', 1],
        ['staging', 1],
      ],
    );
    const shown = await same(['artifact', 'show', 'deploy'], agent);
    assert.deepEqual(Object.keys(shown.aliases as Json), ['prod', 'staging']);
    assert.match((await ok(remote(['artifact', 'show', 'deploy'], agent), 'show')).stdout, /@prod → v1/);

    // --version @prod wherever a version is taken: a read, and a lifecycle command (exec start)
    const out = path.join(dir, 'got.sh');
    const got = await rjson(['artifact', 'get', 'deploy', '--version', '@prod', '--out', out], agent);
    assert.equal(fs.readFileSync(out, 'utf8'), 'echo 1\n');
    assert.deepEqual(got.chosen_version, { version: 1, state: 'APPROVED', reason: 'the alias @prod' });
    const toStdout = await ok(local(['artifact', 'get', id, '--version', '@staging', '--out', '-'], agent), 'get -');
    assert.equal(toStdout.stdout, 'echo 1\n');
    assert.match(toStdout.stderr, /chose .* v1 \(APPROVED\): the alias @staging/);
    const run = await rjson(['exec', 'start', 'deploy', '--version', '@prod'], agent);
    await rjson(['exec', 'finish', String(run.run_id), '--status', 'SUCCEEDED', '--exit-code', '0'], agent);
    for (const r of [remote, (a: string[], t: string) => local(a, t)])
      await fails(r(['artifact', 'get', 'deploy', '--version', '@nope', '--out', '-'], agent), 3, /no alias @nope/);

    // search: name prefix, labels, state, paged
    const byPrefix = await same(['search', '--name-prefix', 'dep', '--label', 'team=ops'], agent);
    assert.deepEqual(
      (byPrefix.items as Json[]).map((h) => h.name),
      ['deploy'],
    );
    const executed = await same(['search', '--state', 'EXECUTED'], agent);
    assert.deepEqual(
      (executed.items as Json[]).map((h) => [h.name, h.version]),
      [['deploy', 1]],
    );
    const first = await same(['search', '--limit', '1'], agent);
    assert.ok(first.cursor);
    const second = await same(['search', '--limit', '1', '--cursor', String(first.cursor)], agent);
    assert.deepEqual(
      [...(first.items as Json[]), ...(second.items as Json[])].map((h) => h.name),
      ['deploy', 'report'],
    );

    const removed = await rjson(['alias', 'rm', 'deploy', 'staging', '--reason', 'done']);
    assert.equal((removed.removed as Json).version, 1);
    await fails(remote(['alias', 'rm', 'deploy', 'staging'], human), 3, /no alias @staging/);
    assert.deepEqual(
      ((await same(['alias', 'list', 'deploy'], agent)).aliases as Json[]).map((a) => a.name),
      ['prod'],
    );

    // every move is in the chain, and the chain verifies
    const hist = await rjson(['history', 'deploy'], agent);
    assert.deepEqual(
      (hist.entries as Json[]).filter((e) => e.type === 'alias').map((e) => [e.alias, e.action]),
      [
        ['prod', 'set'],
        ['staging', 'set'],
        ['staging', 'removed'],
      ],
    );
    const verified = await ok(local(['audit', 'verify', id]), 'audit verify');
    assert.match(verified.stdout, /intact/);

    // Tampering is detected: an alias entry edited (its hash), or the HEAD's alias moved behind the chain's back
    const db = new Database(path.join(data, 'alp.db'));
    try {
      const row = db.prepare("SELECT SK, attrs FROM items WHERE PK = ? AND SK LIKE 'ALIAS#%' ORDER BY SK LIMIT 1").get(`ART#${id}`) as {
        SK: string;
        attrs: string;
      };
      const head = db.prepare("SELECT attrs FROM items WHERE PK = ? AND SK = 'HEAD'").get(`ART#${id}`) as { attrs: string };
      const update = db.prepare('UPDATE items SET attrs = ? WHERE PK = ? AND SK = ?');
      update.run(JSON.stringify({ ...JSON.parse(row.attrs), version: 2 }), `ART#${id}`, row.SK);
      await fails(local(['audit', 'verify', id]), 5, new RegExp(`${row.SK}.*hash does not match`));
      update.run(row.attrs, `ART#${id}`, row.SK);
      const attrs = JSON.parse(head.attrs) as { aliases: Record<string, { version: number }> };
      (attrs.aliases.prod as { version: number }).version = 2;
      update.run(JSON.stringify(attrs), `ART#${id}`, 'HEAD');
      await fails(local(['audit', 'verify', id]), 5, /alias @prod on the HEAD \(v2\) differs from the chain \(v1\)/);
      update.run(head.attrs, `ART#${id}`, 'HEAD');
      await ok(local(['audit', 'verify', id]), 'audit verify after the rows were put back');
    } finally {
      db.close();
    }
  });
});
