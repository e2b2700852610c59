/**
 * Retention and reconcile never read GLACIER objects (issue 16 item 6), on DynamoDB Local + s3rver
 * behind the GLACIER MODEL proxy (test/helpers/s3-glacier-proxy.ts: cold GETs answer 403
 * InvalidObjectState as real S3 does). After an archive, the reference scan and reconcile trust each
 * cold copy's recorded digest plus S3's SHA-256 checksum (HeadObject, ChecksumMode ENABLED): not one
 * GET of a cold object is sent. A cold orphan with a checksum is matched by it and may be collected;
 * one without a checksum is kept (its digest cannot be known unread). Reconcile reports a cold copy
 * whose checksum is not its recorded digest.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import type { S3ContentStore } from '../../src/content/s3/s3-content-store.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { addVersion, createArtifact, showArtifact } from '../../src/lifecycle/artifacts.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { reconcile } from '../../src/recovery/reconcile.ts';
import { scanReferences } from '../../src/retention/references.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import { distributedServers, stopDistributedServers } from '../helpers/distributed.ts';
import { distributed, epochOf, host, operator } from '../helpers/retention-harness.ts';
import { behindGlacierModel, type GlacierProxy, startGlacierProxy } from '../helpers/s3-glacier-proxy.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice, approveAndRun } from '../helpers/walk.ts';

let glacier: GlacierProxy | undefined;
after(async () => {
  await glacier?.stop();
  await stopDistributedServers();
});

/** A distributed installation whose content goes through the GLACIER model; a verified restore taken first. */
async function glacierInstallation() {
  const inst = await distributed.open();
  const restore = await inst.verifiedRestore();
  const { s3 } = await distributedServers();
  glacier ??= await startGlacierProxy(s3);
  const content = await behindGlacierModel(inst.ctx.content as S3ContentStore, s3, glacier);
  Object.assign(inst.ctx, { content });
  return { inst, restore, content, s3, proxy: glacier };
}

async function archivedArtifact(ctx: Parameters<typeof archiveArtifact>[0]): Promise<string> {
  const { version } = await createArtifact(ctx, agent, { name: 'cold', filename: 'f', body: bytesOf('v1') });
  const id = version.artifact_id;
  await approveAndRun(ctx, id, 1, 'SUCCEEDED');
  for (let i = 2; i <= 4; i++) {
    await addVersion(ctx, agent, id, { filename: 'f', body: bytesOf(`v${i}`) });
    await propose(ctx, agent, id, i);
  }
  await decide(ctx, alice, id, 4, { decision: 'REJECT', evidenceRef: 'no' });
  await archiveArtifact(ctx, alice, id);
  return id;
}

describe('retention and reconcile against the GLACIER model (DynamoDB Local + s3rver)', () => {
  it('scan, retention run and reconcile send no GET of a cold object, trusting recorded digest + S3 checksum', async () => {
    const { inst, restore, content, s3, proxy } = await glacierInstallation();
    try {
      const id = await archivedArtifact(inst.ctx);
      const { versions } = await showArtifact(inst.ctx, id);
      const coldKey = versions[0]?.archive_key as string;
      assert.equal((await content.head(coldKey))?.storageClass, 'GLACIER');
      // Two cold orphans: a copy with S3's checksum (matched by it) and a plain GLACIER put without one.
      const orphanSrc = await content.put('artifacts/orphan/v1/f', bytesOf('orphan bytes'));
      await content.copy('artifacts/orphan/v1/f', 'archive/2026/01/ORPHAN/v1/f', {
        expectedDigest: orphanSrc.digest,
        storageClass: 'GLACIER',
      });
      await content.delete('artifacts/orphan/v1/f');
      await s3.client().send(
        new PutObjectCommand({
          Bucket: s3.bucket,
          Key: `${content.prefix}archive/2026/01/NOSUM/v1/f`,
          Body: 'x',
          StorageClass: 'GLACIER',
        }),
      );

      const before = proxy.coldRefusals();
      const scan = await scanReferences(inst.ctx);
      assert.equal(proxy.coldRefusals(), before, 'the scan sent no GET of a cold object');
      assert.ok(scan.stats.coldTrusted >= 2 * 4 + 2, `${scan.stats.coldTrusted} cold objects trusted by checksum`);
      assert.ok(scan.referencedWhy(coldKey), 'archive copies stay referenced');
      // Issue 17 B13: the archived originals are candidates now (their copies are the references).
      const candidates = [...scan.candidates()].map((c) => c.key);
      assert.deepEqual(
        candidates.filter((k) => k.startsWith('archive/')),
        ['archive/2026/01/ORPHAN/v1/f'],
        'the orphan with a checksum is a candidate; the one without is kept',
      );
      assert.equal(candidates.filter((k) => k.startsWith(`artifacts/${id}/`)).length, 8, 'four versions: content and metadata');
      assert.match(scan.referencedWhy('archive/2026/01/NOSUM/v1/f') ?? '', /without an S3 checksum/);
      scan.close();

      const retention = new ArtifactRetention(inst.ctx.items, inst.ctx.content, { clock: inst.ctx.clock });
      try {
        const result = await retention.run(await epochOf(inst.ctx), 'QUARANTINE', host(inst.ctx, { restore }));
        assert.deepEqual(
          result.observed.filter((k) => k.startsWith('archive/')),
          ['archive/2026/01/ORPHAN/v1/f'],
        );
      } finally {
        await retention.close();
      }
      assert.equal(proxy.coldRefusals(), before, 'the retention run sent no GET of a cold object');

      const report = await reconcile(inst.ctx, { actor: operator.id });
      assert.equal(proxy.coldRefusals(), before, 'reconcile sent no GET of a cold object');
      const objectFindings = report.findings.filter((f) => f.kind === 'object');
      assert.deepEqual(objectFindings, [], JSON.stringify(objectFindings.slice(0, 3)));
    } finally {
      await inst.close();
    }
  });

  it('reconcile reports a cold copy whose S3 checksum is not its recorded digest, without reading it', async () => {
    const { inst, content, proxy } = await glacierInstallation();
    try {
      const id = await archivedArtifact(inst.ctx);
      const { versions } = await showArtifact(inst.ctx, id);
      const v = versions[1];
      const key = v?.archive_key as string;
      // Replace the copy by a copy of other bytes (as damage would), create-only bypassed with delete.
      await content.delete(key);
      const other = await content.put('artifacts/other/v1/f', bytesOf('other bytes'));
      await content.copy('artifacts/other/v1/f', key, { expectedDigest: other.digest, storageClass: 'GLACIER' });
      const before = proxy.coldRefusals();
      const report = await reconcile(inst.ctx, { actor: operator.id });
      assert.equal(proxy.coldRefusals(), before);
      const finding = report.findings.find((f) => f.key === key);
      assert.equal(finding?.problem, 'corrupt', JSON.stringify(report.findings.slice(0, 3)));
      assert.match(String(finding?.detail), /S3's checksum/);
      assert.equal(report.status, 'FAILED');
    } finally {
      await inst.close();
    }
  });
});
