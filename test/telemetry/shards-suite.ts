/**
 * Issue 16 items 2 and 5 (telemetry part): the outbox in shards, and one audit transaction per
 * transition whatever the queue's fill. Runs on SQLite and DynamoDB Local (shards.*.test.ts), with 4
 * shards and, where the property is about the sink, unsharded too. DynamoDB Local serialises
 * transactions: the "no shared item" property is shown by the keys each transaction writes (the
 * wrapping store records them), not by throughput.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { commitAudited, readHead } from '../../src/audit/chain.ts';
import { checkAuditCounter, establishAuditBaseline } from '../../src/audit/counter.ts';
import type { ContentStore } from '../../src/content/content-store.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { TELQ_PK, TELQ_STATE_SK, telqShardPk } from '../../src/core/keys.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import type { ItemStore, TransactOp } from '../../src/store/item-store.ts';
import { UNSHARDED } from '../../src/system/layout.ts';
import type { TelemetryLimits } from '../../src/telemetry/limits.ts';
import { telemetryCounters } from '../../src/telemetry/metrics.ts';
import type { ClaimedRecord, TelemetryQueue } from '../../src/telemetry/queue.ts';
import { recordShard, share } from '../../src/telemetry/shards.ts';
import { bulkAuditPlan } from '../helpers/audit-plan.ts';
import { assertCountersMatchItems, hooked, setEpoch } from '../helpers/telemetry-harness.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

export interface ShardsHarness {
  name: string;
  open(): Promise<{ items: ItemStore; content: ContentStore }>;
  runs: number;
}

interface Inst {
  ctx: ServiceContext & { clock: ManualClock };
  queue: TelemetryQueue;
  items: ItemStore;
  hook: ReturnType<typeof hooked>;
  shards: number;
}

const T0 = '2026-03-01T12:00:00.000Z';
const OWNER = 'host-exporter';

/** The transactions that touched a telemetry STATE item, with the STATE keys they touched. */
function telemetryTransactions(calls: Array<{ method: string; arg: unknown }>): string[][] {
  return calls
    .filter((c) => c.method === 'transactWrite')
    .map((c) =>
      (c.arg as TransactOp[])
        .map((op) => ('key' in op ? op.key : op.item))
        .filter((k) => k.PK.startsWith(TELQ_PK) && k.SK === TELQ_STATE_SK)
        .map((k) => k.PK),
    )
    .filter((keys) => keys.length > 0);
}

export function shardsSuite(h: ShardsHarness): void {
  async function install(shards: number, limits?: Partial<TelemetryLimits>): Promise<Inst> {
    const { items: raw, content } = await h.open();
    const hook = hooked(raw);
    const clock = new ManualClock(T0);
    const layout = { ...UNSHARDED, telemetry_shards: shards };
    const ctx = createContext({ items: hook.store, content, clock, layout }) as ServiceContext & { clock: ManualClock };
    const queue = await attachAuditSinks(ctx, limits ? { limits } : {});
    await queue.open();
    return { ctx, queue, items: hook.store, hook, shards: (await queue.openLayout()).shards };
  }

  const pkOf = (inst: Inst, id: string) => telqShardPk(recordShard(id, inst.shards), inst.shards);

  /** Every shard's counters equal its items, and the sums equal status(). */
  async function assertEveryShard(inst: Inst): Promise<void> {
    let live = 0;
    for (const s of await inst.queue.shardStatus()) {
      await assertCountersMatchItems(inst.items, telqShardPk(s.shard, inst.shards));
      live += s.live_records;
    }
    const total = await inst.queue.status();
    assert.equal(total.live_records, live);
    assert.ok(total.live_records <= total.limits.maxRecords, 'the total never exceeds the configured limit');
    assert.equal(total.accepted, total.delivered + total.exhausted + total.live_records);
  }

  /** Custom ids that hash to `shard`. */
  function idsIn(inst: Inst, shard: number, n: number, prefix: string): string[] {
    const out: string[] = [];
    for (let i = 0; out.length < n; i++) if (recordShard(`${prefix}${i}`, inst.shards) === shard) out.push(`${prefix}${i}`);
    return out;
  }

  describe(`telemetry shards: ${h.name}`, () => {
    it('the limits split across the shards so the shares sum to the configured limits; the root keeps the installation-wide ones', async () => {
      const inst = await install(4, { maxRecords: 10, maxBytes: 10_000 });
      assert.equal(inst.shards, 4);
      const shards = await inst.queue.shardStatus();
      assert.deepEqual(
        shards.map((s) => s.limits.maxRecords),
        [3, 3, 2, 2],
      );
      assert.equal(
        shards.reduce((n, s) => n + s.limits.maxBytes, 0),
        10_000,
      );
      assert.deepEqual((await inst.queue.status()).limits, { maxRecords: 10, maxBytes: 10_000, maxAttempts: 5 });
      const root = await inst.items.get({ PK: TELQ_PK, SK: TELQ_STATE_SK });
      assert.equal(root?.shards, 4);
      assert.equal(root?.accepted, undefined, 'the root carries no counter: nothing writes it per event');
      // Fewer records than shards: fewer effective shards, each with at least one record.
      const small = await install(4, { maxRecords: 3 });
      assert.equal(small.shards, 3);
      assert.deepEqual(
        (await small.queue.shardStatus()).map((s) => s.limits.maxRecords),
        [1, 1, 1],
      );
      // Unsharded: the one STATE is TELQ#outbox / STATE with the counters, as before shards.
      const one = await install(1);
      assert.equal(one.shards, 1);
      assert.equal((await one.items.get({ PK: TELQ_PK, SK: TELQ_STATE_SK }))?.accepted, 0);
      assert.equal(share(1000, 0, 256) + share(1000, 255, 256), 4 + 3);
    });

    it('audit events go to the shard of their artifact; counters, /metrics figures and the audit counter sum the shards', async () => {
      const inst = await install(4);
      inst.hook.calls.length = 0;
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) {
        const { version } = await createArtifact(inst.ctx, agent, { name: `a${i}`, filename: 'f', body: bytesOf(`x${i}`) });
        ids.push(version.artifact_id);
      }
      // Each audit transaction touched the STATE of its artifact's shard only.
      const touched = telemetryTransactions(inst.hook.calls);
      assert.deepEqual(
        touched,
        ids.map((id) => [pkOf(inst, id)]),
      );
      assert.equal((await inst.queue.counters()).accepted, 6);
      assert.equal((await telemetryCounters(inst.items))?.accepted, 6);
      await assertEveryShard(inst);
      assert.equal(await establishAuditBaseline(inst.ctx), 0);
      await addVersion(inst.ctx, agent, ids[0] as string, { filename: 'f', body: bytesOf('v2') });
      const check = await checkAuditCounter(inst.ctx);
      assert.equal(check.status, 'checked');
      assert.equal(check.ok, true, check.detail);
      assert.equal(check.appended, 7);
    });

    it('a full shard drops (counted in that shard) without touching the other shards', async () => {
      const inst = await install(4, { maxRecords: 8 });
      const { version } = await createArtifact(inst.ctx, agent, { name: 'a', filename: 'f', body: bytesOf('x') });
      const id = version.artifact_id;
      const mine = recordShard(id, 4);
      inst.hook.calls.length = 0;
      for (let v = 2; v <= 4; v++) await addVersion(inst.ctx, agent, id, { filename: 'f', body: bytesOf(`v${v}`) });
      for (const keys of telemetryTransactions(inst.hook.calls)) assert.deepEqual(keys, [telqShardPk(mine, 4)]);
      const shards = await inst.queue.shardStatus();
      for (const s of shards) {
        if (s.shard === mine) assert.deepEqual([s.accepted, s.dropped, s.live_records], [2, 2, 2]);
        else assert.deepEqual([s.accepted, s.dropped], [0, 0]);
      }
      // Other shards still have room.
      const other = idsIn(inst, (mine + 1) % 4, 1, 'c')[0] as string;
      assert.equal((await inst.queue.enqueue(other, { n: 1 }, inst.ctx.clock.now())).status, 'accepted');
      assert.equal((await inst.queue.counters()).dropped, 2);
      await assertEveryShard(inst);
    });

    for (const shards of [1, 4]) {
      it(`every transition is one TransactWriteItems with the queue full, and a flip costs one retry (${shards} shard(s))`, async () => {
        const inst = await install(shards, { maxRecords: shards });
        const { version } = await createArtifact(inst.ctx, agent, { name: 'a', filename: 'f', body: bytesOf('x') }); // fills its shard
        const id = version.artifact_id;
        const perTransition = async (n: number) => {
          const out: number[] = [];
          for (let i = 0; i < n; i++) {
            inst.hook.calls.length = 0;
            await addVersion(inst.ctx, agent, id, { filename: 'f', body: bytesOf(`${Date.now()}-${i}-${Math.random()}`) });
            out.push(telemetryTransactions(inst.hook.calls).length);
          }
          return out;
        };
        // The first write finds the shard full (a flip from "room"): one retry; then one each.
        assert.deepEqual(await perTransition(6), [2, 1, 1, 1, 1, 1]);
        const c = await inst.queue.counters();
        assert.deepEqual([c.accepted, c.dropped], [1, 6]);
        // Drain: the next write finds room (a flip): one retry, then admitted in one transaction each
        // until full again.
        const [rec] = await inst.queue.claim(1, OWNER, inst.ctx.clock.now());
        await inst.queue.acknowledge(1, OWNER, (rec as ClaimedRecord).id, (rec as ClaimedRecord).leaseToken, inst.ctx.clock.now());
        assert.deepEqual(await perTransition(3), [2, 2, 1]);
        const d = await inst.queue.counters();
        assert.deepEqual([d.accepted, d.dropped], [2, 8]);
        await assertEveryShard(inst);
      });

      it(`a committed audit transaction of 60 events drops none while the queue has room; claim expands the batch into records with their own ids and acks (${shards} shard(s))`, async () => {
        const inst = await install(shards);
        const { version } = await createArtifact(inst.ctx, agent, { name: 'big', filename: 'f', body: bytesOf('x') });
        const id = version.artifact_id;
        inst.hook.calls.length = 0;
        await commitAudited(inst.ctx, { [id]: await readHead(inst.ctx, id) }, bulkAuditPlan(id, 60));
        assert.equal(telemetryTransactions(inst.hook.calls).length, 1, 'one transaction');
        const c = await inst.queue.counters();
        assert.deepEqual([c.accepted, c.dropped], [61, 0]);
        await assertEveryShard(inst);
        const claimed: ClaimedRecord[] = [];
        for (let round = 0; round < 10 && claimed.length < 61; round++)
          claimed.push(...(await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxRecords: 25 })));
        assert.deepEqual(claimed.map((r) => r.id).sort(), Array.from({ length: 61 }, (_, i) => `${id}:${i + 1}`).sort());
        await assertEveryShard(inst);
        const acks = await inst.queue.acknowledgeAll(
          1,
          OWNER,
          claimed.map((r) => ({ id: r.id, leaseToken: r.leaseToken })),
          inst.ctx.clock.now(),
        );
        assert.ok(acks.every((a) => a.acknowledged));
        const d = await inst.queue.counters();
        assert.deepEqual([d.delivered, d.live_records], [61, 0]);
        await assertEveryShard(inst);
      });
    }

    it('a commit at the operation limit (94 entries: 3 operations left after HEAD, fence and the transparency-log marker) still admits every event in batch items, with an observer sink registered after the outbox', async () => {
      const inst = await install(4);
      inst.ctx.auditSinks.push({ opsFor: async () => ({ ops: [], fallback: [] }) });
      const { version } = await createArtifact(inst.ctx, agent, { name: 'edge', filename: 'f', body: bytesOf('x') });
      const id = version.artifact_id;
      await commitAudited(inst.ctx, { [id]: await readHead(inst.ctx, id) }, bulkAuditPlan(id, 94));
      const c = await inst.queue.counters();
      assert.deepEqual([c.accepted, c.dropped], [95, 0]);
      await assertEveryShard(inst);
    });

    it('claim visits the shards round-robin from where the last claim stopped; acknowledgeAll spans shards; expiry, a new epoch and exhaustion per shard', async () => {
      const inst = await install(4, { maxAttempts: 2 });
      const per = [0, 1, 2, 3].map((s) => idsIn(inst, s, 3, `s${s}-`));
      for (const ids of per) for (const id of ids) await inst.queue.enqueue(id, { id }, inst.ctx.clock.now());
      const shardOfId = (r: ClaimedRecord) => recordShard(r.id, 4);
      const first = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxRecords: 4, leaseMs: 1000 });
      assert.deepEqual(first.map(shardOfId).sort(), [0, 1, 2, 3], 'one from each shard');
      const second = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxRecords: 2, leaseMs: 1000 });
      const third = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxRecords: 2, leaseMs: 1000 });
      assert.deepEqual([...second, ...third].map(shardOfId).sort(), [0, 1, 2, 3], 'the next claims start where the last stopped');
      const acks = await inst.queue.acknowledgeAll(
        1,
        OWNER,
        first.map((r) => ({ id: r.id, leaseToken: r.leaseToken })),
        inst.ctx.clock.now(),
      );
      assert.ok(acks.every((a) => a.acknowledged));
      assert.equal((await inst.queue.counters()).delivered, 4);
      // Expiry: the 4 unacknowledged leases come back; a new epoch takes them (second attempt).
      inst.ctx.clock.advance(2000);
      await setEpoch(inst.items, 2);
      const again = await inst.queue.claim(2, OWNER, inst.ctx.clock.now(), { maxRecords: 100, leaseMs: 1000 });
      assert.equal(again.length, 8);
      assert.equal(again.filter((r) => r.attempts === 2).length, 4);
      await assert.rejects(inst.queue.acknowledge(1, OWNER, (again[0] as ClaimedRecord).id, 'x', inst.ctx.clock.now()));
      // Their last lease expires: exhausted, counted in their shards, capacity released.
      inst.ctx.clock.advance(2000);
      assert.equal((await inst.queue.claim(2, OWNER, inst.ctx.clock.now(), { maxRecords: 100 })).length, 4);
      const c = await inst.queue.counters();
      assert.equal(c.exhausted, 4);
      const exhaustedByShard = (await inst.queue.shardStatus()).map((s) => s.exhausted);
      assert.equal(
        exhaustedByShard.reduce((a, b) => a + b, 0),
        4,
      );
      await assertEveryShard(inst);
    });

    it('random enqueues, audit writes, claims, acks and expiries keep every shard within its share and its counters equal to its items', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.oneof(
              fc.record({ kind: fc.constant('custom' as const), n: fc.integer({ min: 0, max: 40 }) }),
              fc.record({ kind: fc.constant('audit' as const), n: fc.integer({ min: 0, max: 2 }) }),
              fc.record({ kind: fc.constant('claim' as const), n: fc.integer({ min: 1, max: 5 }) }),
              fc.record({ kind: fc.constant('ack' as const), n: fc.integer({ min: 0, max: 5 }) }),
              fc.record({ kind: fc.constant('expire' as const), n: fc.constant(0) }),
            ),
            { minLength: 1, maxLength: 14 },
          ),
          async (steps) => {
            const inst = await install(4, { maxRecords: 6, maxAttempts: 2 });
            const artifacts: string[] = [];
            const leased: ClaimedRecord[] = [];
            let seq = 0;
            for (const step of steps) {
              const now = inst.ctx.clock.now();
              if (step.kind === 'custom') await inst.queue.enqueue(`c${step.n}-${seq++}`, { n: step.n }, now);
              else if (step.kind === 'audit') {
                const id = artifacts[step.n];
                if (id) await addVersion(inst.ctx, agent, id, { filename: 'f', body: bytesOf(`v${seq++}`) });
                else {
                  const { version } = await createArtifact(inst.ctx, agent, { name: `a${seq++}`, filename: 'f', body: bytesOf('x') });
                  artifacts.push(version.artifact_id);
                }
              } else if (step.kind === 'claim')
                leased.push(...(await inst.queue.claim(1, OWNER, now, { maxRecords: step.n, leaseMs: 1000 })));
              else if (step.kind === 'ack') {
                const r = leased.splice(step.n % Math.max(1, leased.length), 1)[0];
                if (r) await inst.queue.acknowledgeAll(1, OWNER, [{ id: r.id, leaseToken: r.leaseToken }], now);
              } else inst.ctx.clock.advance(1500);
              inst.ctx.clock.advance(1);
            }
            await assertEveryShard(inst);
          },
        ),
        { numRuns: h.runs },
      );
    });
  });
}
