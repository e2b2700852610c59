/**
 * Issue 17 items 9 and 12 on the telemetry outbox, one suite for every engine (fence.sqlite.test.ts,
 * fence.dynamodb.test.ts), each test on its own fresh installation (installation record with the
 * given fence and telemetry shard counts) and a manual clock:
 * - seed 004 "Maintenance must fence every artifact publisher, reader, database writer and competing
 *   maintenance operation until the call returns": the trusted host's custom enqueue, claim and
 *   acknowledge are database writers, refused with MAINTENANCE while a maintenance holds the fence
 *   (by each transaction's own fence check, not only the pre-check), and work again after release;
 * - seed 004 "exhausted records release capacity and increment exhausted": at once — a full queue
 *   with two exhausted records admits the next audited event (and the next custom record) without
 *   any claim in between.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ContentStore } from '../../src/content/content-store.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { MaintenanceInProgress } from '../../src/core/errors.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { propose, withdraw } from '../../src/lifecycle/transitions.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import type { ItemStore } from '../../src/store/item-store.ts';
import { acquireMaintenance, releaseMaintenance } from '../../src/system/fence.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { UNSHARDED } from '../../src/system/layout.ts';
import { acknowledgeRecords } from '../../src/telemetry/ack.ts';
import { claimRecords } from '../../src/telemetry/claim.ts';
import type { TelemetryLimits } from '../../src/telemetry/limits.ts';
import type { ClaimedRecord, TelemetryQueue } from '../../src/telemetry/queue.ts';
import { assertCountersMatchItems, queueContents } from '../helpers/telemetry-harness.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

export interface FenceSuiteHarness {
  name: string;
  open(): Promise<{ items: ItemStore; content: ContentStore }>;
}

const T0 = '2026-03-01T12:00:00.000Z';
const OWNER = 'host-exporter';

interface Inst {
  ctx: ServiceContext & { clock: ManualClock };
  queue: TelemetryQueue;
  close(): Promise<void>;
}

const maintenance = (e: unknown) => e instanceof MaintenanceInProgress && e.code === 'MAINTENANCE';

export function telemetryFenceSuite(h: FenceSuiteHarness): void {
  async function install(fenceShards: number, limits: Partial<TelemetryLimits>, telemetryShards = 1): Promise<Inst> {
    const { items, content } = await h.open();
    const clock = new ManualClock(T0);
    const layout = { ...UNSHARDED, fence_shards: fenceShards, telemetry_shards: telemetryShards };
    const ctx = createContext({ items, content, clock, layout }) as ServiceContext & { clock: ManualClock };
    await initInstallation(ctx);
    const queue = await attachAuditSinks(ctx, { limits });
    await queue.open();
    return {
      ctx,
      queue,
      close: async () => {
        await ctx.items.close();
        await ctx.content.close();
      },
    };
  }

  /** The outbox's items (records, identities, counters), for "nothing was written". */
  const picture = async (inst: Inst) => JSON.stringify(await queueContents(inst.ctx.items));

  for (const fenceShards of [1, 8]) {
    describe(`telemetry and the maintenance fence: ${h.name}, ${fenceShards} fence shard(s)`, () => {
      it('Maintenance must fence every artifact publisher, reader, database writer and competing maintenance operation until the call returns: custom enqueue, claim and acknowledge are refused with MAINTENANCE', async () => {
        const inst = await install(fenceShards, { maxRecords: 3, maxAttempts: 5 });
        try {
          const { queue, ctx } = inst;
          for (const id of ['r1', 'r2']) assert.equal((await queue.enqueue(id, { id }, ctx.clock.now())).status, 'accepted');
          const [leased] = await queue.claim(1, OWNER, ctx.clock.now(), { maxRecords: 1, leaseMs: 60_000 });
          assert.ok(leased);
          const before = await picture(inst);
          const m = await acquireMaintenance(ctx, 1, 'backup os:alice', { purpose: 'backup' });
          await assert.rejects(queue.enqueue('r3', { id: 'r3' }, ctx.clock.now()), maintenance, 'enqueue');
          await assert.rejects(queue.claim(1, OWNER, ctx.clock.now()), maintenance, 'claim');
          await assert.rejects(queue.acknowledge(1, OWNER, leased.id, leased.leaseToken, ctx.clock.now()), maintenance, 'acknowledge');
          // The transactions' own checks, without the pre-check (a stale pre-read lets a call through to them).
          const view = { items: ctx.items, layout: await queue.openLayout(), fenceShards };
          const req = { epoch: 1, owner: OWNER, nowMs: ctx.clock.now().getTime(), maxRecords: 5, maxBytes: 1 << 20, leaseMs: 1000 };
          await assert.rejects(claimRecords(view, { ...req, rotor: { next: 0 } }), maintenance, 'claim transaction');
          await assert.rejects(
            acknowledgeRecords(view, 1, OWNER, [{ id: leased.id, leaseToken: leased.leaseToken }], ctx.clock.now().getTime()),
            maintenance,
            'acknowledge transaction',
          );
          assert.equal(await picture(inst), before, 'nothing written while fenced');
          await releaseMaintenance(ctx, m);

          assert.equal((await queue.enqueue('r3', { id: 'r3' }, ctx.clock.now())).status, 'accepted');
          await queue.acknowledge(1, OWNER, leased.id, leased.leaseToken, ctx.clock.now());
          assert.equal((await queue.claim(1, OWNER, ctx.clock.now())).length, 2);
          const m2 = await acquireMaintenance(ctx, 1, 'backup os:alice', { purpose: 'backup' });
          for (const id of ['r4', 'r5']) await assert.rejects(queue.enqueue(id, {}, ctx.clock.now()), maintenance, `${id} while fenced`);
          await releaseMaintenance(ctx, m2);
          const c = await queue.counters();
          assert.deepEqual([c.accepted, c.delivered, c.dropped, c.live_records], [3, 1, 0, 2]);
          await assertCountersMatchItems(ctx.items);
        } finally {
          await inst.close();
        }
      });

      it('a full queue: the counted drop of a custom enqueue is refused while fenced too', async () => {
        const inst = await install(fenceShards, { maxRecords: 1 });
        try {
          const { queue, ctx } = inst;
          assert.equal((await queue.enqueue('r1', {}, ctx.clock.now())).status, 'accepted');
          assert.equal((await queue.enqueue('r2', {}, ctx.clock.now())).status, 'dropped');
          const m = await acquireMaintenance(ctx, 1, 'backup os:alice', { purpose: 'backup' });
          await assert.rejects(queue.enqueue('r3', {}, ctx.clock.now()), maintenance);
          await releaseMaintenance(ctx, m);
          assert.equal((await queue.counters()).dropped, 1);
        } finally {
          await inst.close();
        }
      });
    });
  }

  describe(`exhausted records release capacity at once: ${h.name}`, () => {
    for (const telemetryShards of [1, 4]) {
      it(`Expired leases retry; exhausted records release capacity and increment exhausted — at once: with the queue full and two records exhausted, the next audited event is admitted without a claim in between (${telemetryShards} telemetry shard(s))`, async () => {
        // Every event is of one artifact, so all land in its shard; with 4 shards the limit is that shard's share.
        const inst = await install(1, { maxRecords: 4 * telemetryShards, maxAttempts: 2 }, telemetryShards);
        try {
          const { queue, ctx } = inst;
          const { version } = await createArtifact(ctx, agent, { name: 'x', filename: 'x.sh', body: bytesOf('x') });
          const id = version.artifact_id;
          let proposed = false;
          const events = async (n: number) => {
            for (let i = 0; i < n; i++) {
              ctx.clock.advance(1);
              await (proposed ? withdraw(ctx, agent, id, 1) : propose(ctx, agent, id, 1));
              proposed = !proposed;
            }
          };
          await events(3); // 4 events: the shard is full
          const full = await queue.counters();
          assert.deepEqual([full.accepted, full.live_records, full.dropped], [4, 4, 0]);
          // Two records get their first lease, and then a retry after it expired: their last permitted attempt.
          const first = await queue.claim(1, OWNER, ctx.clock.now(), { maxRecords: 2, leaseMs: 1000 });
          ctx.clock.advance(1000);
          const retried = await queue.claim(1, OWNER, ctx.clock.now(), { maxRecords: 4, leaseMs: 1000 });
          assert.deepEqual(
            retried.filter((r: ClaimedRecord) => first.some((f) => f.id === r.id)).map((r) => r.attempts),
            [2, 2],
          );
          assert.equal(retried.length, 4, 'and the other two their first');
          ctx.clock.advance(1000);
          // Two records' last leases have expired: exhausted (the other two may retry). No claim from here on.
          await events(1);
          const c = await queue.counters();
          assert.deepEqual(
            { accepted: c.accepted, dropped: c.dropped, exhausted: c.exhausted, live: c.live_records, delivered: c.delivered },
            { accepted: 5, dropped: 0, exhausted: 2, live: 3, delivered: 0 },
          );
          await events(1);
          const d = await queue.counters();
          assert.deepEqual([d.accepted, d.dropped, d.live_records], [6, 0, 4], 'the second freed slot takes the next event');
          await events(1);
          assert.equal((await queue.counters()).dropped, 1, 'full again: dropped');
          await assertCountersMatchItems(ctx.items);
        } finally {
          await inst.close();
        }
      });
    }

    it('a custom enqueue into a full queue takes the capacity of exhausted records at once too', async () => {
      const inst = await install(1, { maxRecords: 2, maxAttempts: 1 });
      try {
        const { queue, ctx } = inst;
        for (const id of ['r1', 'r2']) assert.equal((await queue.enqueue(id, {}, ctx.clock.now())).status, 'accepted');
        assert.equal((await queue.enqueue('r3', {}, ctx.clock.now())).status, 'dropped', 'full');
        assert.equal((await queue.claim(1, OWNER, ctx.clock.now(), { leaseMs: 500 })).length, 2);
        assert.equal((await queue.enqueue('r4', {}, ctx.clock.now())).status, 'dropped', 'leases not expired yet: full');
        ctx.clock.advance(500);
        assert.equal((await queue.enqueue('r5', {}, ctx.clock.now())).status, 'accepted', 'both exhausted: room');
        const c = await queue.counters();
        assert.deepEqual([c.accepted, c.dropped, c.exhausted, c.live_records], [3, 2, 2, 1]);
        await assertCountersMatchItems(ctx.items);
      } finally {
        await inst.close();
      }
    });
  });
}
