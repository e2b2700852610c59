/**
 * Issue 17 item B7 on both profiles (SQLite + directory, DynamoDB Local + s3rver), in process: the
 * restore proof `verifyRestoreReference` accepts a genuine backup → restore → VERIFIED reconcile →
 * activation, and refuses a copy of the live table with the three rows that claim one (an ACTIVATED
 * restore naming the live installation's own COMPLETE backup and manifest digest, a VERIFIED
 * reconciliation, the activation), naming what did not match; and refuses a restore that names a
 * backup this installation never recorded, or another manifest digest than its registry holds.
 * (The same attack through `alp retention run --restore`: restore-proof-forgery.test.ts.)
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { RESTORE_SK, reconcileKey, restorePk } from '../../src/core/keys.ts';
import { listBackups } from '../../src/recovery/backup.ts';
import { verifyRestoreReference } from '../../src/retention/restore-proof.ts';
import { DynamoItemStore } from '../../src/store/dynamodb/dynamodb-item-store.ts';
import type { Item, ItemStore } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { readInstallation } from '../../src/system/installation.ts';
import { activationKey } from '../../src/system/restore-proof.ts';
import { distributedServers, stopDistributedServers } from '../helpers/distributed.ts';
import { allItems } from '../helpers/items.ts';
import { distributed, type Engine, embedded } from '../helpers/retention-harness.ts';
import { tempDir } from '../helpers/tmp.ts';

/** A new, empty store of the engine's kind and the reference an approval names it by. */
async function emptyStore(engine: Engine, label: string): Promise<{ items: ItemStore; ref: string }> {
  if (engine === embedded) {
    const file = path.join(tempDir(`alp-${label}`), 'alp.db');
    return { items: new SqliteItemStore(file), ref: file };
  }
  const { dynamo, s3 } = await distributedServers();
  const table = dynamo.tableName(label);
  const items = await DynamoItemStore.open(
    { engine: 'dynamodb', table, region: dynamo.region, endpoint: dynamo.endpoint },
    { credentials: s3.credentials },
  );
  await items.prepare();
  return { items, ref: `dynamodb://${table}?region=${dynamo.region}&endpoint=${encodeURIComponent(dynamo.endpoint)}` };
}

/** The three rows of the attack, claiming a restore of `backupId` (with `manifestDigest`). */
function forgedRows(installationId: string, backupId: string, manifestDigest: string, content: string): Item[] {
  const restoreId = '01FORGEDRESTORE00000000000';
  const reconcileId = '01FORGEDRECONCILE000000000';
  const at = '2026-03-01T12:00:00.000Z';
  return [
    { ...activationKey, type: 'restore_activation', restore_id: restoreId, reconcile_id: reconcileId, installation_id: installationId },
    {
      PK: restorePk(restoreId),
      SK: RESTORE_SK,
      type: 'restore',
      restore_id: restoreId,
      status: 'ACTIVATED',
      installation_id: installationId,
      backup_id: backupId,
      backup_location: '/nowhere',
      manifest_digest: manifestDigest,
      backup_epoch: 1,
      backup_snapshot_at: at,
      target_metadata: 'copy',
      target_content: content,
      activated_at: at,
      activated_by: 'os:mallory',
      last_reconcile_id: reconcileId,
      last_reconcile_status: 'VERIFIED',
    },
    {
      ...reconcileKey(reconcileId, restoreId),
      type: 'reconcile',
      reconcile_id: reconcileId,
      status: 'VERIFIED',
      installation_id: installationId,
    },
  ];
}

// DynamoDB Local and s3rver are child processes: stopped once this file's suites are done, or the file never exits.
after(() => stopDistributedServers());

for (const engine of [embedded, distributed]) {
  describe(`restore proof against the registered backup (issue 17 B7) — ${engine.name}`, () => {
    it('It must point to an actual same-installation restore database whose slice 3 reconciliation was activated as VERIFIED: a forged copy is refused, naming what did not match; the genuine restore is accepted', async () => {
      const inst = await engine.open();
      try {
        const genuine = await inst.verifiedRestore();
        const installationId = (await readInstallation(inst.ctx))?.installation_id as string;
        assert.equal(await verifyRestoreReference(genuine, installationId, inst.ctx.items), undefined);

        const [backup] = await listBackups(inst.ctx);
        assert.equal(backup?.status, 'COMPLETE');
        const attack = async (label: string, backupId: string, digest: string) => {
          const copy = await emptyStore(engine, label);
          await copy.items.batchPut(await allItems(inst.ctx.items));
          await copy.items.batchPut(forgedRows(installationId, backupId, digest, inst.ctx.content.location));
          await copy.items.close();
          return verifyRestoreReference(copy.ref, installationId, inst.ctx.items);
        };
        const copied = await attack('forged', backup?.backup_id as string, backup?.manifest_digest as string);
        assert.match(String(copied), /do not match backup/);
        assert.match(String(copied), new RegExp(`SYS#installation BACKUP#${backup?.backup_id}`));

        const unknown = await attack('forged-unknown', '01NOSUCHBACKUP000000000000', backup?.manifest_digest as string);
        assert.match(String(unknown), /never recorded/);
        const otherDigest = await attack('forged-digest', backup?.backup_id as string, `sha256:${'0'.repeat(64)}`);
        assert.match(String(otherDigest), /this installation recorded sha256:/);
      } finally {
        await inst.close();
      }
    });
  });
}
