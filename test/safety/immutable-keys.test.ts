/**
 * Issue 14 item 1: a late writer must never replace committed bytes. An upload that outlives its
 * reservation (the clock moved past UPLOAD_RESERVATION_TTL_MS while its body is still open) loses to
 * the newer upload that took the reservation over and committed: CONFLICT, nothing left behind, and
 * the committed record still reads back verified. Both profiles.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sha256 } from '../../src/core/digest.ts';
import { Conflict } from '../../src/core/errors.ts';
import { artifactPk, COMPENSATION_SK_PREFIX } from '../../src/core/keys.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { compensate } from '../../src/lifecycle/compensation.ts';
import { finishExecution, readExecution, startExecution, UPLOAD_RESERVATION_TTL_MS, uploadOutput } from '../../src/lifecycle/executions.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { readVersion } from '../../src/lifecycle/versions.ts';
import { queryAll } from '../../src/store/item-store.ts';
import { bytesOf, collect } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';
import { heldBody, PROFILES, tempFilesBelow } from './profiles.ts';

for (const profile of PROFILES) {
  describe(`immutable keys (${profile.name})`, () => {
    it('issue 14 item 1: a late execution-output upload gets CONFLICT and the committed output still verifies', async () => {
      const ctx = await profile.open();
      const { version } = await createArtifact(ctx, agent, { name: 'late', filename: 'run.sh', body: bytesOf('echo\n') });
      const id = version.artifact_id;
      await propose(ctx, agent, id, 1);
      await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'CR-1' });
      const run = await startExecution(ctx, agent, id, 1);

      const late = heldBody('late writer: ', 'its bytes arrive after the reservation expired\n');
      const lateUpload = uploadOutput(ctx, agent, run.run_id, 'stdout.log', late.body).then(
        () => 'committed',
        (e: unknown) => e,
      );
      await late.pulled;
      ctx.clock.advance(UPLOAD_RESERVATION_TTL_MS + 1000);
      const newer = await uploadOutput(ctx, agent, run.run_id, 'stdout.log', bytesOf('the newer upload\n'));
      late.release();
      const outcome = await lateUpload;
      assert.ok(outcome instanceof Conflict, `the late writer must lose with CONFLICT, got ${String(outcome)}`);

      const exec = await readExecution(ctx, run.run_id);
      assert.deepEqual(exec.outputs['stdout.log'], newer);
      const bytes = await collect(await ctx.content.get(newer.key, newer.digest as never, { expectedSize: newer.size }));
      assert.equal(bytes.toString(), 'the newer upload\n');
      assert.deepEqual(tempFilesBelow(ctx.contentRoot), [], 'no temp file left behind');
      assert.equal(exec['reserved:stdout.log'] === undefined || typeof exec['reserved:stdout.log'] === 'string', true);
      await finishExecution(ctx, agent, run.run_id, { status: 'SUCCEEDED', exitCode: 0 });
    });

    it('issue 14 item 1: a late compensation rollback upload gets CONFLICT and the committed rollback still verifies', async () => {
      const ctx = await profile.open();
      const { version } = await createArtifact(ctx, agent, { name: 'late-comp', filename: 'run.sh', body: bytesOf('echo\n') });
      const id = version.artifact_id;
      await propose(ctx, agent, id, 1);
      await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'CR-1' });
      const run = await startExecution(ctx, agent, id, 1);
      await finishExecution(ctx, agent, run.run_id, { status: 'FAILED', exitCode: 1 });

      const late = heldBody('late rollback: ', 'after the reservation expired\n');
      const lateComp = compensate(ctx, agent, id, 1, { filename: 'undo.sh', body: late.body }).then(
        () => 'committed',
        (e: unknown) => e,
      );
      await late.pulled;
      ctx.clock.advance(UPLOAD_RESERVATION_TTL_MS + 1000);
      const newer = await compensate(ctx, agent, id, 1, { filename: 'undo.sh', body: bytesOf('the newer rollback\n') });
      late.release();
      const outcome = await lateComp;
      assert.ok(outcome instanceof Conflict, `the late writer must lose with CONFLICT, got ${String(outcome)}`);

      const v = newer.version;
      assert.equal(v.content_hash, sha256('the newer rollback\n'));
      const bytes = await collect(await ctx.content.get(v.content_key, v.content_hash, { expectedSize: v.size }));
      assert.equal(bytes.toString(), 'the newer rollback\n');
      assert.equal((await readVersion(ctx.items, id, 1)).state, 'COMPENSATING');
      const comps = await queryAll(ctx.items, { pk: artifactPk(id), sk: { beginsWith: COMPENSATION_SK_PREFIX }, consistent: true });
      assert.equal(comps.length, 1, 'one compensation record');
      assert.deepEqual(tempFilesBelow(ctx.contentRoot), [], 'no temp file left behind');
    });
  });
}
