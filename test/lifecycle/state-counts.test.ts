/**
 * Issue 18 item 5: the per-state counters kept in the transaction of every state change. After any
 * sequence of operations (creations, every kind of move, compensations, archives) the counters equal a
 * recount of the versions, on SQLite (unsharded and 8 shards) and DynamoDB Local (8 shards); an
 * installation whose versions predate the counters answers from the index until the backfill, which
 * recounts from scratch under the maintenance fence.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { DAY_MS } from '../../src/core/clock.ts';
import { AlpError, MaintenanceInProgress } from '../../src/core/errors.ts';
import { INSTALLATION_SK, SYS_PK } from '../../src/core/keys.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { addVersion, createArtifact, showArtifact } from '../../src/lifecycle/artifacts.ts';
import { compensate } from '../../src/lifecycle/compensation.ts';
import { finishExecution, startExecution } from '../../src/lifecycle/executions.ts';
import type { Principal } from '../../src/lifecycle/model.ts';
import { countVersionsByState } from '../../src/lifecycle/queries.ts';
import {
  allStateCountKeys,
  backfillStateCounts,
  checkStateCounts,
  combineCountOps,
  readStateCounts,
  stateCountOp,
  stateCountsKey,
} from '../../src/lifecycle/state-counts.ts';
import { propose, transition } from '../../src/lifecycle/transitions.ts';
import { createBackup } from '../../src/recovery/backup.ts';
import { restoreBackup } from '../../src/recovery/restore.ts';
import type { TransactOp } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { acquireMaintenance, releaseMaintenance } from '../../src/system/fence.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { parseLayout } from '../../src/system/layout.ts';
import { readEpoch } from '../../src/system/state.ts';
import { captureCli, patchCliOutput } from '../helpers/cli-inprocess.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { embeddedAt, populate } from '../recovery/helpers.ts';

after(stopDistributedServers);
const __filename = fileURLToPath(import.meta.url);

const agent: Principal = { id: 'agent-1', kind: 'agent' };
const humans: Principal[] = [
  { id: 'alice', kind: 'human' },
  { id: 'bob', kind: 'human' },
];
const SHARDED_8 = parseLayout('index=8,telemetry=8,fence=8');

const opArb = fc.oneof(
  fc.record({ kind: fc.constant('create' as const) }),
  fc.record({ kind: fc.constant('version' as const), a: fc.nat(9) }),
  fc.record({ kind: fc.constant('propose' as const), a: fc.nat(9), v: fc.nat(4) }),
  fc.record({ kind: fc.constant('withdraw' as const), a: fc.nat(9), v: fc.nat(4) }),
  fc.record({ kind: fc.constant('approve' as const), a: fc.nat(9), v: fc.nat(4), who: fc.nat(1) }),
  fc.record({ kind: fc.constant('reject' as const), a: fc.nat(9), v: fc.nat(4) }),
  fc.record({ kind: fc.constant('start' as const), a: fc.nat(9), v: fc.nat(4) }),
  fc.record({ kind: fc.constant('finish' as const), ok: fc.boolean() }),
  fc.record({ kind: fc.constant('compensate' as const), a: fc.nat(9), v: fc.nat(4) }),
  fc.record({ kind: fc.constant('archive' as const), a: fc.nat(9) }),
);
type Op = typeof opArb extends fc.Arbitrary<infer T> ? T : never;

interface World {
  ids: string[];
  runs: string[];
  n: number;
}

async function apply(ctx: ServiceContext, w: World, op: Op): Promise<void> {
  const id = w.ids[('a' in op ? op.a : 0) % w.ids.length] as string;
  const pick = async (n: number) => {
    const versions = (await showArtifact(ctx, id)).versions;
    return (versions[n % versions.length] as { version: number }).version;
  };
  switch (op.kind) {
    case 'create':
      w.ids.push((await createArtifact(ctx, agent, { name: `c${w.n++}`, filename: 'f', body: bytesOf('x') })).head.artifact_id);
      return;
    case 'version':
      await addVersion(ctx, agent, id, { filename: 'f', body: bytesOf(String(w.n++)) });
      return;
    case 'propose':
      await propose(ctx, agent, id, await pick(op.v));
      return;
    case 'withdraw':
      await transition(ctx, agent, id, await pick(op.v), 'DRAFT');
      return;
    case 'approve':
      await decide(ctx, humans[op.who] as Principal, id, await pick(op.v), { decision: 'APPROVE', evidenceRef: 'ev', expiresInMs: DAY_MS });
      return;
    case 'reject':
      await decide(ctx, humans[0] as Principal, id, await pick(op.v), { decision: 'REJECT', evidenceRef: 'no' });
      return;
    case 'start':
      w.runs.push((await startExecution(ctx, agent, id, await pick(op.v))).run_id);
      return;
    case 'finish': {
      const run = w.runs.pop();
      if (run) await finishExecution(ctx, agent, run, { status: op.ok ? 'SUCCEEDED' : 'FAILED', exitCode: op.ok ? 0 : 1 });
      return;
    }
    case 'compensate': {
      const r = await compensate(ctx, agent, id, await pick(op.v), { filename: `undo-${w.n++}.sh`, body: bytesOf('undo') });
      w.ids.push(r.compensation.artifact_id);
      return;
    }
    case 'archive':
      await archiveArtifact(ctx, agent, id);
      return;
  }
}

async function runAndCheck(ctx: ServiceContext, ops: Op[]): Promise<void> {
  const w: World = { ids: [], runs: [], n: 0 };
  await apply(ctx, w, { kind: 'create' });
  for (const op of ops) {
    try {
      await apply(ctx, w, op);
    } catch (e) {
      if (!(e instanceof AlpError) || e.code === 'INTERNAL' || e.code === 'INVALID') throw e;
    }
  }
  const check = await checkStateCounts(ctx);
  assert.deepEqual(check, { status: 'checked', exact: true, mismatches: [] });
  const counted = await countVersionsByState(ctx);
  assert.equal(counted.source, 'counters');
  let versions = 0;
  for (const id of w.ids) versions += (await showArtifact(ctx, id)).versions.length;
  assert.equal(counted.total, versions);
}

describe('per-state counters equal a recount after random operations (property)', () => {
  for (const [name, layout] of [
    ['unsharded', undefined],
    ['8 shards', SHARDED_8],
  ] as const) {
    it(`SQLite, ${name}`, { timeout: 300_000 }, async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 25 }), async (ops) => {
          const ctx = await embeddedContext('2026-03-01T12:00:00.000Z', layout ? { layout } : {});
          await initInstallation(ctx);
          try {
            await runAndCheck(ctx, ops);
          } finally {
            await ctx.items.close();
          }
        }),
        { numRuns: 25 },
      );
    });
  }

  it('DynamoDB Local, 8 shards', { timeout: 600_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 15 }), async (ops) => {
        const inst = await distributedInstallation('2026-03-01T12:00:00.000Z', { layout: SHARDED_8 });
        await initInstallation(inst.ctx);
        try {
          await runAndCheck(inst.ctx, ops);
        } finally {
          await inst.close();
        }
      }),
      { numRuns: 6 },
    );
  });
});

describe('counter ops in one transaction', () => {
  it('fold into one op per counter item, dropping deltas that cancel', () => {
    const other: TransactOp = { op: 'delete', key: { PK: 'X', SK: 'Y' } };
    const ops = combineCountOps([
      stateCountOp('#1', { DRAFT: -1, PROPOSED: 1 }),
      other,
      stateCountOp('#2', { DRAFT: 1 }),
      stateCountOp('#1', { DRAFT: -1, SUPERSEDED: 1 }),
      stateCountOp('#1', { PROPOSED: -1, DRAFT: 1 }),
      stateCountOp('#3', { DRAFT: 1 }),
      stateCountOp('#3', { DRAFT: -1 }),
    ]);
    assert.deepEqual(
      ops.map((o) => (o.op === 'update' ? [o.key.PK, o.update.add] : o.op)),
      [['COUNTS#1', { DRAFT: -1, SUPERSEDED: 1 }], 'delete', ['COUNTS#2', { DRAFT: 1 }]],
    );
  });
});

/** An installation as it was before counters: versions, no counter items, no mark. */
async function legacyInstallation() {
  const ctx = await embeddedContext('2026-03-01T12:00:00.000Z', { layout: SHARDED_8 });
  await initInstallation(ctx);
  for (let i = 0; i < 12; i++) {
    const { head } = await createArtifact(ctx, agent, { name: `l${i}`, filename: 'f', body: bytesOf(`b${i}`) });
    if (i % 3 === 0) await propose(ctx, agent, head.artifact_id);
    if (i % 4 === 0) await addVersion(ctx, agent, head.artifact_id, { filename: 'f', body: bytesOf(`c${i}`) });
  }
  const expected = await countVersionsByState(ctx);
  for (const key of allStateCountKeys(8)) await ctx.items.delete(key);
  await ctx.items.update({ PK: SYS_PK, SK: INSTALLATION_SK }, { remove: ['state_counts'] });
  return { ctx, expected };
}

describe('installations with versions older than the counters', () => {
  it('count from the index until the backfill, then from the counters, which equal a recount', async () => {
    const { ctx, expected } = await legacyInstallation();
    try {
      // Deltas added after the upgrade, before the backfill, are not a count: the backfill replaces them.
      const { head } = await createArtifact(ctx, agent, { name: 'after', filename: 'f', body: bytesOf('a') });
      await propose(ctx, agent, head.artifact_id);
      const before = await countVersionsByState(ctx);
      assert.equal(before.source, 'index');
      assert.equal(before.total, expected.total + 1);
      assert.equal((await readStateCounts(ctx)).exact, false);

      const done = await backfillStateCounts(ctx, await readEpoch(ctx.items), 'test backfill');
      const after = await countVersionsByState(ctx);
      assert.equal(after.source, 'counters');
      assert.equal(after.exact, true);
      assert.deepEqual(after.states, before.states);
      assert.deepEqual(done.states, before.states);
      assert.deepEqual((await checkStateCounts(ctx)).mismatches, []);
      // And they stay exact with the next change.
      await transition(ctx, agent, head.artifact_id, 1, 'DRAFT');
      assert.deepEqual((await checkStateCounts(ctx)).mismatches, []);
    } finally {
      await ctx.items.close();
    }
  });

  it('a backfill that did not run (fence held) or crashed half-way leaves the mark unset; a rerun recounts from scratch', async () => {
    const { ctx, expected } = await legacyInstallation();
    try {
      const epoch = await readEpoch(ctx.items);
      const other = await acquireMaintenance(ctx, epoch, 'someone else');
      await assert.rejects(backfillStateCounts(ctx, epoch, 'test backfill'), MaintenanceInProgress);
      await releaseMaintenance(ctx, other);
      // A crash after some counter items were written: wrong values, no mark.
      await ctx.items.put({ ...(allStateCountKeys(8)[0] as { PK: string; SK: string }), type: 'state_counts', DRAFT: 1000 });
      assert.equal((await countVersionsByState(ctx)).source, 'index');
      assert.ok((await checkStateCounts(ctx)).mismatches.length > 0, 'a wrong counter is reported');
      await backfillStateCounts(ctx, epoch, 'test backfill');
      const after = await countVersionsByState(ctx);
      assert.deepEqual({ ...after, source: undefined }, { ...expected, source: undefined });
      assert.deepEqual((await checkStateCounts(ctx)).mismatches, []);
    } finally {
      await ctx.items.close();
    }
  });
});

describe('backup and restore carry the counters', () => {
  it('a restored installation counts exactly what it restored (every-state walk)', async () => {
    const dir = tempDir('alp-counts');
    const src = await embeddedAt(path.join(dir, 'src'));
    await populate(src);
    const before = await countVersionsByState(src);
    assert.equal(before.source, 'counters');
    assert.deepEqual((await checkStateCounts(src)).mismatches, []);
    const out = path.join(dir, 'backup');
    await createBackup(src, { out, actor: 'os:tester' });
    const dst = await embeddedAt(path.join(dir, 'restored'));
    await restoreBackup(dst, { from: out, actor: 'os:tester' });
    try {
      const after = await countVersionsByState(dst);
      assert.deepEqual(after, before);
      assert.deepEqual(await checkStateCounts(dst), { status: 'checked', exact: true, mismatches: [] });
    } finally {
      await src.items.close();
      await dst.items.close();
    }
  });
});

describe('alp maintenance recount-states', () => {
  let unpatch: () => void;
  before(() => {
    unpatch = patchCliOutput();
  });
  after(() => unpatch());

  it('backfills the counters of an installation without the mark, through the CLI', async () => {
    const data = path.join(tempDir('alp-counts-cli'), 'data');
    assert.equal((await captureCli(['init', '--data', data])).code, 0);
    const created = await captureCli(['artifact', 'create', '--name', 'n', '--file', __filename, '--data', data, '--json']);
    assert.equal(created.code, 0, created.stderr);
    const items = new SqliteItemStore(path.join(data, 'alp.db'));
    try {
      for (const key of allStateCountKeys(1)) await items.delete(key);
      await items.update({ PK: SYS_PK, SK: INSTALLATION_SK }, { remove: ['state_counts'] });
      const r = await captureCli(['maintenance', 'recount-states', '--data', data, '--json']);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(JSON.parse(r.stdout).states.DRAFT, 1);
      assert.equal((await items.get({ PK: SYS_PK, SK: INSTALLATION_SK }))?.state_counts, 'exact');
      assert.equal((await items.get(stateCountsKey('')))?.DRAFT, 1);
    } finally {
      await items.close();
    }
  });
});
