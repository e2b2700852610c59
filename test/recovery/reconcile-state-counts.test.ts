/**
 * Reconciliation judges the per-state version counters (lifecycle/state-counts.ts) against a recount
 * of the versions its own scan of the base table read: on a real SQLite installation a drifted counter
 * is a finding and fails the result; counters that moved during the recount are `busy`, not judged;
 * counters never backfilled are not judged either.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { INSTALLATION_SK, STATE_COUNTS_SK, SYS_PK } from '../../src/core/keys.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import {
  checkStateCounts,
  compareStateCounts,
  readCounterReading,
  readStateCounts,
  recountStates,
  stateCountsKey,
} from '../../src/lifecycle/state-counts.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { reconcile } from '../../src/recovery/reconcile.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';
import { embeddedAt, populate } from './helpers.ts';

async function installation() {
  const dir = path.join(tempDir('reconcile-counts'), 'alp');
  const ctx = await embeddedAt(dir);
  await populate(ctx, 2);
  return ctx;
}

describe('reconcile checks the state counters', () => {
  it('VERIFIED while the counters equal the recount; a drifted counter (after reopening the file) is a finding and FAILS it', async () => {
    const ctx = await installation();
    const clean = await reconcile(ctx, { actor: 't' });
    assert.equal(clean.status, 'VERIFIED', JSON.stringify(clean.findings));
    assert.deepEqual(clean.state_counts, { status: 'checked', mismatches: 0 });

    await ctx.items.update(stateCountsKey(''), { add: { DRAFT: 2 } });
    await ctx.items.close();
    const reopened = await embeddedAt(ctx.dir);
    try {
      const direct = await checkStateCounts(reopened);
      assert.equal(direct.status, 'checked');
      assert.equal(direct.mismatches.length, 1);
      const [m] = direct.mismatches;
      assert.equal(m?.counter, (m?.recount ?? 0) + 2);

      const drifted = await reconcile(reopened, { actor: 't' });
      assert.equal(drifted.status, 'FAILED');
      assert.deepEqual(drifted.state_counts, { status: 'checked', mismatches: 1 });
      const finding = drifted.findings.find((f) => f.problem === 'count_mismatch');
      assert.equal(finding?.kind, 'item');
      assert.equal(finding?.row, `COUNTS ${STATE_COUNTS_SK}`);
      assert.match(finding?.detail ?? '', new RegExp(`says ${m?.counter} DRAFT .* recount to ${m?.recount}`));
    } finally {
      await reopened.items.close();
    }
  });

  it('a state change between the first counter read and the recount makes the check busy, not a mismatch', async () => {
    const ctx = await installation();
    try {
      const { version } = await createArtifact(ctx, agent, { name: 'moving', filename: 'f', body: bytesOf('m') });
      const before = await readCounterReading(ctx);
      await propose(ctx, agent, version.artifact_id, 1);
      const check = await compareStateCounts(ctx, before, await recountStates(ctx));
      assert.equal(check.status, 'busy');
      assert.deepEqual(check.mismatches, [], 'the counters read after the recount agree with it');
      assert.equal((await checkStateCounts(ctx)).status, 'checked');
    } finally {
      await ctx.items.close();
    }
  });

  it('counters never backfilled are not judged; only counter items are summed', async () => {
    const ctx = await installation();
    try {
      const installationKey = { PK: SYS_PK, SK: INSTALLATION_SK };
      const total = (await readStateCounts(ctx)).total;
      await ctx.items.update(installationKey, { set: { DRAFT: 1000 } });
      assert.equal((await readStateCounts(ctx)).total, total, 'a DRAFT attribute on the installation record is no count');
      await ctx.items.update(installationKey, { remove: ['state_counts'] });
      await ctx.items.update(stateCountsKey(''), { add: { DRAFT: 2 } });
      const report = await reconcile(ctx, { actor: 't' });
      assert.equal(report.state_counts.status, 'not_exact');
      assert.equal(
        report.findings.some((f) => f.problem === 'count_mismatch'),
        false,
      );
    } finally {
      await ctx.items.close();
    }
  });
});
