/**
 * Issue 14, retention and recovery paths (items 4 and 5), on both profiles (SQLite + fs and DynamoDB
 * Local + s3rver). Time moves only through the injected clock. A "crash" of a purge is a content
 * store whose first delete throws (the fault-injection approach of test/retention/suite.ts).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { DAY_MS } from '../../src/core/clock.ts';
import { Conflict, InvalidInput, NotFound, StorageFailure } from '../../src/core/errors.ts';
import { backupSk, TELQ_FRESH_PREFIX, TELQ_PK } from '../../src/core/keys.ts';
import { createBackup, listBackups, retireBackup } from '../../src/recovery/backup.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import { queryAll } from '../../src/store/item-store.ts';
import { readFence } from '../../src/system/fence.ts';
import { recoverMaintenance } from '../../src/system/recovery.ts';
import { advanceEpoch } from '../../src/system/state.ts';
import { stopDistributedServers } from '../helpers/distributed.ts';
import {
  distributed,
  type Engine,
  embedded,
  epochOf,
  installationsOf,
  observationOf,
  operator,
  plantOrphan,
  purgeDiesAtFirstDelete,
  type RetentionInstallation,
  runRetention,
} from '../helpers/retention-harness.ts';
import { collect, tempDir } from '../helpers/tmp.ts';

after(stopDistributedServers);

function retentionSafety(engine: Engine): void {
  describe(`retention safety (issue 14) on ${engine.name}`, () => {
    const fresh = installationsOf(engine);

    /** Quarantines what is orphaned now, lets the quarantine pass, then starts a PURGE that dies at its first delete. */
    const purgeDiesAfterPrepared = async (i: RetentionInstallation, restore: string, pins: string[]) => {
      await runRetention(i, 'QUARANTINE', restore);
      i.ctx.clock.advance(7 * DAY_MS);
      await runRetention(i, 'QUARANTINE', restore);
      i.ctx.clock.advance(30 * DAY_MS);
      await purgeDiesAtFirstDelete(i, restore, pins);
      await advanceEpoch(i.ctx.items, operator.id, 'purge died', i.ctx.clock.now().toISOString());
    };

    it('issue 14 item 4: pins survive a PURGE that dies after PREPARED — recovery honours the recorded pins and its own, and never unlinks a pinned object', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      const keep = await plantOrphan(i, 'artifacts/p/v1/keep-me', 'the operator decides to keep this after the crash');
      await plantOrphan(i, 'artifacts/p/v1/reclaim-me', 'really unwanted');
      const pinnedAtRun = await plantOrphan(i, 'artifacts/p/v1/pinned-at-run', 'pinned by the purge itself');
      await purgeDiesAfterPrepared(i, restore, [pinnedAtRun]);
      const prepared = await observationOf(i, 'artifacts/p/v1/keep-me');
      assert.equal(prepared?.state, 'PREPARED');
      assert.deepEqual(prepared?.pins, [pinnedAtRun], 'the pins in force are recorded with the prepared purge');

      const r = await recoverMaintenance(i.ctx, await epochOf(i.ctx), 'recovery by os:operator', undefined, { pins: [keep] });
      const step = r.steps.find((s) => s.name.startsWith('retention'))?.result as Record<string, unknown>;
      assert.equal(step.pins, 2, 'the recovery scan used the recorded pin and the recovery pin');
      assert.deepEqual(step.cancelled, ['artifacts/p/v1/keep-me']);
      assert.deepEqual(step.purged, []);
      assert.equal((await observationOf(i, 'artifacts/p/v1/reclaim-me'))?.state, 'QUARANTINED', 'never prepared: left for the next purge');
      // The pinned object is still there and verifies against its digest.
      const bytes = await collect(await i.ctx.content.get('artifacts/p/v1/keep-me', keep));
      assert.equal(bytes.toString(), 'the operator decides to keep this after the crash');
      await collect(await i.ctx.content.get('artifacts/p/v1/pinned-at-run', pinnedAtRun));
      assert.equal(await observationOf(i, 'artifacts/p/v1/keep-me'), undefined, 'its purge is cancelled, not left PREPARED');
      assert.equal(await readFence(i.ctx), undefined, 'recovery released the fence');
    });

    it('issue 14 item 5: a rotated-away backup fails retention with a coded error naming it until `alp backups --retire` records its retirement; a retired backup is no restore proof', async () => {
      const i = await fresh();
      attachAuditSinks(i.ctx);
      const restore = await i.verifiedRestore();
      await plantOrphan(i, 'artifacts/b/v1/orphan', 'unreferenced');
      const out = path.join(tempDir('alp-rotated'), 'daily-01');
      const { backup_id: id } = await createBackup(i.ctx, { out, actor: operator.id });
      fs.rmSync(out, { recursive: true, force: true }); // the 30-day rotation

      const err = await runRetention(i, 'QUARANTINE', restore).catch((e: unknown) => e);
      assert.ok(err instanceof NotFound, `a coded error, not INTERNAL: ${String(err)}`);
      assert.match(
        err.message,
        new RegExp(`backup ${id} is COMPLETE in the registry but its manifest at ${out.replace(/[/.]/g, '\\$&')} is missing`),
      );
      assert.ok(err.message.includes(`alp backups --retire ${id}`), err.message);
      assert.deepEqual(err.details, { backup_id: id, location: out });

      await assert.rejects(retireBackup(i.ctx, id, operator.id, '  '), InvalidInput);
      const retired = await retireBackup(i.ctx, id, operator.id, 'rotated away after 30 days');
      assert.equal(retired.status, 'RETIRED');
      await assert.rejects(retireBackup(i.ctx, id, operator.id, 'again'), Conflict);
      const listed = (await listBackups(i.ctx)).find((b) => b.backup_id === id);
      assert.equal(listed?.status, 'RETIRED');
      assert.equal(listed?.retired_by, operator.id);
      assert.equal(listed?.retired_at, i.ctx.clock.now().toISOString());
      assert.equal(listed?.retire_reason, 'rotated away after 30 days');
      const outbox = await queryAll(i.ctx.items, { pk: TELQ_PK, sk: { beginsWith: TELQ_FRESH_PREFIX }, consistent: true });
      const event = outbox.find((r) => r.id === `backup:${id}:retired`);
      assert.equal((event?.payload as Record<string, unknown>)?.type, 'backup_retired');
      assert.ok(event, 'the retirement was enqueued in the audit outbox in the same transaction');

      const ran = await runRetention(i, 'QUARANTINE', restore);
      assert.deepEqual(ran.observed, ['artifacts/b/v1/orphan'], 'retention runs again');

      // The restore the approvals rest on was made from another backup: once retired, it proves nothing.
      const basis = (await listBackups(i.ctx)).find((b) => b.status === 'COMPLETE');
      assert.ok(basis);
      await retireBackup(i.ctx, basis.backup_id, operator.id, 'superseded');
      i.ctx.clock.advance(7 * DAY_MS);
      const refused = await runRetention(i, 'QUARANTINE', restore);
      assert.equal(refused.status, 'REFUSED');
      assert.match(refused.reason ?? '', /retired by os:operator .*a retired backup can no longer be the basis of a restore proof/);
    });

    it('issue 14 item 5: a storage failure of the installation’s own backup registry while the restore proof is checked fails the run as STORAGE, never as a refusal of the restore', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      const basis = (await listBackups(i.ctx)).find((b) => b.status === 'COMPLETE');
      assert.ok(basis);
      await plantOrphan(i, 'artifacts/r/v1/orphan', 'unreferenced');
      await runRetention(i, 'QUARANTINE', restore);
      i.ctx.clock.advance(7 * DAY_MS);
      const realGet = i.ctx.items.get.bind(i.ctx.items);
      i.ctx.items.get = async (key, opts) => {
        if (key.SK === backupSk(basis.backup_id)) throw new StorageFailure('storage failure: EIO (injected)');
        return realGet(key, opts);
      };
      const err = await runRetention(i, 'QUARANTINE', restore).then(
        (r) => r,
        (e: unknown) => e,
      );
      i.ctx.items.get = realGet;
      assert.ok(err instanceof StorageFailure, `the run fails with the storage error: ${JSON.stringify(err)}`);
      const ran = await runRetention(i, 'QUARANTINE', restore);
      assert.deepEqual(ran.quarantined, ['artifacts/r/v1/orphan'], 'the retry succeeds');
    });
  });
}

retentionSafety(embedded);
retentionSafety(distributed);
