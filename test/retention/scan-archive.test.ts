/**
 * Issue 17 B13, "Archived originals become reclaimable": after a verified archive the hot originals are
 * no longer referenced — the archive copies are — so retention reclaims them through its normal
 * protocol (grace, approved quarantine, approved purge, injected clock). Afterwards the version still
 * reads (from the archive copy; behind the GLACIER model, ARCHIVED_COLD saying how to restore it) and
 * its audit chain verifies. Strings elsewhere stay conservative: another artifact naming the original's
 * digest keeps it only through the copy, and a pin keeps the original itself.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { ArchivedCold } from '../../src/core/errors.ts';
import { createArtifact, openVersionContent } from '../../src/lifecycle/artifacts.ts';
import { scanReferences } from '../../src/retention/references.ts';
import { stopDistributedServers } from '../helpers/distributed.ts';
import { archivedVersion, archiveProfiles } from '../helpers/retention-harness.ts';
import { bytesOf, collect } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

const profiles = archiveProfiles();
after(stopDistributedServers);

for (const profile of profiles) {
  describe(`archived originals are reclaimable (${profile.name})`, () => {
    it('the originals are candidates (the copies are the references), not kept by their digest', async () => {
      const { i } = await profile.open();
      const ctx = i.ctx;
      const version = await archivedVersion(ctx);
      const scan = await scanReferences(ctx);
      try {
        assert.equal(scan.referencedWhy(version.content_key), undefined, 'the original is no longer referenced');
        assert.equal(scan.digestWhy(version.content_hash, version.content_key), undefined, 'nor kept by its digest');
        assert.ok(scan.digestWhy(version.content_hash), 'the digest itself is referenced (through the copy)');
        const copies = scan.keysWithDigest(version.content_hash).filter((k) => k.startsWith('archive/'));
        assert.equal(copies.length, 1);
        assert.ok(scan.referencedWhy(copies[0] as string), 'the copy is referenced');
        assert.deepEqual([...scan.candidates()].map((c) => c.key).sort(), [version.content_key, version.metadata_key].sort());
      } finally {
        scan.close();
      }
    });

    it('once the originals are gone (as a purge leaves them): the version reads from the copy, the chain verifies, the scan stands', async () => {
      const { i, cold } = await profile.open();
      const ctx = i.ctx;
      const version = await archivedVersion(ctx);
      // A first scan indexes what it reads (a cold copy takes its entry from its readable original).
      (await scanReferences(ctx)).close();
      for (const k of [version.content_key, version.metadata_key]) assert.equal(await ctx.content.delete(k), true);
      if (cold) {
        await assert.rejects(openVersionContent(ctx, version.artifact_id, 1), ArchivedCold);
      } else {
        const { stream } = await openVersionContent(ctx, version.artifact_id, 1);
        assert.equal((await collect(stream)).toString(), 'archived bytes', 'read from the archive copy');
      }
      assert.equal((await verifyArtifactAudit(ctx, version.artifact_id)).ok, true);
      const later = await scanReferences(ctx);
      try {
        assert.deepEqual([...later.candidates()], [], 'nothing left to reclaim, nothing failed closed');
        if (cold) assert.equal(later.stats.objectsRead, 0, 'the cold copies answered from their entries');
      } finally {
        later.close();
      }
    });

    it('a pin of the digest keeps the original; another artifact naming the digest keeps it only through the copy', async () => {
      const { i } = await profile.open();
      const ctx = i.ctx;
      const version = await archivedVersion(ctx);
      await createArtifact(ctx, agent, { name: 'user', filename: 'u.txt', body: bytesOf(`built from ${version.content_hash}`) });
      const named = await scanReferences(ctx);
      try {
        assert.equal(named.referencedWhy(version.content_key), undefined, 'satisfied by the copy');
      } finally {
        named.close();
      }
      const pinned = await scanReferences(ctx, { pins: [version.content_hash] });
      try {
        assert.match(pinned.referencedWhy(version.content_key) ?? '', /pinned by the host/);
        assert.match(pinned.digestWhy(version.content_hash, version.content_key) ?? '', /pinned/);
      } finally {
        pinned.close();
      }
    });
  });
}
