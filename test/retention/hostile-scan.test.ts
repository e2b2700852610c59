/**
 * An agent can upload any bytes, a compression bomb included. The reference scan follows digests into
 * referenced content (gzip members too) with a bound; past it the scan fails closed (nothing can be
 * reclaimed, since the references inside are unknown) with an error that names the object, so that the
 * operator can find it. Regression: the error used to say only "compressed content expands beyond …".
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { AlpError, InvalidInput } from '../../src/core/errors.ts';
import { provenanceKey } from '../../src/core/object-keys.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import { collectRefs, verifyObjects } from '../../src/lifecycle/verify-content.ts';
import { MAX_DECOMPRESSED_BYTES } from '../../src/retention/digest-scan.ts';
import { scanReferences } from '../../src/retention/references.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

describe('retention reference scan: compressed content from agents', () => {
  it('a bomb fails the scan closed, naming the object; within the bound, digests inside gzip are references', async (t) => {
    const ctx = await embeddedContext();
    const member = gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
    const inside = await createArtifact(ctx, agent, { name: 'kept', filename: 'k.txt', body: bytesOf('kept bytes') });
    const manifest = gzipSync(`depends on ${inside.version.content_hash}\n`);
    await createArtifact(ctx, agent, { name: 'manifest', filename: 'm.gz', body: bytesOf(member, manifest) });
    const scan = await scanReferences(ctx);
    assert.ok(scan.digestWhy(inside.version.content_hash));
    scan.close();

    const members = Math.ceil(MAX_DECOMPRESSED_BYTES / (64 * 1024 * 1024)) + 2;
    const { version } = await createArtifact(ctx, agent, {
      name: 'bomb',
      filename: 'bomb.gz',
      body: bytesOf(...Array.from({ length: members }, () => member)),
    });
    const rss0 = process.memoryUsage().rss;
    const started = performance.now();
    await assert.rejects(scanReferences(ctx), (e: unknown) => {
      assert.ok(e instanceof InvalidInput, String(e));
      assert.ok(e.message.includes(version.content_key as string), e.message);
      assert.match(e.message, /nothing is reclaimed/);
      return true;
    });
    const ms = performance.now() - started;
    const grew = process.memoryUsage().rss - rss0;
    t.diagnostic(
      `a ${member.length * members} byte gzip of ${members * 64} MiB: refused in ${ms.toFixed(0)} ms, RSS +${(grew / 1048576).toFixed(0)} MiB`,
    );
    assert.ok(ms < 30_000);
    assert.ok(grew < 128 * 1024 * 1024, 'streamed, never held whole');
  });

  it('a provenance document replaced by malformed or bomb bytes: verify reports it, the reference scan fails closed', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'p', filename: 'p.txt', body: bytesOf('p') });
    await addProvenance(ctx, agent, version.artifact_id, { action: 'build', inputs: [version.content_hash] });
    const file = path.join(ctx.contentRoot, provenanceKey(version.artifact_id));
    const member = gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
    const bomb = Buffer.concat(Array.from({ length: Math.ceil(MAX_DECOMPRESSED_BYTES / (64 * 1024 * 1024)) + 1 }, () => member));
    const truncated = Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0xff, 0xff]);
    for (const bytes of [bomb, truncated]) {
      fs.writeFileSync(file, bytes);
      const report = await verifyObjects(ctx, await collectRefs(ctx, version.artifact_id));
      assert.deepEqual(
        report.findings.map((f) => [f.key, f.problem]),
        [[provenanceKey(version.artifact_id), 'corrupt']],
      );
    }
    // A bomb fails the scan closed, naming the document.
    fs.writeFileSync(file, bomb);
    await assert.rejects(scanReferences(ctx), (e: unknown) => {
      assert.ok(e instanceof AlpError && e.code === 'INVALID', String(e));
      assert.ok(e.message.includes(provenanceKey(version.artifact_id)), e.message);
      return true;
    });
    // Broken gzip: the document is derived (the PROV items are the record), so what it names is still
    // referenced through the items, and the raw bytes are scanned as they are.
    fs.writeFileSync(file, truncated);
    const scan = await scanReferences(ctx);
    assert.ok(scan.digestWhy(version.content_hash));
    scan.close();
  });
});
