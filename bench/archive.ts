/**
 * Archive of an artifact with 1,000 settled versions and runs with outputs on DynamoDB Local + s3rver
 * behind the GLACIER MODEL proxy (test/helpers/s3-glacier-proxy.ts: cold GETs answer 403
 * InvalidObjectState as on real S3), issue 16 item 5. Too slow for `npm test` on DynamoDB Local
 * (the suite archives 120: test/lifecycle/archive-chunked.test.ts); run it with
 * `node --import tsx bench/archive.ts [versions]` (or as the `archive` bench section once registered).
 * Versions are made cheaply through the services: v1 EXECUTED and v2 FAILED (runs with two outputs),
 * v3..v(n-1) added as drafts and superseded by ONE chunked propose of vn, vn rejected.
 */
import { history } from '../src/audit/history.ts';
import { verifyArtifactAudit } from '../src/audit/verify.ts';
import { S3ContentStore } from '../src/content/s3/s3-content-store.ts';
import { decide } from '../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../src/lifecycle/archive.ts';
import { addVersion, createArtifact } from '../src/lifecycle/artifacts.ts';
import { propose } from '../src/lifecycle/transitions.ts';
import { listVersions } from '../src/lifecycle/versions.ts';
import type { TransactOp } from '../src/store/item-store.ts';
import { distributedInstallation, distributedServers, stopDistributedServers } from '../test/helpers/distributed.ts';
import { startGlacierProxy } from '../test/helpers/s3-glacier-proxy.ts';
import { bytesOf } from '../test/helpers/tmp.ts';
import { agent, alice, approveAndRun } from '../test/helpers/walk.ts';
import { header } from './util.ts';

export async function benchArchive(opts: { versions?: number } = {}): Promise<void> {
  const n = opts.versions ?? 1000;
  header(`archive: ${n} settled versions on DynamoDB Local + s3rver behind the GLACIER model`);
  const inst = await distributedInstallation();
  const { s3 } = await distributedServers();
  const glacier = await startGlacierProxy(s3);
  const content = await S3ContentStore.open(
    { engine: 's3', bucket: s3.bucket, prefix: inst.prefix, region: s3.region, endpoint: glacier.endpoint },
    { credentials: s3.credentials },
  );
  const direct = inst.ctx.content;
  Object.assign(inst.ctx, { content });
  await direct.close();
  try {
    const ctx = inst.ctx;
    let t = Date.now();
    const { version } = await createArtifact(ctx, agent, { name: 'archive-bench', filename: 'f', body: bytesOf('v1') });
    const id = version.artifact_id;
    await approveAndRun(ctx, id, 1, 'SUCCEEDED');
    await addVersion(ctx, agent, id, { filename: 'f', body: bytesOf('v2') });
    await approveAndRun(ctx, id, 2, 'FAILED');
    for (let i = 3; i <= n; i++) await addVersion(ctx, agent, id, { filename: 'f', body: bytesOf(`v${i}`) });
    await propose(ctx, agent, id, n);
    await decide(ctx, alice, id, n, { decision: 'REJECT', evidenceRef: 'bench' });
    console.log(`setup: ${n} settled versions in ${((Date.now() - t) / 1000).toFixed(1)} s`);

    const sizes: number[] = [];
    const original = ctx.items.transactWrite.bind(ctx.items);
    ctx.items.transactWrite = async (ops: TransactOp[]) => {
      sizes.push(ops.length);
      return original(ops);
    };
    const cold = glacier.coldRefusals();
    t = Date.now();
    const { archived } = await archiveArtifact(ctx, alice, id);
    const ms = Date.now() - t;
    ctx.items.transactWrite = original;
    const versions = await listVersions(ctx.items, id);
    const moves = (await history(ctx, id)).filter((e) => e.type === 'transition' && e.to === 'ARCHIVED');
    const chain = await verifyArtifactAudit(ctx, id);
    const ok =
      versions.every((v) => v.state === 'ARCHIVED') &&
      moves.length === n &&
      new Set(moves.map((e) => e.version)).size === n &&
      chain.findings.length === 0 &&
      glacier.coldRefusals() === cold;
    console.log(
      `archive: ${archived.length} objects copied server-side (${glacier.checksummedCopies()} with S3 SHA-256 checksums), ` +
        `${sizes.length} audited transactions (largest ${Math.max(...sizes)} of 100 operations), ${(ms / 1000).toFixed(1)} s`,
    );
    console.log(
      `check: ${versions.filter((v) => v.state === 'ARCHIVED').length}/${n} ARCHIVED, ${moves.length} ARCHIVED entries, ` +
        `chain findings ${chain.findings.length}, cold GETs ${glacier.coldRefusals() - cold}: ${ok ? 'PASS' : 'FAIL'}`,
    );
    if (!ok) process.exitCode = 1;
  } finally {
    await inst.close();
    await glacier.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  await benchArchive({ versions: Number(process.argv[2] ?? 1000) });
  await stopDistributedServers();
}
