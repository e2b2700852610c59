/**
 * Issue 17 B6 "the approval is a review", through the CLI in child processes: `alp retention plan`
 * prints the plan and its retentionMaterialDigest; `alp retention run` requires `--plan-digest` and
 * refuses (exit CONFLICT, 4) when the plan it recomputes differs; the same digest is carried out.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';

describe('alp retention plan | run --plan-digest (issue 17 B6)', () => {
  it('the approval is a review: plan prints the digest, run requires it and refuses a plan that differs (exit 4)', async () => {
    const dir = tempDir('alp-plan-cli');
    const src = path.join(dir, 'src');
    const restored = path.join(dir, 'restored');
    await alpJson(['init', '--data', src]);
    const content = await FsContentStore.open(path.join(src, 'content'));
    await content.put('artifacts/orphan/v1/a', bytesOf('nobody names me'));
    await content.close();
    await alpJson(['backup', '--data', src, '--out', path.join(dir, 'b1')]);
    await alpJson(['restore', '--data', restored, '--from', path.join(dir, 'b1')]);
    await alpJson(['reconcile', '--data', restored, '--activate']);
    const t0 = Date.now();
    const at = (days: number) => ({ env: { ALP_NOW: new Date(t0 + days * DAY_MS).toISOString() } });
    const plan = (days: number, extra: string[] = []) =>
      alpJson<{ plan_digest: string; plan: { candidates: Array<{ key: string }> }; rows: unknown[]; totals: Record<string, number> }>(
        ['retention', 'plan', '--data', src, '--action', 'QUARANTINE', '--epoch', '1', '--json', ...extra],
        at(days),
      );
    const run = (days: number, digest: string | undefined, extra: string[] = []) =>
      runAlp(
        [
          'retention',
          'run',
          '--data',
          src,
          '--action',
          'QUARANTINE',
          '--epoch',
          '1',
          '--evidence',
          'CHG-B6',
          '--restore',
          restored,
          '--json',
          ...(digest ? ['--plan-digest', digest] : []),
          ...extra,
        ],
        at(days),
      );

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
    const text = await runAlp(['retention', 'plan', '--data', src, '--action', 'QUARANTINE', '--epoch', '1'], at(8));
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
