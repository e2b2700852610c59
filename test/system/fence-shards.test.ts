/**
 * Issue 16, item 3: the maintenance fence without a global hot item (docs/design.md §3). On both
 * engines, unsharded (the master FENCE item is the only shard: exactly the item of before) and with 8
 * shards: a publisher checks one shard; a maintenance holds the master and every shard while its
 * function runs, so a publisher on any shard is refused; a crash after k of N shards (or mid-release)
 * leaves publishers on the held shards refused, `maintenance status` says so, and recovery in a newer
 * epoch re-stamps every shard and then releases them all.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { MaintenanceInProgress, StaleEpoch } from '../../src/core/errors.ts';
import { allShards } from '../../src/core/shard.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import {
  acquireMaintenance,
  clearFenceForTest,
  fenceKey,
  maintenanceStatus,
  plantFenceForTest,
  readFence,
  withMaintenance,
} from '../../src/system/fence.ts';
import { FENCE_SHARD_CHUNK, shardOfScope } from '../../src/system/fence-shards.ts';
import { recoverMaintenance } from '../../src/system/recovery.ts';
import { advanceEpoch } from '../../src/system/state.ts';
import { stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';
import { dying, ENGINES, installation, probe, shardItems } from './fence-harness.ts';

after(stopDistributedServers);

/** Enough shards for two acquisition transactions (97 + 33). */
const BIG = 130;

const create = (ctx: Parameters<typeof createArtifact>[0], name: string) =>
  createArtifact(ctx, agent, { name, filename: 'x.sh', body: bytesOf(name) });

async function probeAll(ctx: Parameters<typeof probe>[0]): Promise<boolean[]> {
  const out: boolean[] = [];
  for (const s of allShards(ctx.layout.fence_shards)) out.push(await probe(ctx, s));
  return out;
}

for (const engine of ENGINES) {
  for (const n of [1, 8]) {
    describe(`the fence on ${engine}, ${n} shard${n === 1 ? '' : 's'}`, () => {
      test('held on every shard while the maintenance runs, refusing publishers on each; released when it returns or throws', async () => {
        const { ctx, close } = await installation(engine, n);
        try {
          const { version } = await create(ctx, 'before');
          assert.deepEqual(await probeAll(ctx), new Array(n).fill(true), 'no shard held before');
          await withMaintenance(ctx, 1, 'retention os:alice', async (m) => {
            const s = await maintenanceStatus(ctx);
            assert.equal(s.state, 'held');
            assert.deepEqual([s.shards.count, s.shards.held, s.shards.held_by_other], [n, n, 0]);
            assert.deepEqual(await probeAll(ctx), new Array(n).fill(false), 'every shard refuses a publisher');
            await assert.rejects(create(ctx, 'during'), MaintenanceInProgress);
            await assert.rejects(addProvenance(ctx, agent, version.artifact_id, { action: 'review' }), MaintenanceInProgress);
            await assert.rejects(
              withMaintenance(ctx, 1, 'competitor', async () => {}),
              MaintenanceInProgress,
            );
            await m.commit([{ op: 'put', item: { PK: 'RET#test', SK: 'X' } }]);
            // Unsharded: no shard items at all (the master is the shard); sharded: one per shard, own partitions.
            const keys = (await shardItems(ctx.items)).map((k) => k.PK);
            assert.deepEqual(keys, n === 1 ? [] : allShards(n).map((i) => `SYS#fence#${i}`));
          });
          const free = await maintenanceStatus(ctx);
          assert.deepEqual([free.state, free.shards.held, free.fence], ['free', 0, undefined]);
          assert.deepEqual(await shardItems(ctx.items), [], 'released: no shard item left');
          assert.deepEqual(await probeAll(ctx), new Array(n).fill(true));
          await create(ctx, 'after');

          await assert.rejects(
            withMaintenance(ctx, 1, 'x', async () => {
              throw new Error('boom');
            }),
            /boom/,
          );
          assert.equal((await maintenanceStatus(ctx)).state, 'free', 'released after a throw');
          await assert.rejects(
            withMaintenance(ctx, 1, 'purge', async () => Promise.reject(new Error('interrupted purge')), { holdOnFailure: true }),
            /interrupted purge/,
          );
          assert.equal((await maintenanceStatus(ctx)).state, 'held', 'holdOnFailure keeps every shard');
          assert.deepEqual(await probeAll(ctx), new Array(n).fill(false));
          await advanceEpoch(ctx.items, 'op', 'recover', ctx.clock.now().toISOString());
          const r = await recoverMaintenance(ctx, 2, 'op', []);
          assert.equal(r.abandoned?.holder, 'purge');
          assert.equal((await maintenanceStatus(ctx)).state, 'free');
          assert.deepEqual(await probeAll(ctx), new Array(n).fill(true));
        } finally {
          await close();
        }
      });

      test('plantFenceForTest holds the master and every shard (what a crashed holder leaves); clearFenceForTest frees them', async () => {
        const { ctx, close } = await installation(engine, n);
        try {
          await plantFenceForTest(ctx, { holder: 'planted retention', epoch: 1 });
          assert.equal((await maintenanceStatus(ctx)).state, 'held');
          assert.deepEqual(await probeAll(ctx), new Array(n).fill(false));
          await assert.rejects(create(ctx, 'p'), MaintenanceInProgress);
          await clearFenceForTest(ctx);
          assert.equal((await maintenanceStatus(ctx)).state, 'free');
          await create(ctx, 'p');
        } finally {
          await close();
        }
      });

      test('a crashed holder keeps every shard until recovery in a newer epoch; the zombie is fenced out', async () => {
        const { ctx, close } = await installation(engine, n);
        try {
          const zombie = await acquireMaintenance(ctx, 1, 'crashed retention', { purpose: 'purge' });
          await assert.rejects(create(ctx, 'p'), MaintenanceInProgress);
          await assert.rejects(recoverMaintenance(ctx, 1, 'op'), /held in the current epoch 1/);
          await advanceEpoch(ctx.items, 'op', 'crash recovery', ctx.clock.now().toISOString());
          assert.equal((await maintenanceStatus(ctx)).abandoned, true);
          assert.deepEqual(await probeAll(ctx), new Array(n).fill(false), 'publishers stay out until recovery');
          await assert.rejects(zombie.commit([{ op: 'put', item: { PK: 'RET#z', SK: 'Z' } }]), StaleEpoch);
          let seen: Awaited<ReturnType<typeof maintenanceStatus>> | undefined;
          const r = await recoverMaintenance(ctx, 2, 'op', [
            {
              name: 'look',
              run: async () => {
                seen = await maintenanceStatus(ctx);
                return undefined;
              },
            },
          ]);
          assert.equal(r.recovered, true);
          assert.equal(seen?.state, 'held', 'the recovery steps run with every shard re-stamped');
          assert.equal(seen?.shards.held, n);
          assert.equal(await readFence(ctx), undefined);
          assert.deepEqual(await shardItems(ctx.items), []);
          await create(ctx, 'p');
        } finally {
          await close();
        }
      });
    });
  }

  describe(`a crash part-way through the shards on ${engine} (${BIG} shards: chunks of ${FENCE_SHARD_CHUNK})`, () => {
    test('after k of N shards: publishers on held shards refused, on the others not; status partial; recovery releases every shard', async () => {
      const { ctx, close } = await installation(engine, BIG);
      try {
        // Real publishers: an artifact on a shard the first chunk takes (0–96) and one on a later shard.
        const onShard = new Map<boolean, string>();
        for (let i = 0; onShard.size < 2; i++) {
          const id = (await create(ctx, `a${i}`)).version.artifact_id;
          const early = shardOfScope({ kind: 'artifacts', ids: [id] }, BIG) < FENCE_SHARD_CHUNK;
          if (!onShard.has(early)) onShard.set(early, id);
        }
        const [heldId, freeId] = [onShard.get(true) as string, onShard.get(false) as string];
        // The master, then one chunk (shards 0–96), then the process dies.
        await assert.rejects(acquireMaintenance({ ...ctx, items: dying(ctx.items, 2) }, 1, 'dies acquiring'), /process crashed/);
        await assert.rejects(addProvenance(ctx, agent, heldId, { action: 'after crash' }), MaintenanceInProgress);
        await addProvenance(ctx, agent, freeId, { action: 'after crash' });
        const s = await maintenanceStatus(ctx);
        assert.deepEqual([s.state, s.fence?.holder, s.shards.held, s.shards.count], ['partial', 'dies acquiring', FENCE_SHARD_CHUNK, BIG]);
        assert.equal(s.shards.missing?.[0], FENCE_SHARD_CHUNK, 'the first shard not held is named');
        assert.equal(await probe(ctx, 5), false, 'a held shard refuses its publishers');
        assert.equal(await probe(ctx, BIG - 10), true, 'an unheld shard does not (the maintenance never started its work)');
        await assert.rejects(
          withMaintenance(ctx, 1, 'other', async () => {}),
          MaintenanceInProgress,
        );
        await advanceEpoch(ctx.items, 'op', 'crash recovery', ctx.clock.now().toISOString());
        assert.equal(await probe(ctx, 5), false, 'still refused in the newer epoch until recovery');
        const r = await recoverMaintenance(ctx, 2, 'op', []);
        assert.equal(r.abandoned?.holder, 'dies acquiring');
        const after = await maintenanceStatus(ctx);
        assert.deepEqual([after.state, after.shards.held, after.shards.held_by_other], ['free', 0, 0]);
        assert.deepEqual(await shardItems(ctx.items), []);
        assert.equal(await probe(ctx, 5), true);
        await addProvenance(ctx, agent, heldId, { action: 'after recovery' });
      } finally {
        await close();
      }
    });

    test('mid-release: the released shards admit publishers, the rest refuse until recovery', async () => {
      const { ctx, close } = await installation(engine, BIG);
      try {
        // Master + 2 acquisition chunks, then one release chunk (shards 0–96), then the process dies.
        const mortal = { ...ctx, items: dying(ctx.items, 4) };
        await assert.rejects(
          withMaintenance(mortal, 1, 'dies releasing', async () => 'done'),
          /process crashed/,
        );
        const s = await maintenanceStatus(ctx);
        assert.deepEqual([s.state, s.shards.held], ['partial', BIG - FENCE_SHARD_CHUNK]);
        assert.equal(await probe(ctx, 5), true);
        assert.equal(await probe(ctx, BIG - 10), false);
        assert.ok(await ctx.items.get(fenceKey), 'the master is released last');
        await advanceEpoch(ctx.items, 'op', 'crash recovery', ctx.clock.now().toISOString());
        await recoverMaintenance(ctx, 2, 'op', []);
        assert.equal((await maintenanceStatus(ctx)).state, 'free');
        assert.equal(await probe(ctx, BIG - 10), true);
      } finally {
        await close();
      }
    });

    test('shards held without a master (not left by the protocol) show as orphaned and are recovered', async () => {
      const { ctx, close } = await installation(engine, BIG);
      try {
        await acquireMaintenance(ctx, 1, 'vanished master');
        await ctx.items.delete(fenceKey);
        assert.equal((await maintenanceStatus(ctx)).state, 'orphaned');
        await assert.rejects(acquireMaintenance(ctx, 1, 'next'), /without the master fence/);
        assert.equal(await readFence(ctx), undefined, 'the refused acquisition gave the master back');
        await advanceEpoch(ctx.items, 'op', 'orphans', ctx.clock.now().toISOString());
        assert.equal((await recoverMaintenance(ctx, 2, 'op', [])).recovered, true);
        assert.equal((await maintenanceStatus(ctx)).state, 'free');
      } finally {
        await close();
      }
    });
  });
}
