/**
 * Issue 17 B6 "the approval is a review", through the CLI in child processes: `alp retention plan`
 * prints the plan and its retentionMaterialDigest; `alp retention run` requires `--plan-digest` and
 * refuses (exit CONFLICT, 4) when the plan it recomputes differs; the same digest is carried out.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runAlp } from '../helpers/cli.ts';
import { cliRetention } from '../helpers/retention-harness.ts';

describe('alp retention plan | run --plan-digest (issue 17 B6)', () => {
  it('the approval is a review: plan prints the digest, run requires it and refuses a plan that differs (exit 4)', async () => {
    const cli = await cliRetention('alp-plan-cli', 'artifacts/orphan/v1/a');
    const { plan, at } = cli;
    const run = (days: number, digest: string | undefined, extra: string[] = []) => cli.run(days, { ...(digest ? { digest } : {}), extra });

    const missing = await run(0, undefined);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /--plan-digest/);

    const first = await plan(0);
    assert.equal(first.plan.candidates.length, 0);
    assert.equal(first.totals.UNOBSERVED, 1);
    const observed = await run(0, first.plan_digest);
    assert.equal(observed.code, 0, observed.stderr);
    assert.deepEqual(JSON.parse(observed.stdout).observed, ['artifacts/orphan/v1/a']);

    const reviewed = await plan(8);
    assert.deepEqual(
      reviewed.plan.candidates.map((c) => c.key),
      ['artifacts/orphan/v1/a'],
    );
    const text = await runAlp(['retention', 'plan', '--data', cli.src, '--action', 'QUARANTINE', '--epoch', '1'], at(8));
    assert.equal(text.code, 0, text.stderr);
    assert.ok(text.stdout.includes(`plan digest ${reviewed.plan_digest}`), text.stdout);
    assert.match(text.stdout, /GRACE +eligible for QUARANTINE .*artifacts\/orphan\/v1\/a/);

    // The operator's run differs from the reviewed plan (a pin was added): refused, nothing changed.
    const pinned = `sha256:${'0'.repeat(64)}`;
    const refused = await run(8, reviewed.plan_digest, ['--pin', pinned]);
    assert.equal(refused.code, 4, refused.stderr);
    const r = JSON.parse(refused.stdout);
    assert.equal(r.status, 'REFUSED');
    assert.ok(r.reason.includes(reviewed.plan_digest), r.reason);
    assert.deepEqual(r.quarantined, []);

    const done = await run(8, reviewed.plan_digest);
    assert.equal(done.code, 0, done.stderr);
    const d = JSON.parse(done.stdout);
    assert.deepEqual(d.quarantined, ['artifacts/orphan/v1/a']);
    assert.equal(typeof d.fence_ms, 'number');
  });
});
