/**
 * Propose at any size (issue 16 item 5): an artifact with hundreds of open versions is proposed in
 * chunks of audited transactions, each within the transaction limit with one telemetry record per
 * entry (nothing dropped); a crash after chunk k leaves only settled SUPERSEDED versions, each with the
 * entry naming the proposal, and a retry continues; racing proposers end with at most one open
 * proposal. On both profiles.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { history } from '../../src/audit/history.ts';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { listVersions } from '../../src/lifecycle/versions.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import { MAX_TRANSACT_OPS } from '../../src/store/item-store.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { watchTransactions } from '../helpers/items.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

after(stopDistributedServers);

const BIG = Number(process.env.ALP_PROPOSE_BIG ?? 0);

const engines: { name: string; open: () => Promise<{ ctx: ServiceContext; close(): Promise<void> }> }[] = [
  {
    name: 'SQLite + directory',
    open: async () => {
      const ctx = await embeddedContext();
      return { ctx, close: async () => ctx.items.close() };
    },
  },
  { name: 'DynamoDB Local + s3rver', open: () => distributedInstallation() },
];

async function openVersions(ctx: ServiceContext, n: number): Promise<string> {
  const { version } = await createArtifact(ctx, agent, { name: 'many', filename: 'f', body: bytesOf('v1') });
  const id = version.artifact_id;
  for (let i = 2; i <= n; i++) await addVersion(ctx, agent, id, { filename: 'f', body: bytesOf(`v${i}`) });
  return id;
}

async function statesOf(ctx: ServiceContext, id: string): Promise<string[]> {
  return (await listVersions(ctx.items, id)).map((v) => v.state);
}

async function assertSettledRecords(ctx: ServiceContext, id: string, target: number): Promise<void> {
  const entries = (await history(ctx, id)).filter((e) => e.type === 'transition' && e.to === 'SUPERSEDED');
  const versions = await listVersions(ctx.items, id);
  const superseded = versions.filter((v) => v.state === 'SUPERSEDED').map((v) => v.version);
  assert.deepEqual(
    entries.map((e) => e.version as number).sort((a, b) => a - b),
    superseded,
    'one entry per superseded version',
  );
  for (const e of entries) {
    assert.equal(e.superseded_by, target, 'the entry names the proposal that superseded it');
    assert.equal(e.reason, `superseded by version ${target}`);
  }
  assert.deepEqual((await verifyArtifactAudit(ctx, id)).findings, []);
}

for (const engine of engines) {
  describe(`propose with many open versions on ${engine.name}`, () => {
    it('100 open versions (past the old limit of 47): chunks within the transaction limit, the proposal last, no telemetry dropped', async () => {
      const inst = await engine.open();
      try {
        const { ctx } = inst;
        const n = BIG > 0 ? BIG : 100;
        // Room for the creations' records and the proposal's (the default queue holds 1,000).
        const queue = await attachAuditSinks(ctx, n > 400 ? { limits: { maxRecords: 4 * n } } : {});
        const id = await openVersions(ctx, n);
        const before = await queue.counters();
        const watch = watchTransactions(ctx);
        const started = Date.now();
        const proposed = await propose(ctx, agent, id);
        const ms = Date.now() - started;
        assert.equal(proposed.version, n);
        assert.equal(proposed.state, 'PROPOSED');
        const states = await statesOf(ctx, id);
        assert.deepEqual(states, [...new Array(n - 1).fill('SUPERSEDED'), 'PROPOSED']);
        assert.ok(watch.sizes.length >= Math.ceil((n - 1) / 32), `${watch.sizes.length} transactions`);
        for (const size of watch.sizes) assert.ok(size <= MAX_TRANSACT_OPS, `transaction of ${size} operations`);
        const after = await queue.counters();
        assert.equal(after.dropped, before.dropped, 'no telemetry record dropped');
        assert.equal(after.accepted - before.accepted, n, 'one telemetry record per transition entry');
        await assertSettledRecords(ctx, id, n);
        console.log(`# propose of ${n} open versions on ${engine.name}: ${watch.sizes.length} transactions, ${ms} ms`);
      } finally {
        await inst.close();
      }
    });

    it('a crash after chunk k leaves settled SUPERSEDED versions with their entries; a retry continues', async () => {
      const inst = await engine.open();
      try {
        const { ctx } = inst;
        await attachAuditSinks(ctx);
        const id = await openVersions(ctx, 80);
        const watch = watchTransactions(ctx);
        watch.crashAfter(1);
        await assert.rejects(propose(ctx, agent, id, 70), /simulated crash/);
        const mid = await statesOf(ctx, id);
        // 31 per chunk since each audit transaction also carries its transparency-log marker (issue 20 item 1).
        assert.equal(mid.filter((s) => s === 'SUPERSEDED').length, 31, 'one whole chunk settled');
        assert.ok(!mid.includes('PROPOSED'), 'nothing proposed yet');
        assert.equal(mid[69], 'DRAFT', 'the target untouched');
        await assertSettledRecords(ctx, id, 70);
        watch.crashAfter(undefined);
        const done = await propose(ctx, agent, id, 70);
        assert.equal(done.state, 'PROPOSED');
        const states = await statesOf(ctx, id);
        assert.deepEqual(states, [...new Array(69).fill('SUPERSEDED'), 'PROPOSED', ...new Array(10).fill('DRAFT')]);
        await assertSettledRecords(ctx, id, 70);
      } finally {
        await inst.close();
      }
    });

    it('two concurrent proposers of different versions end with at most one open proposal', async () => {
      const inst = await engine.open();
      try {
        const { ctx } = inst;
        const id = await openVersions(ctx, 70);
        const results = await Promise.allSettled([propose(ctx, agent, id, 40), propose(ctx, agent, id, 68)]);
        const states = await statesOf(ctx, id);
        const open = states.flatMap((s, i) => (s === 'PROPOSED' || s === 'APPROVED' ? [i + 1] : []));
        assert.equal(open.length, 1, `one open proposal, got ${open.join(', ')}`);
        const winner = open[0] as number;
        assert.ok(winner === 40 || winner === 68);
        assert.ok(
          states.slice(0, winner - 1).every((s) => s === 'SUPERSEDED'),
          'every version below the proposal settled',
        );
        if (results[1].status === 'fulfilled') assert.equal(winner, 68, 'the newer proposal, once it returns, is the open one');
        for (const r of results) if (r.status === 'rejected') assert.match(String(r.reason), /SUPERSEDED|busy|changed/);
        assert.deepEqual((await verifyArtifactAudit(ctx, id)).findings, []);
      } finally {
        await inst.close();
      }
    });
  });
}
