import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { Conflict, MaintenanceInProgress, RestoreHeld, StaleEpoch } from '../../src/core/errors.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { createBackup } from '../../src/recovery/backup.ts';
import { reconcile } from '../../src/recovery/reconcile.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { acquireMaintenance, maintenanceStatus, readFence, releaseMaintenance, withMaintenance } from '../../src/system/fence.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { recoverMaintenance } from '../../src/system/recovery.ts';
import { advanceEpoch, epochHistory, readEpoch, restoreHoldKey } from '../../src/system/state.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';
import { allItems, embeddedAt } from './helpers.ts';

async function fresh() {
  const ctx = await embeddedAt(tempDir('alp-maint'));
  await initInstallation(ctx);
  return ctx;
}

const publish = (ctx: Parameters<typeof createArtifact>[0], name = 'p') =>
  createArtifact(ctx, agent, { name, filename: 'x.sh', body: bytesOf('x') });

describe('epochs', () => {
  it('start at 1 and advance by exactly one per call, racing callers included; every advance is recorded', async () => {
    const ctx = await fresh();
    assert.equal(await readEpoch(ctx.items), 1);
    const r = await advanceEpoch(ctx.items, 'alice', 'new worker', '2026-03-01T12:00:00.000Z');
    assert.deepEqual([r.previous, r.epoch], [1, 2]);
    const others = Array.from({ length: 4 }, () => new SqliteItemStore(ctx.dbPath));
    const results = await Promise.all(others.map((s, i) => advanceEpoch(s, `w${i}`, 'race', '2026-03-01T12:00:01.000Z')));
    assert.deepEqual(results.map((x) => x.epoch).sort(), [3, 4, 5, 6]);
    assert.equal(await readEpoch(ctx.items), 6);
    const history = await epochHistory(ctx.items);
    assert.deepEqual(
      history.map((h) => h.epoch),
      [6, 5, 4, 3, 2],
    );
    assert.equal(history.at(-1)?.advanced_by, 'alice');
    for (const s of others) await s.close();
  });
});

describe('the maintenance fence', () => {
  it('is exclusive and epoch-checked; publishers are refused while it is held; it is released when the function returns or throws', async () => {
    const ctx = await fresh();
    const before = (await allItems(ctx.items)).length;
    const result = await withMaintenance(
      ctx,
      1,
      'retention os:alice',
      async (m) => {
        assert.equal((await readFence(ctx))?.holder, 'retention os:alice');
        await assert.rejects(
          withMaintenance(ctx, 1, 'competitor', async () => 'no'),
          MaintenanceInProgress,
        );
        await assert.rejects(publish(ctx), MaintenanceInProgress);
        // The maintenance itself writes, conditioned on holding the fence.
        await m.commit([{ op: 'put', item: { PK: 'RET#test', SK: 'X', by: 'maintenance' } }]);
        await m.assertHeld();
        return 'done';
      },
      { purpose: 'test' },
    );
    assert.equal(result, 'done');
    assert.equal(await readFence(ctx), undefined);
    assert.equal((await allItems(ctx.items)).length, before + 1);
    await publish(ctx);

    await assert.rejects(
      withMaintenance(ctx, 1, 'x', async () => {
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal(await readFence(ctx), undefined, 'released after a throw');
    await assert.rejects(
      withMaintenance(
        ctx,
        1,
        'purge',
        async () => {
          throw new Error('interrupted purge');
        },
        { holdOnFailure: true },
      ),
      /interrupted purge/,
    );
    assert.equal((await readFence(ctx))?.holder, 'purge', 'holdOnFailure keeps publishers out');
  });

  it('refuses a stale epoch (STALE_EPOCH) and, on request, a held restore (RESTORE_HELD), taking nothing', async () => {
    const ctx = await fresh();
    await advanceEpoch(ctx.items, 'op', 'test', '2026-03-01T12:00:00.000Z');
    let ran = false;
    const fn = async () => {
      ran = true;
    };
    await assert.rejects(withMaintenance(ctx, 1, 'late', fn), StaleEpoch);
    await assert.rejects(withMaintenance(ctx, 3, 'early', fn), StaleEpoch);
    await ctx.items.put({ ...restoreHoldKey, restore_id: 'R' });
    await assert.rejects(withMaintenance(ctx, 2, 'retention', fn, { refuseWhileRestoreHeld: true }), RestoreHeld);
    assert.equal(ran, false);
    assert.equal(await readFence(ctx), undefined);
    await withMaintenance(ctx, 2, 'backup', fn);
    assert.equal(ran, true);
  });

  it('stays held after a crash until recovery in a newer epoch; the zombie holder is fenced out', async () => {
    const ctx = await fresh();
    const zombie = await acquireMaintenance(ctx, 1, 'crashed retention', { purpose: 'purge' });
    // The process "dies" here: nothing releases the fence.
    await assert.rejects(publish(ctx), MaintenanceInProgress);
    await assert.rejects(recoverMaintenance(ctx, 1, 'op'), /held in the current epoch 1/);
    await assert.rejects(
      withMaintenance(ctx, 1, 'other', async () => {}),
      MaintenanceInProgress,
    );

    await advanceEpoch(ctx.items, 'op', 'crash recovery', '2026-03-01T12:00:00.000Z');
    assert.equal((await maintenanceStatus(ctx)).abandoned, true);
    await assert.rejects(publish(ctx), MaintenanceInProgress, 'publishers stay out until recovery');
    await assert.rejects(
      withMaintenance(ctx, 2, 'new', async () => {}),
      /alp maintenance release --epoch 2/,
    );
    await assert.rejects(zombie.commit([{ op: 'put', item: { PK: 'RET#z', SK: 'Z' } }]), StaleEpoch);
    await assert.rejects(zombie.assertHeld(), StaleEpoch);
    await assert.rejects(recoverMaintenance(ctx, 1, 'op'), StaleEpoch);

    // A failing recovery step keeps the fence (now the recovery's, in epoch 2).
    await assert.rejects(
      recoverMaintenance(ctx, 2, 'op', [
        {
          name: 'fails',
          run: async () => {
            throw new Error('journal unreadable');
          },
        },
      ]),
      /journal unreadable/,
    );
    assert.deepEqual([(await readFence(ctx))?.holder, (await readFence(ctx))?.epoch], ['op', 2]);
    await assert.rejects(publish(ctx), MaintenanceInProgress);

    await advanceEpoch(ctx.items, 'op', 'retry recovery', '2026-03-01T12:00:01.000Z');
    const seen: string[] = [];
    const r = await recoverMaintenance(ctx, 3, 'op', [
      {
        name: 'purge journal',
        run: async (c, m) => {
          seen.push(String(m.abandoned?.holder));
          await m.commit([{ op: 'put', item: { PK: 'RET#journal', SK: 'REVIEWED', at: c.clock.now().toISOString() } }]);
          return { reviewed: 1 };
        },
      },
    ]);
    assert.equal(r.recovered, true);
    assert.equal(r.abandoned?.holder, 'op');
    assert.deepEqual(seen, ['op']);
    assert.deepEqual(r.steps, [{ name: 'purge journal', result: { reviewed: 1 } }]);
    assert.equal(await readFence(ctx), undefined);
    assert.ok(await ctx.items.get({ PK: 'RET#journal', SK: 'REVIEWED' }));
    await publish(ctx);
    await assert.rejects(releaseMaintenance(ctx, zombie), Conflict);
    assert.deepEqual(await recoverMaintenance(ctx, 3, 'op'), { recovered: false, steps: [] });
  });

  it('recovery writers respect a held fence too: a backup does not start, a reconciliation is not recorded', async () => {
    const ctx = await fresh();
    const dir = tempDir('alp-maint-bk');
    const m = await acquireMaintenance(ctx, 1, 'retention os:alice');
    const before = await allItems(ctx.items);
    await assert.rejects(createBackup(ctx, { out: path.join(dir, 'b'), actor: 't' }), /retention os:alice/);
    await assert.rejects(reconcile(ctx, { actor: 't' }), MaintenanceInProgress);
    assert.deepEqual(await allItems(ctx.items), before);
    assert.deepEqual(fs.readdirSync(dir), [], 'no backup directory, partial or complete');
    await releaseMaintenance(ctx, m);
    await createBackup(ctx, { out: path.join(dir, 'b'), actor: 't' });
    assert.equal((await reconcile(ctx, { actor: 't' })).status, 'VERIFIED');
  });

  it('holds across processes on the same database: a second connection is fenced by the first', async () => {
    const ctx = await fresh();
    const other = await embeddedAt(path.dirname(ctx.dbPath));
    const m = await acquireMaintenance(ctx, 1, 'node-a');
    await assert.rejects(publish(other), MaintenanceInProgress);
    await assert.rejects(acquireMaintenance(other, 1, 'node-b'), MaintenanceInProgress);
    await releaseMaintenance(ctx, m);
    await publish(other);
  });
});
