/**
 * The remote CLI (issue 19 A3): the README's CLI walk-through run with `--server` against a real
 * `alp start` process, every command through HTTP, and compared with the local CLI on the same
 * installation — the same JSON documents, the same text, the same exit codes and error codes (errors as
 * one JSON line on stderr with --json). The CLI runs in this process (test/helpers/cli-inprocess.ts:
 * the entry function the binary runs) to keep the walk fast; exec run in its own processes, with signals,
 * is test/cli/remote-cli-ops.test.ts.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { sha256 } from '../../src/core/digest.ts';
import { captureCli } from '../helpers/cli-inprocess.ts';
import { remoteAndLocalCli } from '../helpers/remote-cli.ts';

type Json = Record<string, unknown>;
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

describe('remote CLI: the README walk-through over HTTP (issue 19 A3)', () => {
  const cli = remoteAndLocalCli('alp-remote-cli', 'agent');
  const { dir, remote, local, ok, rjson, same, sameText, file } = cli;
  let human = '';
  let agent = '';
  let humanId = '';
  before(() => {
    ({ human, agent, humanId } = cli.tokens);
  });

  it('creates, reads, moves, runs, compensates and archives over HTTP with the local CLI’s outputs', async () => {
    // alp artifact create | version (by name) — uploads carry the file's digest; --digest is checked by the server
    const script = file('deploy.sh', 'echo deploy 1\n');
    const digest = sha256('echo deploy 1\n');
    const v1 = await rjson([
      'artifact',
      'create',
      '--name',
      'deploy',
      '--file',
      script,
      '--kind',
      'script',
      '--label',
      'team=ops',
      '--quorum',
      '1',
      '--digest',
      digest,
    ]);
    assert.deepEqual([v1.version, v1.state, v1.content_hash, (v1.created_by as Json).id], [1, 'DRAFT', digest, 'agent']);
    const id = String(v1.artifact_id);
    const v2 = await rjson(['artifact', 'version', 'deploy', '--file', file('deploy2.sh', 'echo deploy 2\n'), '--filename', 'deploy.sh']);
    assert.deepEqual([v2.artifact_id, v2.version, v2.filename], [id, 2, 'deploy.sh']);

    // alp artifact show | list — the same documents and text as the local CLI
    const shown = await same(['artifact', 'show', 'deploy']);
    assert.deepEqual([shown.labels, (shown.versions as Json[]).length], [{ team: 'ops' }, 2]);
    assert.match(await sameText(['artifact', 'show', 'deploy']), /labels: team=ops/);
    await same(['artifact', 'list', '--name', 'deploy']);
    const page = await same(['artifact', 'list', '--state', 'DRAFT', '--limit', '1']);
    await same(['artifact', 'list', '--state', 'DRAFT', '--limit', '1', '--cursor', String(page.cursor)]);

    // alp artifact get — verified bytes, to a file and to stdout; the default version is said on stderr
    const out = path.join(dir, 'got.sh');
    const got = await rjson(['artifact', 'get', 'deploy', '--version', '1', '--out', out]);
    assert.deepEqual([fs.readFileSync(out, 'utf8'), got.content_hash, got.out], ['echo deploy 1\n', digest, out]);
    const toStdout = await ok(remote(['artifact', 'get', id, '--out', '-']), 'get -');
    assert.equal(toStdout.stdout, 'echo deploy 2\n');
    assert.match(toStdout.stderr, new RegExp(`^alp: chose ${id} v2 \\(DRAFT\\): the latest version`, 'm'));

    // alp artifact propose | withdraw | transition | approve — defaults chosen as locally
    const proposed = await rjson(['artifact', 'propose', 'deploy']);
    assert.deepEqual([proposed.state, (proposed.chosen_version as Json).version], ['PROPOSED', 2]);
    assert.equal((await rjson(['artifact', 'withdraw', 'deploy'])).state, 'DRAFT');
    assert.equal((await rjson(['artifact', 'transition', 'deploy', '--version', '2', '--to', 'proposed'])).state, 'PROPOSED');
    const approved = await rjson(
      ['artifact', 'approve', 'deploy', '--evidence', 'CR-1', '--expires-in', '7d', '--comment', 'reviewed'],
      human,
    );
    const approval = approved.approval as Json;
    assert.deepEqual(
      [approval.counted, approval.comment, (approval.actor as Json).id, (approved.version as Json).state],
      [true, 'reviewed', humanId, 'APPROVED'],
    );
    assert.equal((approved.chosen_version as Json).state, 'PROPOSED');

    // alp exec start | upload | finish | show
    const started = await ok(remote(['exec', 'start', 'deploy']), 'exec start');
    const run = started.stdout.trim();
    assert.match(run, ULID);
    assert.match(started.stderr, /v2 \(APPROVED\): the APPROVED version/);
    const uploaded = await rjson(['exec', 'upload', run, 'stdout.log', '--file', file('out.log', 'deployed\n')]);
    assert.deepEqual([uploaded.digest, uploaded.size], [sha256('deployed\n'), 9]);
    const finished = await rjson(['exec', 'finish', run, '--status', 'failed', '--exit-code', '2']);
    assert.deepEqual([finished.status, finished.exit_code], ['FAILED', 2]);
    await same(['exec', 'show', run]);
    assert.match(await sameText(['exec', 'show', run]), /exit code: 2/);

    // alp compensate — the rollback is its own artifact, approved and run (exec run over HTTP), then archive
    const comp = await rjson(['compensate', 'deploy', '--file', file('rollback.sh', 'echo undo\n')]);
    assert.deepEqual([(comp.compensated as Json).state, (comp.chosen_version as Json).state], ['COMPENSATING', 'FAILED']);
    const compId = String((comp.compensation as Json).artifact_id);
    await rjson(['artifact', 'propose', compId]);
    await rjson(['artifact', 'approve', compId, '--evidence', 'CR-2'], human);
    const undo = await remote(['exec', 'run', compId, '--json', '--', process.execPath, '-e', "console.log('undone')"]);
    assert.equal(undo.code, 0, undo.stderr);
    assert.equal((JSON.parse(undo.stdout) as Json).status, 'SUCCEEDED');
    assert.equal(((await rjson(['artifact', 'show', id])).versions as Json[])[1]?.state, 'COMPENSATED');

    // alp provenance add | show, history, query, verify — the same documents as the local CLI
    // The step produced v1's bytes: the in-toto statement's subject (an artifact whose steps produced nothing has none).
    const step = await rjson([
      'provenance',
      'add',
      'deploy',
      '--action',
      'generate',
      '--model',
      'model-x',
      '--input',
      sha256('prompt'),
      '--output',
      digest,
    ]);
    assert.deepEqual([step.step, step.action, step.actor_claimed], [1, 'generate', false]);
    await same(['provenance', 'show', 'deploy']);
    await same(['provenance', 'show', 'deploy', '--format', 'in-toto']);
    // Signed (issue 20 item 3): the same envelope over HTTP as locally, byte for byte.
    await same(['provenance', 'show', 'deploy', '--format', 'dsse']);
    await same(['keys', 'show']);
    await same(['artifact', 'attest', 'deploy', '--version', '1']);
    const archived = await rjson(['archive', 'deploy'], human);
    assert.ok((archived.archived as Json[]).length >= 4, JSON.stringify(archived));
    // An archived artifact reads the same (its HEAD's archive mark is part of the response schema).
    assert.deepEqual(((await same(['artifact', 'show', 'deploy'])).archived as Json).status, 'ARCHIVED');
    await same(['artifact', 'list', '--name', 'deploy']);
    const history = await same(['history', 'deploy']);
    assert.ok((history.entries as Json[]).some((e) => e.type === 'execution_finish'));
    // A withdrawal over HTTP is recorded as the local one is (the service's default reason).
    assert.ok(
      (history.entries as Json[]).some((e) => e.to === 'DRAFT' && e.reason === 'withdrawn'),
      'the withdrawal’s reason',
    );
    const today = new Date().toISOString().slice(0, 10);
    for (const q of [
      ['query', 'transitions', '--date', today],
      ['query', 'runs', '--date', today],
      ['query', 'provenance', '--date', today],
      ['query', 'approvals', '--approver', humanId],
      ['query', 'compensations', '--state', 'EXECUTED'],
    ]) {
      assert.ok(((await same(q)).items as Json[]).length > 0, q.join(' '));
    }
    const verified = await same(['verify', id]);
    assert.equal(verified.ok, verified.objects);
  });

  it('fails with the local exit codes and error codes, one JSON line on stderr with --json', async () => {
    const id = String((await rjson(['artifact', 'create', '--name', 'errs', '--file', file('e.sh', 'echo e\n')])).artifact_id);
    const cases: Array<[string[], string, number, string]> = [
      [['artifact', 'show', 'no-such-name'], agent, 3, 'NOT_FOUND'],
      [['artifact', 'get', id, '--version', '9', '--out', path.join(dir, 'never')], agent, 3, 'NOT_FOUND'],
      [['exec', 'show', 'not-a-run'], agent, 3, 'NOT_FOUND'],
      [['verify', 'not-an-id'], agent, 3, 'NOT_FOUND'],
      [['artifact', 'list', '--state', 'BOGUS'], agent, 2, 'INVALID'],
      [['artifact', 'approve', id, '--evidence', 'x'], agent, 6, 'FORBIDDEN'],
      [['exec', 'start', id], agent, 4, 'ILLEGAL_TRANSITION'],
      [['artifact', 'version', id, '--file', file('v.sh', 'v\n'), '--digest', sha256('not v\n')], agent, 5, 'INTEGRITY'],
      [['artifact', 'show', id], 'alp_thisTokenWasNeverIssuedByThisInstallation00', 6, 'UNAUTHENTICATED'],
    ];
    for (const [args, token, exit, code] of cases) {
      const what = `alp ${args.join(' ')}`;
      const errors = [];
      for (const r of [await remote([...args, '--json'], token), await local([...args, '--json'], token)]) {
        assert.equal(r.code, exit, `${what}: ${r.stderr}`);
        assert.equal(r.stdout, '', what);
        const lines = r.stderr.split('\n').filter(Boolean);
        assert.equal(lines.length, 1, `${what}: one line on stderr: ${r.stderr}`);
        const { error } = JSON.parse(lines[0] as string) as { error: Json };
        assert.deepEqual([error.code, error.exit_code, error.type], [code, exit, `urn:alp:problem:${code.toLowerCase()}`], what);
        errors.push(error);
      }
      assert.equal(errors[0]?.title, errors[1]?.title, what);
      // Without --json: the one text line, `alp: CODE: message`.
      const text = await remote(args, token);
      assert.equal(text.code, exit, what);
      assert.match(text.stderr.trim(), new RegExp(`^alp: ${code}: [^\\n]+$`), what);
    }
    // A server that does not answer: the client's network error, exit 1, still one JSON line.
    const down = await captureCli(['artifact', 'list', '--server', 'http://127.0.0.1:1', '--token', agent, '--json']);
    assert.equal(down.code, 1, down.stderr);
    assert.equal((JSON.parse(down.stderr) as { error: Json }).error.code, 'STORAGE');
    assert.match(down.stderr, /no answer/);
  });
});
