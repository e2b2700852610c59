/**
 * Issue 17 item B7, seed 004: "It must point to an actual same-installation restore database whose
 * slice 3 reconciliation was activated as VERIFIED." The attack, exactly: copy the live alp.db, insert
 * the three rows that claim an ACTIVATED restore (naming the live installation's own COMPLETE backup
 * and its manifest digest) and a VERIFIED reconciliation, and point `alp retention run --restore` at it.
 * It is refused, with a reason naming what did not match; the genuine restore + reconcile + activate of
 * the same backup is accepted.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { RESTORE_SK, reconcileKey, restorePk } from '../../src/core/keys.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { activationKey } from '../../src/system/restore-proof.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';

/** Copies a SQLite database (and its WAL, when one is left) as a file copy would. */
function copyDb(from: string, to: string): void {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  for (const suffix of ['', '-wal', '-shm']) if (fs.existsSync(from + suffix)) fs.copyFileSync(from + suffix, to + suffix);
}

/** The three rows: an activation, an ACTIVATED restore record naming `backup`, a VERIFIED reconciliation. */
async function forge(db: string, backup: { backup_id: string; manifest_digest: string; epoch: number; snapshot_at: string }, src: string) {
  const items = new SqliteItemStore(db);
  const installation = await items.get({ PK: 'SYS#installation', SK: 'INSTALLATION' });
  const installationId = String(installation?.installation_id);
  const restoreId = '01FORGEDRESTORE00000000000';
  const reconcileId = '01FORGEDRECONCILE000000000';
  const at = new Date().toISOString();
  await items.put({
    ...activationKey,
    type: 'restore_activation',
    restore_id: restoreId,
    reconcile_id: reconcileId,
    installation_id: installationId,
    activated_at: at,
    activated_by: 'os:mallory',
  });
  await items.put({
    PK: restorePk(restoreId),
    SK: RESTORE_SK,
    type: 'restore',
    restore_id: restoreId,
    status: 'ACTIVATED',
    installation_id: installationId,
    backup_id: backup.backup_id,
    backup_location: '/nowhere',
    manifest_digest: backup.manifest_digest,
    backup_epoch: backup.epoch,
    backup_snapshot_at: backup.snapshot_at,
    target_metadata: `sqlite:${db}`,
    target_content: `file:${path.join(src, 'content')}`,
    activated_at: at,
    activated_by: 'os:mallory',
    last_reconcile_id: reconcileId,
    last_reconcile_status: 'VERIFIED',
  });
  await items.put({
    ...reconcileKey(reconcileId, restoreId),
    type: 'reconcile',
    reconcile_id: reconcileId,
    status: 'VERIFIED',
    installation_id: installationId,
  });
  await items.close();
}

describe('restore proof (issue 17 B7)', () => {
  it('It must point to an actual same-installation restore database whose slice 3 reconciliation was activated as VERIFIED: a copy of the live alp.db with three inserted rows is refused, naming what did not match; the genuine restore is accepted', async () => {
    const dir = tempDir('alp-forged-restore');
    const src = path.join(dir, 'src');
    await alpJson(['init', '--data', src]);
    const content = await FsContentStore.open(path.join(src, 'content'));
    await content.put('artifacts/orphan/v1/f', bytesOf('nobody names me'));
    await content.close();
    const b = await alpJson<{ backup_id: string; manifest: { manifest_digest: string; epoch: number; snapshot_at: string } }>([
      'backup',
      '--data',
      src,
      '--out',
      path.join(dir, 'b1'),
    ]);
    const restored = path.join(dir, 'restored');
    await alpJson(['restore', '--data', restored, '--from', path.join(dir, 'b1')]);
    await alpJson(['reconcile', '--data', restored, '--activate']);

    const forged = path.join(dir, 'forged', 'alp.db');
    copyDb(path.join(src, 'alp.db'), forged);
    await forge(forged, { backup_id: b.backup_id, ...b.manifest }, src);

    const t0 = Date.now();
    const env = (days: number) => ({ env: { ALP_NOW: new Date(t0 + days * DAY_MS).toISOString() } });
    const run = async (restore: string, days: number) => {
      const common = ['--data', src, '--action', 'QUARANTINE', '--epoch', '1'];
      const plan = await runAlp(['retention', 'plan', ...common, '--json'], env(days));
      assert.equal(plan.code, 0, plan.stderr);
      const digest = String(JSON.parse(plan.stdout).plan_digest);
      const r = await runAlp(
        ['retention', 'run', ...common, '--plan-digest', digest, '--evidence', 'CHG-17', '--restore', restore, '--json'],
        env(days),
      );
      return { ...r, out: r.stdout ? JSON.parse(r.stdout) : undefined };
    };
    const first = await run(restored, 0);
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(first.out.observed, ['artifacts/orphan/v1/f']);

    // After the grace period the approval's restore proof is read: the forged copy is refused.
    const bad = await run(forged, 8);
    assert.equal(bad.out?.status, 'REFUSED', bad.stdout + bad.stderr);
    assert.match(bad.out.reason, /do not match backup/);
    // The copy holds the live registry's record of that very backup, which no restore of it can hold.
    assert.match(bad.out.reason, new RegExp(`SYS#installation BACKUP#${b.backup_id}`));
    assert.deepEqual(bad.out.quarantined, []);

    const good = await run(restored, 8);
    assert.equal(good.code, 0, good.stderr);
    assert.equal(good.out.status, 'DONE', good.out.reason);
    assert.deepEqual(good.out.quarantined, ['artifacts/orphan/v1/f']);
  });
});
