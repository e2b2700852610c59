/**
 * Issue 17 B14, the seed's API shape: `new ArtifactRetention(database, artifactRoot)` opens the embedded
 * stores itself (a SQLite file, a content directory), lazily, and close() closes them; the methods are
 * async (documented on the class).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { DAY_MS } from '../../src/core/clock.ts';
import { NotFound } from '../../src/core/errors.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import { embedded, epochOf } from '../helpers/retention-harness.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { seedStyleHost } from './run-harness.ts';

describe('new ArtifactRetention(database, artifactRoot) (seed 004 "Trusted maintenance contract")', () => {
  it('const retention = new ArtifactRetention(database, artifactRoot): plan, run with a seed-style host, close', async () => {
    const i = await embedded.open();
    const restore = await i.verifiedRestore();
    await i.ctx.content.put('artifacts/api/v1/f', bytesOf('reclaim me'));
    const database = i.ctx.items.location;
    const artifactRoot = i.ctx.content.location.replace(/^file:/, '');
    const retention = new ArtifactRetention(database, artifactRoot, { clock: i.ctx.clock });
    try {
      const first = await retention.run(await epochOf(i.ctx), 'QUARANTINE', seedStyleHost(i.ctx, { restore }), { maxArtifacts: 100 });
      assert.deepEqual(first.observed, ['artifacts/api/v1/f']);
      i.ctx.clock.advance(7 * DAY_MS);
      const { plan, plan_digest } = await retention.plan(await epochOf(i.ctx), 'QUARANTINE', { maxArtifacts: 100 });
      assert.deepEqual(
        plan.candidates.map((c) => c.key),
        ['artifacts/api/v1/f'],
      );
      const done = await retention.run(await epochOf(i.ctx), 'QUARANTINE', seedStyleHost(i.ctx, { restore }), { planDigest: plan_digest });
      assert.deepEqual(done.quarantined, ['artifacts/api/v1/f']);
    } finally {
      await retention.close();
    }
    await retention.close(); // idempotent
    assert.equal(await epochOf(i.ctx), 1, 'the installation is still usable through its own store');
    await i.close();
  });

  it('a database path that does not exist is NOT_FOUND (never created)', async () => {
    const dir = tempDir('alp-api');
    const retention = new ArtifactRetention(path.join(dir, 'missing.db'), path.join(dir, 'content'));
    await assert.rejects(retention.plan(1, 'QUARANTINE'), NotFound);
    await retention.close();
  });
});
