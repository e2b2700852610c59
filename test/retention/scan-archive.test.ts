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
import type { S3ContentStore } from '../../src/content/s3/s3-content-store.ts';
import { ArchivedCold } from '../../src/core/errors.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { createArtifact, openVersionContent } from '../../src/lifecycle/artifacts.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { scanReferences } from '../../src/retention/references.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { distributedServers, stopDistributedServers } from '../helpers/distributed.ts';
import { distributed, embedded, installationsOf, type RetentionInstallation } from '../helpers/retention-harness.ts';
import { behindGlacierModel, type GlacierProxy, startGlacierProxy } from '../helpers/s3-glacier-proxy.ts';
import { bytesOf, collect } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';

let glacier: GlacierProxy | undefined;
after(async () => {
  await glacier?.stop();
  await stopDistributedServers();
});

async function archived(ctx: ServiceContext) {
  const { version } = await createArtifact(ctx, agent, { name: 'cold', filename: 'f.txt', body: bytesOf('archived bytes') });
  const id = version.artifact_id;
  await propose(ctx, agent, id, 1);
  await decide(ctx, alice, id, 1, { decision: 'REJECT', evidenceRef: 'CR-1' });
  await archiveArtifact(ctx, alice, id);
  return version;
}

const profiles: Array<{ name: string; open: () => Promise<{ i: RetentionInstallation; restore: string; cold: boolean }> }> = [
  {
    name: embedded.name,
    open: async () => {
      const i = await installationsOf(embedded)();
      return { i, restore: await i.verifiedRestore(), cold: false };
    },
  },
  {
    name: `${distributed.name} behind the GLACIER model`,
    open: async () => {
      const i = await installationsOf(distributed)();
      const restore = await i.verifiedRestore();
      const { s3 } = await distributedServers();
      glacier ??= await startGlacierProxy(s3);
      Object.assign(i.ctx, { content: await behindGlacierModel(i.ctx.content as S3ContentStore, s3, glacier) });
      return { i, restore, cold: true };
    },
  },
];

for (const profile of profiles) {
  describe(`archived originals are reclaimable (${profile.name})`, () => {
    it('the originals are candidates (the copies are the references), not kept by their digest', async () => {
      const { i } = await profile.open();
      const ctx = i.ctx;
      const version = await archived(ctx);
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
      const version = await archived(ctx);
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
      const version = await archived(ctx);
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
