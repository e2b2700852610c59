/**
 * The DynamoDB-native backup path (issue 17 item 5): point-in-time recovery, ExportTableToPointInTime
 * into S3, the export verified and recorded (native_backup, manifest digest), then ImportTable or
 * RestoreTableToPointInTime into a new table and ALP's reconcile over it → VERIFIED → activation.
 * DynamoDB Local has none of those APIs: they are answered by a MODEL (test/helpers/dynamodb-export-
 * model.ts, a loopback proxy in front of DynamoDB Local writing the export into s3rver as AWS lays it
 * out); every other request goes to DynamoDB Local itself.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { sha256 } from '../../src/core/digest.ts';
import { Conflict, IntegrityError } from '../../src/core/errors.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { listBackups } from '../../src/recovery/backup.ts';
import {
  listNativeBackups,
  type NativeBackupConfig,
  type NativeClients,
  nativeBackupConfig,
  nativeClients,
  readNativeBackup,
  refreshNativeExport,
  startNativeExport,
  waitNativeExport,
} from '../../src/recovery/dynamodb-export.ts';
import { holdNativeRestore, type NativeRestoreVia, restoreNativeTable } from '../../src/recovery/dynamodb-export-restore.ts';
import { activateRestore, reconcile } from '../../src/recovery/reconcile.ts';
import { scanReferences } from '../../src/retention/references.ts';
import { createContext } from '../../src/runtime/context.ts';
import { DynamoItemStore } from '../../src/store/dynamodb/dynamodb-item-store.ts';
import type { Item } from '../../src/store/item-store.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { isRestoreHeld } from '../../src/system/state.ts';
import {
  type DistributedInstallation,
  distributedInstallation,
  distributedServers,
  stopDistributedServers,
} from '../helpers/distributed.ts';
import { type ExportModel, startExportModel } from '../helpers/dynamodb-export-model.ts';
import { allItems } from '../helpers/items.ts';

const agent = { id: 'agent-1', kind: 'agent' as const };
const operator = { id: 'os:operator', kind: 'human' as const };
const keyOf = (i: Item) => `${i.PK}\u0000${i.SK}`;

describe('DynamoDB-native backup: PITR + export to S3 + import/restore, reconciled (MODEL of the AWS APIs in front of DynamoDB Local)', () => {
  let inst: DistributedInstallation;
  let model: ExportModel;
  let cfg: NativeBackupConfig;
  let clients: NativeClients;
  let exportedKeys: Set<string>;
  let completedId: string;

  before(async () => {
    const { dynamo, s3 } = await distributedServers();
    inst = await distributedInstallation();
    await initInstallation(inst.ctx);
    for (let i = 0; i < 3; i++)
      await createArtifact(inst.ctx, agent, { name: `n-${i}`, filename: 'f.txt', body: [Buffer.from(`bytes ${i}`)] });
    model = await startExportModel(dynamo.endpoint, s3.client());
    cfg = nativeBackupConfig({
      metadata: { engine: 'dynamodb', table: inst.table, region: dynamo.region, endpoint: model.endpoint },
      content: { engine: 's3', bucket: s3.bucket, prefix: inst.prefix, region: s3.region, endpoint: s3.endpoint },
    });
    clients = nativeClients(cfg, { credentials: s3.credentials });
  });
  after(async () => {
    clients?.close();
    await model?.stop();
    await inst?.close();
    await stopDistributedServers();
  });

  it('refuses to export while point-in-time recovery is off, and records nothing', async () => {
    await assert.rejects(startNativeExport(inst.ctx, clients, cfg, { actor: operator.id }), Conflict);
    assert.deepEqual(await listNativeBackups(inst.ctx), []);
  });

  it('exports: IN_PROGRESS until the service completes, then verified and recorded with the manifest digest', async () => {
    model.pause();
    exportedKeys = new Set((await allItems(inst.ctx.items)).map(keyOf));
    const rec = await startNativeExport(inst.ctx, clients, cfg, { actor: operator.id, enablePitr: true });
    assert.equal(rec.status, 'IN_PROGRESS');
    assert.equal(rec.s3_bucket, cfg.bucket);
    assert.ok(rec.s3_prefix.startsWith(`alp-native-backups/${inst.table}/`));
    assert.equal((await refreshNativeExport(inst.ctx, clients, rec.native_backup_id)).status, 'IN_PROGRESS');
    model.resume();
    const done = await waitNativeExport(inst.ctx, clients, rec.native_backup_id, { pollMs: 50, timeoutMs: 30_000 });
    assert.equal(done.status, 'COMPLETED');
    const summary = await (await distributedServers()).s3
      .client()
      .send(new GetObjectCommand({ Bucket: cfg.bucket, Key: done.manifest_summary_key }));
    const bytes = Buffer.from(await (summary.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
    assert.equal(done.manifest_digest, sha256(bytes));
    // The export read the table at its request: every item then (the record itself was written after).
    assert.equal(done.item_count, exportedKeys.size);
    assert.equal(done.data_files, 2);
    assert.deepEqual(await readNativeBackup(inst.ctx, rec.native_backup_id), done);
    assert.ok(model.answered.includes('ExportTableToPointInTime') && model.answered.includes('DescribeExport'));
    completedId = rec.native_backup_id;
  });

  it('is not a `backup` record: the backup registry and the retention scan read it as before', async () => {
    assert.deepEqual(await listBackups(inst.ctx), []);
    const scan = await scanReferences(inst.ctx);
    assert.ok(scan.stats.items > 0);
    assert.equal((await listNativeBackups(inst.ctx)).length, 1);
  });

  it('a data file changed before verification: the export is refused (IntegrityError) and stays IN_PROGRESS', async () => {
    const { s3 } = await distributedServers();
    const rec = await startNativeExport(inst.ctx, clients, cfg, { actor: operator.id });
    // Wait for the model to finish writing (the summary is its last file), without verifying.
    const files = async () =>
      ((await s3.client().send(new ListObjectsV2Command({ Bucket: cfg.bucket, Prefix: `${rec.s3_prefix}/` }))).Contents ?? []).map(
        (o) => o.Key as string,
      );
    for (let i = 0; i < 400 && !(await files()).some((k) => k.endsWith('manifest-summary.md5')); i++)
      await new Promise((r) => setTimeout(r, 25));
    const listed = { Contents: (await files()).map((Key) => ({ Key })) };
    const data = (listed.Contents ?? []).map((o) => o.Key as string).find((k) => k.endsWith('.json.gz'));
    assert.ok(data);
    await s3.corrupt(data, Buffer.from('not the exported bytes'));
    await assert.rejects(refreshNativeExport(inst.ctx, clients, rec.native_backup_id), IntegrityError);
    assert.equal((await readNativeBackup(inst.ctx, rec.native_backup_id))?.status, 'IN_PROGRESS');
  });

  for (const via of ['import', 'pitr'] as NativeRestoreVia[]) {
    it(`restores by ${via === 'import' ? 'ImportTable' : 'RestoreTableToPointInTime'} into a new table; reconcile VERIFIED; activation`, async () => {
      const { dynamo, s3 } = await distributedServers();
      // Written after the export: must not be in the restored table.
      await createArtifact(inst.ctx, agent, { name: `after-${via}`, filename: 'f.txt', body: [Buffer.from('later')] });
      const rec = await readNativeBackup(inst.ctx, completedId);
      assert.ok(rec);
      const targetTable = `restored-${via}-${randomUUID().slice(0, 8)}`;
      await restoreNativeTable(clients, rec, { targetTable, via, pollMs: 50, timeoutMs: 30_000 });
      const items = await DynamoItemStore.open(
        { engine: 'dynamodb', table: targetTable, region: dynamo.region, endpoint: dynamo.endpoint },
        { credentials: s3.credentials },
      );
      try {
        // ALP's own schema check accepts the table the restore created.
        assert.deepEqual(await items.prepare(), { created: false });
        const target = createContext({ items, content: inst.ctx.content, clock: inst.ctx.clock });
        const restored = await allItems(items);
        assert.ok(
          restored.every((i) => exportedKeys.has(keyOf(i))),
          'nothing written after the export is restored',
        );
        const record = await holdNativeRestore(target, rec, {
          actor: operator.id,
          via,
          sourceMetadata: inst.ctx.items.location,
          sourceContent: inst.ctx.content.location,
        });
        assert.equal(record.manifest_digest, rec.manifest_digest);
        assert.equal(await isRestoreHeld(items), true);
        const report = await reconcile(target, { actor: operator.id });
        assert.equal(report.status, 'VERIFIED', JSON.stringify(report.findings.slice(0, 3)));
        await activateRestore(target, report.reconcile_id, operator);
        assert.equal(await isRestoreHeld(items), false);
      } finally {
        await items.close();
      }
    });
  }
});
