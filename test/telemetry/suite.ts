/**
 * Seed 004 "Best-effort telemetry with explicit pressure", sentence by sentence, as tests. Every engine
 * runs exactly this suite (sqlite.test.ts, dynamodb.test.ts); each test opens its own empty
 * installation (own SQLite file or DynamoDB table) with a manual clock.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import { isAuditType } from '../../src/audit/chain.ts';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import type { ContentStore } from '../../src/content/content-store.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { AlpError, Conflict, InvalidInput, RestoreHeld, StaleEpoch } from '../../src/core/errors.ts';
import { TELQ_PK } from '../../src/core/keys.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { propose, withdraw } from '../../src/lifecycle/transitions.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import type { ItemStore, TransactOp } from '../../src/store/item-store.ts';
import { UNSHARDED } from '../../src/system/layout.ts';
import { DEFAULT_TELEMETRY_LIMITS, type TelemetryLimits } from '../../src/telemetry/limits.ts';
import { registerTelemetryMetrics, telemetryCounters, telemetryMetricsCollector } from '../../src/telemetry/metrics.ts';
import { type ClaimedRecord, TelemetryQueue } from '../../src/telemetry/queue.ts';
import { recordShard, share } from '../../src/telemetry/shards.ts';
import { assertCountersMatchItems, auditItems, hooked, queueContents, setEpoch, setRestoreHold } from '../helpers/telemetry-harness.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, walkEveryState } from '../helpers/walk.ts';

export interface TelemetryHarness {
  name: string;
  /** A fresh, empty installation: its own table or database file, and a content store. */
  open(): Promise<{ items: ItemStore; content: ContentStore }>;
  /** fast-check runs for the property test (fewer for slow engines). */
  runs: number;
  /** Whether to walk every lifecycle state (slow engines may skip the long walk's second half). */
  fullWalk: boolean;
  /** The installation's telemetry_shards (default 1: the unsharded outbox). */
  shards?: number;
}

/** Sharded: what the shards admit of 4 audit events per artifact, each shard up to its share. */
async function admittedPerShard(queue: TelemetryQueue, ids: string[], eventsEach: number): Promise<number> {
  const { limits, shards } = await queue.openLayout();
  const events = new Map<number, number>();
  for (const id of ids) events.set(recordShard(`${id}:1`, shards), (events.get(recordShard(`${id}:1`, shards)) ?? 0) + eventsEach);
  return [...events].reduce((n, [s, e]) => n + Math.min(share(limits.maxRecords, s, shards), e), 0);
}

interface Installation {
  ctx: ServiceContext & { clock: ManualClock };
  queue: TelemetryQueue;
  items: ItemStore;
  hook: ReturnType<typeof hooked>;
}

const T0 = '2026-03-01T12:00:00.000Z';
const OWNER = 'host-exporter';

export function telemetrySuite(h: TelemetryHarness): void {
  // With shards, capacity is per shard (shards.ts) and claim order is oldest first per shard, the
  // shards taken round-robin: the few assertions that depend on one pool or one order say so.
  const sharded = (h.shards ?? 1) > 1;
  async function install(limits?: Partial<TelemetryLimits>): Promise<Installation> {
    const { items: raw, content } = await h.open();
    const hook = hooked(raw);
    const clock = new ManualClock(T0);
    const layout = { ...UNSHARDED, telemetry_shards: h.shards ?? 1 };
    const ctx = createContext({ items: hook.store, content, clock, layout }) as ServiceContext & { clock: ManualClock };
    const queue = await attachAuditSinks(ctx, limits ? { limits } : {});
    await queue.open();
    return { ctx, queue, items: hook.store, hook };
  }

  /** One audit event: a new artifact (its creation transition). */
  async function auditEvent(inst: Installation, name = 'a'): Promise<string> {
    const { version } = await createArtifact(inst.ctx, agent, { name, filename: 'f.sh', body: bytesOf(`echo ${name}\n`) });
    return version.artifact_id;
  }

  /** Custom records r1..rn, one millisecond apart. */
  async function custom(inst: Installation, n: number, prefix = 'r'): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 1; i <= n; i++) {
      const id = `${prefix}${i}`;
      assert.equal((await inst.queue.enqueue(id, { n: i }, inst.ctx.clock.now())).status, 'accepted');
      inst.ctx.clock.advance(1);
      ids.push(id);
    }
    return ids;
  }

  const code = (c: string) => (e: unknown) => e instanceof AlpError && e.code === c;
  const reason = (r: string) => (e: unknown) => e instanceof Conflict && e.details?.reason === r;

  describe(`telemetry outbox: ${h.name}`, () => {
    it('The storage worker initializes a durable telemetry outbox: default persisted limits are 1,000 records, 8 MiB and 5 delivery attempts', async () => {
      const { items, content } = await h.open();
      const queue = new TelemetryQueue(items);
      assert.deepEqual(await queue.open(), { maxRecords: 1000, maxBytes: 8 * 1024 * 1024, maxAttempts: 5 });
      assert.deepEqual(DEFAULT_TELEMETRY_LIMITS, { maxRecords: 1000, maxBytes: 8388608, maxAttempts: 5 });
      const status = await new TelemetryQueue(items).status();
      assert.deepEqual(
        { ...status, initialised_at: undefined },
        {
          limits: { maxRecords: 1000, maxBytes: 8388608, maxAttempts: 5 },
          initialised_at: undefined,
          accepted: 0,
          delivered: 0,
          dropped: 0,
          exhausted: 0,
          live_records: 0,
          live_bytes: 0,
        },
      );
      const state = await items.get({ PK: TELQ_PK, SK: 'STATE' }, { consistent: true });
      assert.equal(state?.max_records, 1000);
      assert.equal(state?.max_bytes, 8388608);
      assert.equal(state?.max_attempts, 5);
      // An audit write of a process that never opened the queue initialises it too (first open).
      const other = await h.open();
      const ctx = createContext({ items: other.items, content: other.content, clock: new ManualClock(T0) });
      await attachAuditSinks(ctx);
      assert.equal(await other.items.get({ PK: TELQ_PK, SK: 'STATE' }), undefined, 'attaching does no I/O');
      await createArtifact(ctx, agent, { name: 'x', filename: 'f', body: bytesOf('x') });
      assert.equal((await telemetryCounters(other.items))?.accepted, 1);
      void content;
    });

    it('Trusted hosts may choose different limits when first initializing TelemetryQueue; conflicting reopen configuration rejects instead of silently expanding resource authority', async () => {
      const { items } = await h.open();
      assert.deepEqual(await new TelemetryQueue(items, { maxRecords: 10, maxAttempts: 2 }).open(), {
        maxRecords: 10,
        maxBytes: 8388608,
        maxAttempts: 2,
      });
      for (const asked of [
        { maxRecords: 20 },
        { maxRecords: 5, maxAttempts: 2 },
        { maxRecords: 10, maxAttempts: 2, maxBytes: 1 << 24 },
        {},
      ]) {
        await assert.rejects(new TelemetryQueue(items, asked).open(), (e: unknown) => {
          assert.ok(e instanceof Conflict, String(e));
          assert.match(e.message, /initialised with different limits/);
          assert.match(e.message, /never changes them/);
          return true;
        });
      }
      assert.deepEqual(
        (await new TelemetryQueue(items).status()).limits,
        { maxRecords: 10, maxBytes: 8388608, maxAttempts: 2 },
        'unchanged',
      );
      assert.deepEqual(await new TelemetryQueue(items, { maxRecords: 10, maxAttempts: 2 }).open(), {
        maxRecords: 10,
        maxBytes: 8388608,
        maxAttempts: 2,
      });
      assert.throws(() => new TelemetryQueue(items, { maxRecords: 0 }), InvalidInput);
      assert.throws(() => new TelemetryQueue(items, { maxAttempts: 1.5 }), InvalidInput);

      // Two hosts initialising at once with different limits: one wins, the other is refused.
      const fresh = await h.open();
      const results = await Promise.allSettled([
        new TelemetryQueue(fresh.items, { maxRecords: 7 }).open(),
        new TelemetryQueue(fresh.items, { maxRecords: 8 }).open(),
      ]);
      assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1, JSON.stringify(results));
      assert.ok(results.some((r) => r.status === 'rejected' && r.reason instanceof Conflict));

      // A process stating conflicting limits cannot write through the outbox: its audit write is refused
      // before anything is written.
      const inst = await install({ maxRecords: 3 });
      const conflicting = createContext({ items: inst.items, content: inst.ctx.content, clock: inst.ctx.clock });
      await attachAuditSinks(conflicting, { limits: { maxRecords: 3000 } });
      await assert.rejects(createArtifact(conflicting, agent, { name: 'c', filename: 'f', body: bytesOf('c') }), Conflict);
      assert.equal((await auditItems(inst.items)).size, 0);
      assert.equal((await inst.queue.status()).limits.maxRecords, 3);
    });

    describe('audit inserts', () => {
      it('An audit insert transaction also attempts to enqueue only event identity, type, aggregate identity and timestamp — for every audit type, in the same transaction', async () => {
        const inst = await install();
        if (h.fullWalk) await walkEveryState(inst.ctx);
        else {
          const id = await auditEvent(inst);
          await propose(inst.ctx, agent, id, 1);
          await withdraw(inst.ctx, agent, id, 1);
        }
        const audit = await auditItems(inst.items);
        const { records } = await assertCountersMatchItems(inst.items);
        assert.equal(records.length, audit.size, 'one record per audit item');
        const types = new Set<string>();
        for (const r of records) {
          const item = audit.get(r.id as string);
          assert.ok(item, `record ${String(r.id)} names an audit item`);
          assert.deepEqual(Object.keys(r.payload as object).sort(), ['aggregate_id', 'event_id', 'timestamp', 'type']);
          assert.deepEqual(r.payload, { event_id: r.id, type: item.type, aggregate_id: item.artifact_id, timestamp: item.timestamp });
          assert.equal(r.kind, 'audit');
          types.add(item.type as string);
        }
        if (h.fullWalk)
          assert.deepEqual([...types].sort(), [
            'approval',
            'compensation',
            'execution',
            'execution_finish',
            'execution_output',
            'provenance',
            'transition',
          ]);
        // Each record was written by the transaction that wrote its audit item, and by no other write.
        let auditTransactions = 0;
        for (const c of inst.hook.calls) {
          if (c.method !== 'transactWrite') {
            const key = c.arg as { PK?: string; SK?: string } | undefined;
            if (key?.PK === TELQ_PK) assert.equal(key.SK, 'STATE', `${c.method} outside a transaction touched only the queue state`);
            continue;
          }
          const ops = c.arg as TransactOp[];
          const puts = ops.flatMap((o) => (o.op === 'put' ? [o.item] : []));
          const audited = puts.filter((i) => isAuditType(i.type)).map((i) => `${String(i.artifact_id)}:${String(i.seq)}`);
          const recorded = puts.filter((i) => i.type === 'telemetry_record').map((i) => i.id);
          assert.deepEqual(recorded.sort(), audited.sort(), 'the records of a transaction are its audit items');
          if (audited.length > 0) auditTransactions++;
        }
        assert.ok(auditTransactions >= (h.fullWalk ? 30 : 3), `${auditTransactions} audit transactions`);
      });

      it('Authoritative event payloads and artifact bytes are excluded (and host identifiers: no actor, principal, digest or content)', async () => {
        const inst = await install();
        const { version } = await createArtifact(
          inst.ctx,
          { id: 'host-7f3a', kind: 'agent' },
          {
            name: 'secret-name',
            filename: 'secret.sh',
            body: bytesOf('TOP-SECRET-BYTES\n'),
          },
        );
        await propose(inst.ctx, { id: 'host-7f3a', kind: 'agent' }, version.artifact_id, 1, 'reason-text');
        const { records } = await queueContents(inst.items);
        const text = JSON.stringify(records.map((r) => r.payload));
        for (const secret of ['TOP-SECRET-BYTES', 'secret-name', 'secret.sh', 'host-7f3a', 'reason-text', 'sha256:', 'PROPOSED', 'DRAFT'])
          assert.ok(!text.includes(secret), `${secret} is not in the telemetry payloads`);
      });

      it('Queue overflow increments a persisted drop counter and allows the authoritative audit transaction to commit', async () => {
        const inst = await install({ maxRecords: 2 });
        const id = await auditEvent(inst);
        await propose(inst.ctx, agent, id, 1);
        await withdraw(inst.ctx, agent, id, 1); // the queue is full: dropped, committed
        await propose(inst.ctx, agent, id, 1);
        const s = await inst.queue.status();
        // Sharded: 2 records over 2 effective shards, the artifact's shard holds 1.
        const room = sharded ? 1 : 2;
        assert.deepEqual([s.accepted, s.dropped, s.live_records], [room, 4 - room, room]);
        const audit = await auditItems(inst.items);
        assert.equal(audit.size, 4, 'every audit write committed');
        assert.equal((await verifyArtifactAudit(inst.ctx, id)).ok, true);
        const recorded = new Set((await queueContents(inst.items)).records.map((r) => r.id));
        const missing = [...audit.keys()].filter((k) => !recorded.has(k));
        assert.equal(missing.length, s.dropped, 'every audit item without a record was counted as dropped');
        await assertCountersMatchItems(inst.items);
        // A reopened queue reads the same persisted counter.
        assert.equal((await new TelemetryQueue(inst.items).status()).dropped, 4 - room);
      });

      it('Queue overflow by bytes: the byte limit bounds logical payload capacity (the canonical payload bytes), and the overflowing write still commits', async () => {
        const inst = await install({ maxBytes: 1024 });
        const id = await auditEvent(inst);
        let dropped = 0;
        for (let i = 0; dropped === 0 && i < 20; i++) {
          await (i % 2 === 0 ? propose(inst.ctx, agent, id, 1) : withdraw(inst.ctx, agent, id, 1));
          dropped = (await inst.queue.status()).dropped;
        }
        const s = await inst.queue.status();
        assert.equal(s.dropped, 1);
        const per = s.live_bytes / s.live_records;
        assert.ok(s.live_bytes <= 1024 && s.live_bytes + per > 1024, JSON.stringify(s));
        assert.equal((await auditItems(inst.items)).size, s.accepted + s.dropped);
        await assertCountersMatchItems(inst.items);
      });

      it('no audit write is ever lost to the queue: concurrent writers at the capacity edge all commit, each event counted once as accepted or dropped', async () => {
        const inst = await install({ maxRecords: 5 });
        const ids: string[] = [];
        for (let i = 0; i < 4; i++) ids.push(await auditEvent(inst, `w${i}`));
        await Promise.all(
          ids.map(async (id) => {
            for (let k = 0; k < 3; k++) await (k % 2 === 0 ? propose(inst.ctx, agent, id, 1) : withdraw(inst.ctx, agent, id, 1));
          }),
        );
        const s = await inst.queue.status();
        const audit = await auditItems(inst.items);
        assert.equal(audit.size, 16);
        assert.equal(s.accepted + s.dropped, audit.size);
        assert.equal(s.accepted, sharded ? await admittedPerShard(inst.queue, ids, 4) : 5);
        for (const id of ids) assert.equal((await verifyArtifactAudit(inst.ctx, id)).ok, true);
        await assertCountersMatchItems(inst.items);
      });

      it('an audit transaction too large for one record item per event carries its events in batch items: none is dropped while the queue has room, and claim hands each out under its own id', async () => {
        const inst = await install();
        const id = await auditEvent(inst);
        for (let v = 2; v <= 40; v++) await addVersion(inst.ctx, agent, id, { filename: 'f.sh', body: bytesOf(`v${v}`) });
        const before = await inst.queue.status();
        // 40 events (39 supersedes and the proposal): more than one record item per event fits beside
        // the proposal's own operations, so the records travel in batch items (sink.ts); the batch
        // path itself is shown with a direct 60-entry commit in shards.test.ts.
        await propose(inst.ctx, agent, id, 40);
        const after = await inst.queue.status();
        assert.equal(after.dropped, before.dropped, 'nothing dropped');
        assert.equal(after.accepted - before.accepted, 40);
        await assertCountersMatchItems(inst.items);
        assert.equal((await verifyArtifactAudit(inst.ctx, id)).ok, true);
        const claimed = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxRecords: 1000 });
        const audit = await auditItems(inst.items);
        assert.deepEqual(new Set(claimed.map((r) => r.id)), new Set(audit.keys()), 'every audit event claimable under its own id');
        await assertCountersMatchItems(inst.items);
        const acks = await inst.queue.acknowledgeAll(
          1,
          OWNER,
          claimed.map((r) => ({ id: r.id, leaseToken: r.leaseToken })),
          inst.ctx.clock.now(),
        );
        assert.ok(acks.every((r) => r.acknowledged));
        const done = await assertCountersMatchItems(inst.items);
        assert.equal(done.records.length + done.batches.length, 0);
        assert.equal((await inst.queue.status()).delivered, audit.size);
      });
    });

    it('Queue counters expose accepted, delivered, dropped, exhausted, live records and bytes (persisted, and on /metrics)', async () => {
      const inst = await install({ maxRecords: 3, maxAttempts: 1 });
      await custom(inst, 3);
      assert.equal((await inst.queue.enqueue('r4', { n: 4 }, inst.ctx.clock.now())).status, 'dropped');
      const [a, b] = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxRecords: 2, leaseMs: 1000 });
      await inst.queue.acknowledge(1, OWNER, (a as ClaimedRecord).id, (a as ClaimedRecord).leaseToken, inst.ctx.clock.now());
      inst.ctx.clock.advance(2000);
      await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxRecords: 2 }); // r3 leased, b exhausted
      const c = await inst.queue.counters();
      assert.deepEqual(c, { accepted: 3, delivered: 1, dropped: 1, exhausted: 1, live_records: 1, live_bytes: c.live_bytes });
      assert.equal(c.live_bytes, Buffer.byteLength('{"n":3}'));
      assert.ok(b);
      await assertCountersMatchItems(inst.items);

      const registry = new Registry();
      registerTelemetryMetrics(registry, inst.items);
      const text = await registry.metrics();
      for (const line of [
        'alp_telemetry_accepted_total 3',
        'alp_telemetry_delivered_total 1',
        'alp_telemetry_dropped_total 1',
        'alp_telemetry_exhausted_total 1',
        'alp_telemetry_live_records 1',
        `alp_telemetry_live_bytes ${c.live_bytes}`,
        'alp_telemetry_max_records 3',
        'alp_telemetry_max_attempts 1',
      ])
        assert.ok(text.split('\n').includes(line), `${line} in\n${text}`);
      assert.match(text, /# TYPE alp_telemetry_accepted_total counter/);
      assert.match(text, /# TYPE alp_telemetry_live_records gauge/);
      const reads = inst.hook.calls.length;
      await registry.metrics();
      assert.equal(
        inst.hook.calls.length - reads,
        sharded ? 2 : 1,
        'one read per scrape (sharded: the root, then the shards in one batchGet)',
      );
      const viaServerHook = new Registry();
      telemetryMetricsCollector(viaServerHook, inst.ctx);
      assert.match(await viaServerHook.metrics(), /^alp_telemetry_dropped_total 1$/m);
    });

    it('claim(epoch, owner, now, {maxRecords, maxBytes, leaseMs}) returns the oldest available records with a random lease token each; acknowledge delivers them (the seed’s example)', async () => {
      const inst = await install();
      const ids = await custom(inst, 5);
      const batch = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxRecords: 3, maxBytes: 1024 * 1024, leaseMs: 30_000 });
      const firstIds = sharded ? batch.map((r) => r.id) : ids.slice(0, 3);
      assert.deepEqual(
        batch.map((r) => r.id),
        firstIds,
      );
      assert.equal(new Set(firstIds).size, 3);
      assert.deepEqual(
        batch.map((r) => r.payload),
        firstIds.map((id) => ({ n: ids.indexOf(id) + 1 })),
      );
      assert.equal(new Set(batch.map((r) => r.leaseToken)).size, 3, 'a token per record');
      for (const r of batch) {
        assert.match(r.leaseToken, /^[A-Za-z0-9_-]{43}$/, '32 random bytes');
        assert.equal(r.attempts, 1);
        assert.equal(r.leaseExpiresAt, new Date(inst.ctx.clock.now().getTime() + 30_000).toISOString());
      }
      const sent: string[] = [];
      for (const record of batch) {
        sent.push(record.id);
        await inst.queue.acknowledge(1, OWNER, record.id, record.leaseToken, inst.ctx.clock.now().toISOString());
      }
      const next = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxRecords: 10 });
      assert.deepEqual(
        sharded ? next.map((r) => r.id).sort() : next.map((r) => r.id),
        ids.filter((id) => !firstIds.includes(id)),
        'leased records are not available; delivered ones are gone',
      );
      const s = await inst.queue.counters();
      assert.deepEqual([s.delivered, s.live_records], [3, 2]);
      assert.deepEqual(await inst.queue.claim(1, OWNER, inst.ctx.clock.now()), [], 'nothing available: an empty batch');
      await assertCountersMatchItems(inst.items);
    });

    it('claim reads only the queue partition of the base table, strongly consistent (never GSI1, never a scan)', async () => {
      const inst = await install();
      await custom(inst, 3);
      inst.hook.calls.length = 0;
      const batch = await inst.queue.claim(1, OWNER, inst.ctx.clock.now());
      for (const r of batch) await inst.queue.acknowledge(1, OWNER, r.id, r.leaseToken, inst.ctx.clock.now());
      const reads = inst.hook.calls.filter((c) => c.method === 'query' || c.method === 'scan');
      assert.ok(reads.length > 0);
      for (const c of reads) {
        assert.equal(c.method, 'query');
        const q = c.arg as { pk: string; index?: string; consistent?: boolean };
        if (sharded) assert.ok(q.pk.startsWith(`${TELQ_PK}#`), q.pk);
        else assert.equal(q.pk, TELQ_PK);
        assert.equal(q.index, undefined);
        assert.equal(q.consistent, true);
      }
    });

    it('Acknowledgement requires the current epoch, owner and unexpired random lease token (wrong epoch, owner or token, or an expired lease, change nothing)', async () => {
      const inst = await install();
      await setEpoch(inst.items, 3);
      await custom(inst, 1);
      const [r] = await inst.queue.claim(3, OWNER, inst.ctx.clock.now(), { leaseMs: 10_000 });
      assert.ok(r);
      const now = inst.ctx.clock.now();
      const before = await queueContents(inst.items);
      await assert.rejects(inst.queue.acknowledge(2, OWNER, r.id, r.leaseToken, now), StaleEpoch);
      await assert.rejects(inst.queue.acknowledge(4, OWNER, r.id, r.leaseToken, now), StaleEpoch);
      await assert.rejects(inst.queue.acknowledge(3, 'someone-else', r.id, r.leaseToken, now), reason('owner'));
      await assert.rejects(
        inst.queue.acknowledge(3, OWNER, r.id, `${r.leaseToken.slice(0, -1)}${r.leaseToken.endsWith('A') ? 'B' : 'A'}`, now),
        reason('token'),
      );
      await assert.rejects(inst.queue.acknowledge(3, OWNER, r.id, 'x', now), reason('token'));
      await assert.rejects(inst.queue.acknowledge(3, OWNER, r.id, r.leaseToken, new Date(now.getTime() + 10_000)), reason('expired'));
      await assert.rejects(inst.queue.acknowledge(3, OWNER, 'nope', r.leaseToken, now), reason('not_queued'));
      assert.deepEqual(await queueContents(inst.items), before, 'refused acknowledgements change nothing');
      // Within the lease, with all three right:
      await inst.queue.acknowledge(3, OWNER, r.id, r.leaseToken, new Date(now.getTime() + 9_999));
      assert.equal((await inst.queue.counters()).delivered, 1);
      await assert.rejects(inst.queue.acknowledge(3, OWNER, r.id, r.leaseToken, now), reason('not_queued'), 'a second ack finds nothing');
      await assertCountersMatchItems(inst.items);
    });

    it('the epoch and lease conditions hold inside the acknowledge transaction, not only in its pre-checks', async () => {
      const inst = await install();
      await custom(inst, 1);
      const now = inst.ctx.clock.now();
      const [r] = await inst.queue.claim(1, OWNER, now, { leaseMs: 1000 });
      assert.ok(r);
      inst.hook.beforeNextTransact(() => setEpoch(inst.items, 2));
      await assert.rejects(inst.queue.acknowledge(1, OWNER, r.id, r.leaseToken, now), StaleEpoch);
      assert.equal((await inst.queue.counters()).delivered, 0);
      const [again] = await inst.queue.claim(2, OWNER, now, { leaseMs: 1000 });
      assert.ok(again);
      // The lease expires and another exporter takes the record between the pre-checks and the transaction.
      inst.hook.beforeNextTransact(async () => {
        assert.equal((await inst.queue.claim(2, 'thief', new Date(now.getTime() + 1000))).length, 1);
      });
      await assert.rejects(inst.queue.acknowledge(2, OWNER, again.id, again.leaseToken, now), reason('lost'));
      const { records } = await assertCountersMatchItems(inst.items);
      assert.deepEqual(
        records.map((x) => [x.lease_owner, x.attempts]),
        [['thief', 3]],
      );
      assert.equal((await inst.queue.counters()).delivered, 0);
    });

    it('Expired leases retry with attempts counted; exhausted records release capacity and increment exhausted', async () => {
      const inst = await install({ maxRecords: 1, maxAttempts: 3 });
      await custom(inst, 1);
      assert.equal((await inst.queue.enqueue('blocked', {}, inst.ctx.clock.now())).status, 'dropped', 'full');
      for (let attempt = 1; attempt <= 3; attempt++) {
        const batch = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { leaseMs: 5000 });
        assert.deepEqual(
          batch.map((r) => [r.id, r.attempts]),
          [['r1', attempt]],
        );
        assert.deepEqual(await inst.queue.claim(1, 'other', inst.ctx.clock.now()), [], 'leased: not available to anyone');
        inst.ctx.clock.advance(4999);
        assert.deepEqual(await inst.queue.claim(1, 'other', inst.ctx.clock.now()), [], 'not before the lease expires');
        inst.ctx.clock.advance(1);
      }
      assert.deepEqual(await inst.queue.claim(1, OWNER, inst.ctx.clock.now()), [], 'the last attempt expired: exhausted');
      const s = await inst.queue.counters();
      assert.deepEqual([s.exhausted, s.live_records, s.live_bytes, s.delivered], [1, 0, 0, 0]);
      assert.equal((await inst.queue.enqueue('after', { ok: true }, inst.ctx.clock.now())).status, 'accepted', 'capacity released');
      await assertCountersMatchItems(inst.items);
    });

    it('acknowledgeAll applies the same rules per record: refused records are reported, the others acknowledged', async () => {
      const inst = await install();
      await custom(inst, 60);
      const now = inst.ctx.clock.now();
      const batch = await inst.queue.claim(1, OWNER, now, { maxRecords: 60, leaseMs: 1000 });
      assert.equal(batch.length, 60);
      const [first, second, third] = batch as [ClaimedRecord, ClaimedRecord, ClaimedRecord];
      const acks = [
        ...batch.slice(3).map((r) => ({ id: r.id, leaseToken: r.leaseToken })),
        { id: first.id, leaseToken: second.leaseToken },
        { id: second.id, leaseToken: second.leaseToken },
        { id: second.id, leaseToken: second.leaseToken },
        { id: 'never', leaseToken: 'x' },
      ];
      const results = await inst.queue.acknowledgeAll(1, OWNER, acks, now);
      assert.equal(results.length, acks.length);
      assert.equal(results.filter((r) => r.acknowledged).length, 58, 'spans two transactions');
      assert.deepEqual(
        results.slice(-4).map((r) => (r.acknowledged ? 'ok' : r.reason)),
        ['token', 'ok', 'duplicate', 'not_queued'],
      );
      assert.deepEqual(
        (await inst.queue.acknowledgeAll(1, 'other', [{ id: third.id, leaseToken: third.leaseToken }], now)).map((r) =>
          r.acknowledged ? 'ok' : r.reason,
        ),
        ['owner'],
      );
      await assert.rejects(inst.queue.acknowledgeAll(2, OWNER, [{ id: third.id, leaseToken: third.leaseToken }], now), StaleEpoch);
      const s = await inst.queue.counters();
      assert.deepEqual([s.delivered, s.live_records], [58, 2]);
      await assertCountersMatchItems(inst.items);
    });

    it('Stable record IDs support receiver deduplication: delivery is at least once within the retry window (a redelivery carries the same id and payload)', async () => {
      const inst = await install();
      await auditEvent(inst);
      const [first] = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { leaseMs: 1000 });
      inst.ctx.clock.advance(1000); // the exporter sent it but crashed before acknowledging
      const [second] = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { leaseMs: 1000 });
      assert.ok(first && second);
      assert.equal(second.id, first.id);
      assert.deepEqual(second.payload, first.payload);
      assert.equal(second.attempts, 2);
      assert.notEqual(second.leaseToken, first.leaseToken);
      await assert.rejects(inst.queue.acknowledge(1, OWNER, first.id, first.leaseToken, inst.ctx.clock.now()), reason('token'));
      await inst.queue.acknowledge(1, OWNER, second.id, second.leaseToken, inst.ctx.clock.now());
    });

    it('requeue by lease expiry, not by creation time: an expired lease is available from its expiry on, behind records available earlier', async () => {
      const inst = await install();
      await custom(inst, 1, 'old'); // t0
      inst.ctx.clock.set(Date.parse(T0) + 1000);
      await custom(inst, 1, 'mid'); // t0+1s
      inst.ctx.clock.set(Date.parse(T0) + 2000);
      const [old] = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxRecords: 1, leaseMs: 8000 }); // expires t0+10s
      assert.equal(old?.id, 'old1');
      inst.ctx.clock.set(Date.parse(T0) + 20_000);
      await custom(inst, 1, 'new'); // t0+20s
      inst.ctx.clock.set(Date.parse(T0) + 30_000);
      const batch = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxRecords: 10 });
      assert.deepEqual(
        batch.map((r) => r.id),
        ['mid1', 'old1', 'new1'],
      );
    });

    it('A new epoch can reclaim old leases (and the old lease can no longer be acknowledged)', async () => {
      const inst = await install();
      await custom(inst, 2);
      const batch = await inst.queue.claim(1, 'old-worker', inst.ctx.clock.now(), { leaseMs: 3_600_000 });
      assert.equal(batch.length, 2);
      await setEpoch(inst.items, 2);
      await assert.rejects(inst.queue.claim(1, 'old-worker', inst.ctx.clock.now()), StaleEpoch);
      const taken = await inst.queue.claim(2, 'new-worker', inst.ctx.clock.now(), { leaseMs: 1000 });
      assert.deepEqual(
        sharded ? taken.map((r) => [r.id, r.attempts]).sort() : taken.map((r) => [r.id, r.attempts]),
        [
          ['r1', 2],
          ['r2', 2],
        ],
        'unexpired leases of epoch 1 are taken in epoch 2',
      );
      const [r1] = batch as [ClaimedRecord];
      await assert.rejects(inst.queue.acknowledge(1, 'old-worker', r1.id, r1.leaseToken, inst.ctx.clock.now()), StaleEpoch);
      await assert.rejects(inst.queue.acknowledge(2, 'old-worker', r1.id, r1.leaseToken, inst.ctx.clock.now()), reason('owner'));
      for (const r of taken) await inst.queue.acknowledge(2, 'new-worker', r.id, r.leaseToken, inst.ctx.clock.now());
      assert.equal((await inst.queue.counters()).delivered, 2);
      await assertCountersMatchItems(inst.items);
    });

    it('Restore holds prevent claiming or acknowledging delivery (checked before and inside each transaction)', async () => {
      const inst = await install();
      await custom(inst, 2);
      const [r] = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxRecords: 1 });
      assert.ok(r);
      await setRestoreHold(inst.items, true);
      const before = await queueContents(inst.items);
      await assert.rejects(inst.queue.claim(1, OWNER, inst.ctx.clock.now()), RestoreHeld);
      await assert.rejects(inst.queue.acknowledge(1, OWNER, r.id, r.leaseToken, inst.ctx.clock.now()), RestoreHeld);
      assert.deepEqual(await queueContents(inst.items), before, 'nothing changed');
      await setRestoreHold(inst.items, false);
      // A hold set between the pre-checks and the transaction still blocks.
      inst.hook.beforeNextTransact(() => setRestoreHold(inst.items, true));
      await assert.rejects(inst.queue.claim(1, OWNER, inst.ctx.clock.now()), RestoreHeld);
      await setRestoreHold(inst.items, false);
      inst.hook.beforeNextTransact(() => setRestoreHold(inst.items, true));
      await assert.rejects(inst.queue.acknowledge(1, OWNER, r.id, r.leaseToken, inst.ctx.clock.now()), RestoreHeld);
      assert.deepEqual(await queueContents(inst.items), before, 'nothing changed');
      await setRestoreHold(inst.items, false);
      await inst.queue.acknowledge(1, OWNER, r.id, r.leaseToken, inst.ctx.clock.now());
      assert.equal((await inst.queue.claim(1, OWNER, inst.ctx.clock.now())).length, 1);
      // Audit writes (and their enqueue) are not the queue's to block.
      await setRestoreHold(inst.items, true);
      await auditEvent(inst);
      assert.equal((await inst.queue.counters()).accepted, 3);
    });

    it('Custom enqueue is available to trusted hosts for sanitized JSON: anything JSON cannot represent exactly is refused, nothing is stripped', async () => {
      const inst = await install();
      const payload = { z: [1, 'two', { three: null }], a: true, n: -1.5, s: 'héllo ✓ 𝄞' };
      assert.deepEqual(await inst.queue.enqueue('host.event-1', payload, inst.ctx.clock.now()), {
        id: 'host.event-1',
        status: 'accepted',
        bytes: Buffer.byteLength('{"a":true,"n":-1.5,"s":"héllo ✓ 𝄞","z":[1,"two",{"three":null}]}'),
      });
      const [r] = await inst.queue.claim(1, OWNER, inst.ctx.clock.now());
      assert.deepEqual(r?.payload, payload);
      class Point {
        x = 1;
      }
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      let deep: unknown = 1;
      for (let i = 0; i < 17; i++) deep = [deep];
      const sparse: unknown[] = [];
      sparse[0] = 1;
      sparse[2] = 3;
      const accessor = Object.defineProperty({}, 'x', { get: () => 1, enumerable: true });
      const refused: Array<[string, unknown]> = [
        ['undefined', undefined],
        ['undefined member', { a: undefined }],
        ['NaN', { a: Number.NaN }],
        ['Infinity', [Number.POSITIVE_INFINITY]],
        ['function', { f: () => 1 }],
        ['symbol', Symbol('s')],
        ['bigint', 10n],
        ['Date', { d: new Date(0) }],
        ['Map', new Map()],
        ['class instance', new Point()],
        ['Buffer', Buffer.from('x')],
        ['cycle', cyclic],
        ['too deep', deep],
        ['__proto__ key', JSON.parse('{"__proto__":{"polluted":true}}')],
        ['constructor key', { constructor: 1 }],
        ['lone surrogate', { s: '\ud800' }],
        ['sparse array', sparse],
        ['accessor', accessor],
        ['too large', { s: 'x'.repeat(70 * 1024) }],
      ];
      for (const [what, value] of refused) {
        await assert.rejects(inst.queue.enqueue(`bad-${what.replace(/\W/g, '')}`, value, inst.ctx.clock.now()), InvalidInput, what);
      }
      for (const id of ['', 'has space', 'a#b', '-leading', 'x'.repeat(201), '01KJMMA2G0E5VTGSVWE12NS85W:3'])
        await assert.rejects(inst.queue.enqueue(id, {}, inst.ctx.clock.now()), InvalidInput, `id ${id}`);
      const s = await inst.queue.counters();
      assert.deepEqual([s.accepted, s.dropped, s.live_records], [1, 0, 1], 'refusals enqueue and drop nothing');
    });

    it('Duplicate IDs are idempotent while queued; changed payloads reject', async () => {
      const inst = await install();
      await inst.queue.enqueue('dup', { a: 1, b: [2] }, inst.ctx.clock.now());
      inst.ctx.clock.advance(5);
      const again = await inst.queue.enqueue('dup', { b: [2], a: 1 }, inst.ctx.clock.now());
      assert.equal(again.status, 'duplicate', 'the same JSON in another key order is the same payload');
      await assert.rejects(inst.queue.enqueue('dup', { a: 2, b: [2] }, inst.ctx.clock.now()), (e: unknown) => {
        assert.ok(e instanceof Conflict);
        assert.match(e.message, /already queued with a different payload/);
        return true;
      });
      const [r] = await inst.queue.claim(1, OWNER, inst.ctx.clock.now());
      assert.equal((await inst.queue.enqueue('dup', { a: 1, b: [2] }, inst.ctx.clock.now())).status, 'duplicate', 'also while leased');
      await assert.rejects(inst.queue.enqueue('dup', { a: 3 }, inst.ctx.clock.now()), Conflict);
      const s = await inst.queue.counters();
      assert.deepEqual([s.accepted, s.live_records], [1, 1]);
      assert.ok(r);
      // Racing duplicates: exactly one is accepted.
      const racing = await Promise.all([1, 2, 3].map(() => inst.queue.enqueue('race', { x: 1 }, inst.ctx.clock.now())));
      assert.deepEqual(racing.map((x) => x.status).sort(), ['accepted', 'duplicate', 'duplicate']);
      await assertCountersMatchItems(inst.items);
    });

    it('Delivered IDs have no permanent tombstones, so receivers must own long-term deduplication', async () => {
      const inst = await install();
      await inst.queue.enqueue('once', { v: 1 }, inst.ctx.clock.now());
      const [r] = await inst.queue.claim(1, OWNER, inst.ctx.clock.now());
      assert.ok(r);
      await inst.queue.acknowledge(1, OWNER, r.id, r.leaseToken, inst.ctx.clock.now());
      const { ids, records } = await queueContents(inst.items);
      assert.deepEqual([...ids, ...records], [], 'nothing of the delivered record remains');
      assert.equal((await inst.queue.enqueue('once', { v: 2 }, inst.ctx.clock.now())).status, 'accepted', 'the id is free again');
      const [again] = await inst.queue.claim(1, OWNER, inst.ctx.clock.now());
      assert.deepEqual([again?.id, again?.payload, again?.attempts], ['once', { v: 2 }, 1]);
    });

    it('A batch byte cap smaller than its oldest record rejects explicitly (not an empty batch) and leases nothing', async () => {
      const inst = await install();
      await inst.queue.enqueue('big', { s: 'x'.repeat(100) }, inst.ctx.clock.now());
      inst.ctx.clock.advance(1);
      await inst.queue.enqueue('small', { s: 'x' }, inst.ctx.clock.now());
      const big = Buffer.byteLength(JSON.stringify({ s: 'x'.repeat(100) }));
      await assert.rejects(inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxBytes: big - 1 }), (e: unknown) => {
        assert.ok(e instanceof InvalidInput);
        assert.match(e.message, /smaller than the oldest available record \(big, \d+ bytes\)/);
        return true;
      });
      const { records } = await queueContents(inst.items);
      assert.ok(
        records.every((r) => r.lease_token === undefined),
        'nothing leased',
      );
      const fits = await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxBytes: big });
      assert.deepEqual(
        fits.map((r) => r.id),
        ['big'],
        'the cap stops the batch before the next record; order is kept',
      );
      assert.deepEqual(
        (await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { maxBytes: big + 100 })).map((r) => r.id),
        ['small'],
      );
    });

    it('concurrent claimers never lease the same record', async () => {
      const inst = await install();
      await custom(inst, 24);
      const batches = await Promise.all(['a', 'b', 'c', 'd'].map((o) => inst.queue.claim(1, o, inst.ctx.clock.now(), { maxRecords: 8 })));
      const all = batches.flat().map((r) => r.id);
      assert.equal(new Set(all).size, all.length, 'no record in two batches');
      assert.ok(all.length >= 8);
      const { records } = await assertCountersMatchItems(inst.items);
      assert.equal(records.filter((r) => r.lease_token !== undefined).length, all.length, 'each handed-out record is leased exactly once');
    });

    it('Telemetry loss never authorizes deleting the authoritative audit history: drops and exhaustion leave every audit item in place', async () => {
      const inst = await install({ maxRecords: 2, maxAttempts: 1 });
      const id = await auditEvent(inst);
      for (let i = 0; i < 4; i++) await (i % 2 === 0 ? propose(inst.ctx, agent, id, 1) : withdraw(inst.ctx, agent, id, 1));
      await inst.queue.claim(1, OWNER, inst.ctx.clock.now(), { leaseMs: 1 });
      inst.ctx.clock.advance(10);
      await inst.queue.claim(1, OWNER, inst.ctx.clock.now());
      const s = await inst.queue.counters();
      assert.ok(s.dropped > 0 && s.exhausted > 0, JSON.stringify(s));
      const report = await verifyArtifactAudit(inst.ctx, id);
      assert.deepEqual([report.ok, report.entries], [true, 5]);
    });

    it('random operations keep the persisted counters equal to what the items show', async () => {
      const op = fc.oneof(
        fc.record({ kind: fc.constant('audit' as const), artifact: fc.nat(2) }),
        fc.record({ kind: fc.constant('custom' as const), id: fc.nat(6), v: fc.nat(2) }),
        fc.record({ kind: fc.constant('claim' as const), max: fc.integer({ min: 1, max: 4 }), lease: fc.integer({ min: 1, max: 3000 }) }),
        fc.record({ kind: fc.constant('ack' as const), pick: fc.nat(10), late: fc.boolean() }),
        fc.record({ kind: fc.constant('time' as const), ms: fc.integer({ min: 1, max: 4000 }) }),
        fc.record({ kind: fc.constant('epoch' as const) }),
      );
      await fc.assert(
        fc.asyncProperty(fc.array(op, { minLength: 5, maxLength: 25 }), async (ops) => {
          const inst = await install({ maxRecords: 4, maxBytes: 2048, maxAttempts: 2 });
          const artifacts: string[] = [];
          const leased: ClaimedRecord[] = [];
          let epoch = 1;
          for (const o of ops) {
            if (o.kind === 'audit') {
              const a = artifacts[o.artifact];
              if (a === undefined) artifacts.push(await auditEvent(inst, `p${artifacts.length}`));
              else await propose(inst.ctx, agent, a, 1).catch(() => withdraw(inst.ctx, agent, a, 1));
            } else if (o.kind === 'custom') {
              await inst.queue.enqueue(`c${o.id}`, { v: o.v }, inst.ctx.clock.now()).catch((e: unknown) => {
                if (!(e instanceof Conflict)) throw e;
              });
            } else if (o.kind === 'claim') {
              leased.push(...(await inst.queue.claim(epoch, OWNER, inst.ctx.clock.now(), { maxRecords: o.max, leaseMs: o.lease })));
            } else if (o.kind === 'ack') {
              const r = leased[o.pick % Math.max(1, leased.length)];
              if (r) {
                const at = o.late ? new Date(Date.parse(r.leaseExpiresAt)) : inst.ctx.clock.now();
                await inst.queue.acknowledge(epoch, OWNER, r.id, r.leaseToken, at).catch((e: unknown) => {
                  if (!(e instanceof Conflict)) throw e;
                });
              }
            } else if (o.kind === 'time') inst.ctx.clock.advance(o.ms);
            else {
              epoch++;
              await setEpoch(inst.items, epoch);
            }
            await assertCountersMatchItems(inst.items);
          }
          const s = await inst.queue.counters();
          const audit = await auditItems(inst.items);
          const auditRecords = (await queueContents(inst.items)).records.filter((r) => r.kind === 'audit');
          for (const r of auditRecords) assert.ok(audit.has(r.id as string));
          assert.ok(s.accepted + s.dropped >= audit.size);
        }),
        { numRuns: h.runs },
      );
    });

    it('claim and acknowledge validate their arguments', async () => {
      const inst = await install();
      const now = inst.ctx.clock.now();
      await assert.rejects(inst.queue.claim(0, OWNER, now), InvalidInput);
      await assert.rejects(inst.queue.claim(1, '', now), InvalidInput);
      await assert.rejects(inst.queue.claim(1, 'has space', now), InvalidInput);
      await assert.rejects(inst.queue.claim(1, OWNER, 'yesterday'), InvalidInput);
      await assert.rejects(inst.queue.claim(1, OWNER, now, { maxRecords: 0 }), InvalidInput);
      await assert.rejects(inst.queue.claim(1, OWNER, now, { maxRecords: 1001 }), InvalidInput);
      await assert.rejects(inst.queue.claim(1, OWNER, now, { leaseMs: 0 }), InvalidInput);
      await assert.rejects(inst.queue.claim(1, OWNER, now, { maxBytes: 0 }), InvalidInput);
      await assert.rejects(inst.queue.acknowledge(1, OWNER, 'x', '', now), InvalidInput);
      await assert.rejects(inst.queue.acknowledge(1, OWNER, 'x', 't', 'not a time'), code('INVALID'));
    });
  });
}
