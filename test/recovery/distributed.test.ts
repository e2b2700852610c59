/**
 * Backup → restore → reconcile → VERIFIED → activate on the distributed profile: DynamoDB Local and
 * s3rver, both real servers started by this process. The DynamoDB backup is a fenced scan (publishers
 * refused while it reads); restores go into new tables, against the same bucket prefix (reference) or
 * a new one (--with-content), and across engines into SQLite + a directory.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { S3ContentStore } from '../../src/content/s3/s3-content-store.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { MaintenanceInProgress } from '../../src/core/errors.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { createToken } from '../../src/lifecycle/principals.ts';
import { createBackup, listBackups } from '../../src/recovery/backup.ts';
import { activateRestore, readRestoreProof, reconcile } from '../../src/recovery/reconcile.ts';
import { restoreBackup } from '../../src/recovery/restore.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import { DynamoItemStore } from '../../src/store/dynamodb/dynamodb-item-store.ts';
import { readFence } from '../../src/system/fence.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { isRestoreHeld, readEpoch } from '../../src/system/state.ts';
import { alpJson } from '../helpers/cli.ts';
import { type DynamoLocal, startDynamoLocal } from '../helpers/dynamodb-local.ts';
import { startGlacierProxy } from '../helpers/s3-glacier-proxy.ts';
import { type S3rverHandle, startS3rver } from '../helpers/s3rver.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { agent, alice, walkEveryState } from '../helpers/walk.ts';
import { embeddedAt, tableLines } from './helpers.ts';

let servers: Promise<[DynamoLocal, S3rverHandle]> | undefined;
const closers: Array<() => Promise<void>> = [];
/**
 * DynamoDB Local, and s3rver behind the MODEL of S3's cold classes and copy checksums
 * (test/helpers/s3-glacier-proxy.ts): archive copies are GLACIER, which real S3 never serves without a
 * restore, so reconcile checks them by the SHA-256 checksum S3 keeps (s3rver keeps none).
 */
const start = () => {
  servers ??= Promise.all([startDynamoLocal(), startS3rver()]).then(async ([dynamo, s3]) => {
    const glacier = await startGlacierProxy(s3);
    const stop = async () => {
      await glacier.stop();
      await s3.stop();
    };
    return [dynamo, { ...s3, endpoint: glacier.endpoint, stop }] as [DynamoLocal, S3rverHandle];
  });
  return servers;
};
after(async () => {
  for (const c of closers) await c();
  if (servers) for (const s of await servers) await s.stop();
});

/** `prefix`: the content root's bucket prefix (for corrupting an object behind ALP's back). */
type Distributed = ServiceContext & { clock: ManualClock; items: DynamoItemStore; prefix: string };

async function open(prefix: string, table?: string): Promise<Distributed> {
  const [dynamo, s3] = await start();
  const items = await DynamoItemStore.open(
    { engine: 'dynamodb', table: table ?? dynamo.tableName('rec'), region: dynamo.region, endpoint: dynamo.endpoint },
    { credentials: s3.credentials, baseDelayMs: 10, maxDelayMs: 200 },
  );
  await items.prepare();
  const content = await S3ContentStore.open(
    { engine: 's3', bucket: s3.bucket, prefix, region: s3.region, endpoint: s3.endpoint },
    { credentials: s3.credentials },
  );
  closers.push(async () => {
    await content.close();
    await items.close();
  });
  const clock = new ManualClock('2026-03-01T12:00:00.000Z');
  return Object.assign(createContext({ items, content, clock }), { clock, items, prefix });
}

const notRegistry = (i: { PK: string; SK: string }) => i.PK === 'SYS#installation' && i.SK.startsWith('BACKUP#');

describe('recovery on DynamoDB Local + s3rver', () => {
  it('fenced backup → restore into new tables (same root, new root, SQLite) → reconcile VERIFIED → activate', async () => {
    const prefix = `src-${randomUUID().slice(0, 8)}/`;
    const src = await open(prefix);
    await initInstallation(src);
    await walkEveryState(src);
    await createToken(src, { principal: 'bot', kind: 'agent' }, alice);
    const before = await tableLines(src.items);
    const dir = tempDir('alp-rec-dist');

    // The live scan runs under the fence: a publisher trying to commit meanwhile is refused.
    let fenced: string | undefined;
    let refused = false;
    const watched = Object.create(src.items) as DynamoItemStore;
    watched.scan = async (o) => {
      if (fenced === undefined) {
        fenced = (await readFence(src))?.holder ?? 'none';
        refused = await createArtifact(src, agent, { name: 'racer', filename: 'r.sh', body: bytesOf('r') }).then(
          () => false,
          (e) => e instanceof MaintenanceInProgress,
        );
      }
      return src.items.scan(o);
    };
    const ref = await createBackup({ ...src, items: watched }, { out: path.join(dir, 'ref'), actor: 'os:tester' });
    assert.match(String(fenced), /^backup /);
    assert.equal(refused, true, 'a publisher was refused while the backup scanned');
    assert.equal(await readFence(src), undefined, 'the fence is released after the backup');
    assert.equal(ref.manifest.consistency, 'fenced-scan');
    assert.deepEqual(await tableLines(src.items, notRegistry), before, 'the source is unchanged');
    assert.equal((await listBackups(src))[0]?.status, 'COMPLETE');

    // Same bucket prefix (the source's own root), new table: nothing to copy.
    const same = await open(prefix);
    const r1 = await restoreBackup(same, { from: ref.location, actor: 'os:tester' });
    assert.equal(r1.record.content_root_changed, false);
    const v1 = await reconcile(same, { actor: 'os:tester' });
    assert.equal(v1.status, 'VERIFIED', JSON.stringify(v1.findings.slice(0, 3)));
    assert.ok(v1.objects.verified > 20);
    await activateRestore(same, v1.reconcile_id, alice);
    assert.equal(await isRestoreHeld(same.items), false);
    assert.equal(await readEpoch(same.items), 2);
    assert.equal((await readRestoreProof(same))?.installation_id, r1.record.installation_id);

    // --with-content into a new prefix: the bytes travel through the backup, verified.
    const full = await createBackup(src, { out: path.join(dir, 'full'), withContent: true, actor: 'os:tester' });
    const moved = await open(`dst-${randomUUID().slice(0, 8)}/`);
    const r2 = await restoreBackup(moved, { from: full.location, actor: 'os:tester' });
    assert.equal(r2.record.content_root_changed, true);
    assert.equal(r2.record.objects_copied, full.manifest.content?.count);
    const v2 = await reconcile(moved, { actor: 'os:tester' });
    assert.equal(v2.status, 'VERIFIED', JSON.stringify(v2.findings.slice(0, 3)));
    assert.equal(v2.derived.mismatched, 0);

    // One object corrupted behind ALP's back in the new root: FAILED, naming it; never activated.
    const victim = (await moved.items.scan()).items.find((i) => i.type === 'version') as unknown as { content_key: string };
    const [, s3] = await start();
    await s3.corrupt(`${moved.prefix}${victim.content_key}`, Buffer.from('tampered'));
    const bad = await reconcile(moved, { actor: 'os:tester' });
    assert.equal(bad.status, 'FAILED');
    assert.deepEqual(
      bad.findings.filter((f) => f.kind === 'object').map((f) => f.key),
      [victim.content_key],
    );
    await assert.rejects(activateRestore(moved, bad.reconcile_id, alice), /never be activated/);
    assert.equal(await isRestoreHeld(moved.items), true);

    // The CLI, into a table and a prefix of its own (the table is created by the restore).
    const [dynamo] = await start();
    const cliTable = dynamo.tableName('cli');
    const metadata = `dynamodb://${cliTable}?region=${dynamo.region}&endpoint=${encodeURIComponent(dynamo.endpoint)}`;
    const contentUrl = `s3://${s3.bucket}/cli-${randomUUID().slice(0, 8)}/?region=${s3.region}&endpoint=${encodeURIComponent(s3.endpoint)}`;
    const env = {
      AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
      AWS_REGION: dynamo.region,
    };
    const storage = ['--metadata', metadata, '--content', contentUrl];
    const restored = await alpJson(['restore', '--from', full.location, ...storage], { env });
    assert.equal(restored.status, 'RESTORED');
    const activated = await alpJson(['reconcile', '--activate', ...storage], { env });
    assert.equal(activated.status, 'VERIFIED');
    assert.equal((activated.activation as { epoch: number }).epoch, 2);

    // Across engines: the same backup into SQLite + a directory.
    const local = await embeddedAt(path.join(dir, 'sqlite'));
    await restoreBackup(local, { from: full.location, actor: 'os:tester' });
    const v3 = await reconcile(local, { actor: 'os:tester' });
    assert.equal(v3.status, 'VERIFIED', JSON.stringify(v3.findings.slice(0, 3)));
    await activateRestore(local, v3.reconcile_id, alice);
    assert.equal(await isRestoreHeld(local.items), false);
  });
});
