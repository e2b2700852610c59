/**
 * Issue 17 B13 end to end: archive, then the retention protocol (grace, approved quarantine, approved
 * purge on the injected clock) reclaims the archived originals; the version still reads (from the copy;
 * ARCHIVED_COLD behind the GLACIER model), the audit chain verifies, reconcile has no failing finding.
 * (The run asks digestWhy(digest, key) for a candidate's own digest; reconcile treats a superseded
 * original whose purge retention recorded like a retained one.)
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { ArchivedCold } from '../../src/core/errors.ts';
import { openVersionContent } from '../../src/lifecycle/artifacts.ts';
import { reconcile } from '../../src/recovery/reconcile.ts';
import { scanReferences } from '../../src/retention/references.ts';
import { stopDistributedServers } from '../helpers/distributed.ts';
import { archivedVersion, archiveProfiles, operator, runRetention } from '../helpers/retention-harness.ts';
import { collect } from '../helpers/tmp.ts';

const profiles = archiveProfiles();
after(stopDistributedServers);

for (const profile of profiles) {
  describe(`archived originals are reclaimed through the retention protocol (${profile.name})`, () => {
    it('grace, approved quarantine, approved purge of the originals; reads, audit and reconcile stay clean', async () => {
      const { i, restore, cold } = await profile.open();
      const ctx = i.ctx;
      const version = await archivedVersion(ctx);
      const originals = [version.content_key, version.metadata_key].sort();
      await runRetention(i, 'QUARANTINE', restore);
      ctx.clock.advance(7 * DAY_MS);
      const q = await runRetention(i, 'QUARANTINE', restore);
      assert.deepEqual([...q.quarantined].sort(), originals, JSON.stringify(q));
      ctx.clock.advance(30 * DAY_MS);
      const purge = await runRetention(i, 'PURGE', restore);
      assert.deepEqual([...purge.purged].sort(), originals, JSON.stringify(purge));
      for (const k of originals) assert.equal(await ctx.content.head(k), undefined, `${k} is gone`);
      if (cold) await assert.rejects(openVersionContent(ctx, version.artifact_id, 1), ArchivedCold);
      else assert.equal((await collect((await openVersionContent(ctx, version.artifact_id, 1)).stream)).toString(), 'archived bytes');
      assert.equal((await verifyArtifactAudit(ctx, version.artifact_id)).ok, true);
      const later = await scanReferences(ctx);
      try {
        assert.deepEqual([...later.candidates()], [], 'nothing left, nothing failed closed');
      } finally {
        later.close();
      }
      const report = await reconcile(ctx, { actor: operator.id });
      const failing = report.findings.filter((f) => f.kind !== 'derived' && f.kind !== 'unexpected');
      assert.deepEqual(failing, [], JSON.stringify(failing.slice(0, 3)));
    });
  });
}
