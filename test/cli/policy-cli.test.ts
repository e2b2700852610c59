/**
 * `alp policy show|set|log` (issue 20 item 4) with `--server` against a real `alp start` process and
 * on the same installation locally: the same documents and text either way (GET /v1/policy, PUT
 * /v1/policy, GET /v1/policy/log); `set` refused for an agent token (exit 6, FORBIDDEN) over HTTP as
 * locally, and nothing recorded; a lost update refused (exit 4, POLICY_CHANGED); a policy the rules
 * refuse is INVALID (exit 2) both ways.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { Captured } from '../helpers/cli-inprocess.ts';
import { remoteAndLocalCli } from '../helpers/remote-cli.ts';

type Json = Record<string, unknown>;

/** The one JSON error line a --json run printed on stderr. */
function jsonError(r: Captured): Json {
  const lines = r.stderr.split('\n').filter(Boolean);
  assert.equal(lines.length, 1, r.stderr);
  return (JSON.parse(lines[0] as string) as { error: Json }).error;
}

describe('CLI: alp policy show|set|log, local and --server (issue 20 item 4)', () => {
  const cli = remoteAndLocalCli('alp-policy-cli', 'human');
  const { remote, local, rjson, ljson, same, sameText, file } = cli;
  let agent = '';
  let humanId = '';
  before(() => {
    ({ agent, humanId } = cli.tokens);
  });

  it('shows, sets and logs the policy over HTTP with the local CLI’s documents and text', async () => {
    // Never set: the defaults, version 0, and an empty log — the same both ways.
    const initial = await same(['policy', 'show'], agent);
    assert.deepEqual([initial.version, initial.updated_by, (initial.policy as Json).self_approval], [0, null, 'not-counted']);
    assert.match(await sameText(['policy', 'show'], agent), /^version 0 \(never set: the defaults\)/);
    assert.deepEqual((await same(['policy', 'log'], agent)).events, []);
    assert.equal(await sameText(['policy', 'log'], agent), 'no changes: the default policy is in force\n');

    // alp policy set over HTTP, with a human token: flags on top of the policy in force.
    const set = await rjson([
      'policy',
      'set',
      '--quorum',
      '2',
      '--quorum-for',
      'kind=migration:3',
      '--self-approval',
      'counted',
      '--require-evidence',
      '*:CR-[0-9]+',
      '--reason',
      'SOX',
    ]);
    assert.deepEqual([set.changed, set.version, set.updated_by], [true, 1, { id: humanId, kind: 'human' }]);
    assert.deepEqual(set.policy, {
      min_quorum: 2,
      quorum_rules: [{ match: { kind: 'migration' }, quorum: 3 }],
      self_approval: 'counted',
      max_approval_lifetime_ms: (initial.policy as Json).max_approval_lifetime_ms,
      evidence_rules: [{ match: {}, pattern: 'CR-[0-9]+' }],
    });
    // The installation reads what the server wrote; show is the same document and text both ways.
    const shown = await same(['policy', 'show'], agent);
    assert.deepEqual([shown.version, shown.hash, shown.policy], [1, set.hash, set.policy]);
    assert.match(await sameText(['policy', 'show']), /^version 1 by .* at .*\nmin quorum: {12}2\nquorum for kind=migration: 3\n/);
    // The same policy again: nothing recorded.
    const again = await rjson(['policy', 'set', '--quorum', '2']);
    assert.deepEqual([again.changed, again.version], [false, 1]);

    // A second change; the log has both, with before and after, the same over HTTP as locally.
    const second = await rjson(['policy', 'set', '--max-approval-lifetime', '30d', '--expected-version', '1']);
    assert.deepEqual([second.changed, second.version, (second.policy as Json).max_approval_lifetime_ms], [true, 2, 30 * 86_400_000]);
    const log = await same(['policy', 'log'], agent);
    const events = log.events as Json[];
    assert.deepEqual(
      events.map((e) => [e.seq, e.version, (e.by as Json).id, (e.by as Json).kind, e.reason]),
      [
        [1, 1, humanId, 'human', 'SOX'],
        [2, 2, humanId, 'human', undefined],
      ],
    );
    assert.deepEqual([events[0]?.before, events[0]?.after_hash, events[1]?.before], [initial.policy, set.hash, set.policy]);
    assert.equal(events[1]?.prev_hash, events[0]?.hash, 'hash-chained');
    assert.ok(
      events.every((e) => !('PK' in e) && !('SK' in e) && !('type' in e)),
      'the entries without their item keys',
    );
    const text = await sameText(['policy', 'log']);
    assert.match(
      text,
      new RegExp(`^#1 .* version 1 {2}by ${humanId} \\(human\\) {2}sha256:[0-9a-f]{64} -> ${set.hash}  reason "SOX"$`, 'm'),
    );
    assert.match(text, /^#2 .* version 2 {2}by /m);
  });

  it('refuses set for an agent token over HTTP (403) as locally, exit 6 FORBIDDEN, and records nothing', async () => {
    const before = await rjson(['policy', 'show'], agent);
    for (const [where, run] of [
      ['remote', remote],
      ['local', local],
    ] as const) {
      const r = await run(['policy', 'set', '--quorum', '5', '--reason', 'agent says so', '--json'], agent);
      assert.equal(r.code, 6, `${where}: ${r.stderr}`);
      assert.equal(r.stdout, '', where);
      const error = jsonError(r);
      assert.deepEqual([error.code, error.exit_code], ['FORBIDDEN', 6], where);
      const text = await run(['policy', 'set', '--quorum', '5'], agent);
      assert.equal(text.code, 6, where);
      assert.match(text.stderr, /^alp: FORBIDDEN: /m, where);
    }
    assert.deepEqual(await rjson(['policy', 'show'], agent), before, 'nothing changed');
    assert.equal(((await rjson(['policy', 'log'], agent)).events as Json[]).length, before.version, 'nothing recorded');
  });

  it('refuses a lost update (exit 4, POLICY_CHANGED) and a policy the rules refuse (exit 2, INVALID) both ways', async () => {
    const { version } = await rjson(['policy', 'show']);
    for (const [where, run] of [
      ['remote', remote],
      ['local', local],
    ] as const) {
      const stale = await run(['policy', 'set', '--quorum', '3', '--expected-version', String(Number(version) - 1), '--json']);
      assert.equal(stale.code, 4, `${where}: ${stale.stderr}`);
      const conflict = jsonError(stale);
      assert.deepEqual([conflict.code, (conflict.details as Json).reason], ['CONFLICT', 'POLICY_CHANGED'], where);
      const bad = await run(['policy', 'set', '--file', file('bad.json', JSON.stringify({ min_quorum: 11 })), '--json']);
      assert.equal(bad.code, 2, `${where}: ${bad.stderr}`);
      assert.equal(jsonError(bad).code, 'INVALID', where);
    }
    assert.equal((await rjson(['policy', 'show'])).version, version, 'nothing changed');
  });

  it('shows what the policy means for a version and the caller, the same over HTTP', async () => {
    const v = await rjson(
      ['artifact', 'create', '--name', 'migrate', '--kind', 'migration', '--file', file('m.sql', 'select 1;\n')],
      agent,
    );
    const id = String(v.artifact_id);
    await rjson(['artifact', 'propose', id], agent);
    const shown = await same(['policy', 'show', '--artifact', id, '--version', '1']);
    const review = shown.review as Json;
    assert.deepEqual(
      [review.artifact_id, review.version, review.state, review.quorum, review.counted_so_far, review.your_approval],
      [id, 1, 'PROPOSED', 3, 0, { counts: true }],
    );
    assert.match(await sameText(['policy', 'show', '--artifact', id, '--version', '1']), /your approval: would count$/m);
    const unknown = await remote(['policy', 'show', '--artifact', 'no-such-artifact', '--version', '1', '--json']);
    assert.equal(unknown.code, 3, unknown.stderr);
    assert.equal(jsonError(unknown).code, 'NOT_FOUND');
    const half = await remote(['policy', 'show', '--artifact', id]);
    assert.equal(half.code, 2, half.stderr);
    assert.match(half.stderr, /give --artifact and --version together/);

    // A change made on the installation (last here: a server reads the policy in force through its
    // cache, ALP_POLICY_CACHE_MS, so a review over HTTP may lag it) is in the log over HTTP at once.
    const { version } = await rjson(['policy', 'show']);
    const changed = await ljson(['policy', 'set', '--self-approval', 'not-counted', '--reason', 'on the host']);
    assert.deepEqual([changed.changed, changed.version], [true, Number(version) + 1]);
    const last = ((await same(['policy', 'log'], agent)).events as Json[]).at(-1) as Json;
    assert.deepEqual([last.version, last.reason, last.after_hash], [changed.version, 'on the host', changed.hash]);
  });
});
