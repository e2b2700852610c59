/**
 * Seed 004: "Maintenance must fence every artifact publisher, reader, database writer and competing
 * maintenance operation until the call returns". On both engines, with 1 and 8 fence shards: while a
 * retention-style fence (`fenceReaders: true`) is held, every content read an entry point reaches —
 * version content, an execution output, a history, verify's object list — is refused with MAINTENANCE
 * before it opens any bytes, and works again after release; a fence without readers (backup,
 * compaction, archive) leaves reads alone; over HTTP the refusal is 503 with Retry-After. Crash recovery
 * (`alp maintenance release`, which may finish a purge) fences readers too.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { buildServer } from '../../src/api/server.ts';
import { history } from '../../src/audit/history.ts';
import { MaintenanceInProgress } from '../../src/core/errors.ts';
import { createArtifact, openVersionContent } from '../../src/lifecycle/artifacts.ts';
import type { Principal } from '../../src/lifecycle/model.ts';
import { createToken } from '../../src/lifecycle/principals.ts';
import { openExecutionOutput } from '../../src/lifecycle/reads.ts';
import { collectRefs } from '../../src/lifecycle/verify-content.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import {
  acquireMaintenance,
  assertReadable,
  type MaintenanceOptions,
  maintenanceStatus,
  releaseMaintenance,
} from '../../src/system/fence.ts';
import { recoverMaintenance } from '../../src/system/recovery.ts';
import { advanceEpoch } from '../../src/system/state.ts';
import { call } from '../helpers/api-harness.ts';
import { stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, approveAndRun } from '../helpers/walk.ts';
import { ENGINES, installation } from './fence-harness.ts';

after(stopDistributedServers);

const RETENTION: MaintenanceOptions = { purpose: 'retention PURGE', refuseWhileRestoreHeld: true, holdOnFailure: true, fenceReaders: true };

async function drain(stream: AsyncIterable<unknown>): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(Buffer.from(c as Uint8Array));
  return Buffer.concat(parts).toString('utf8');
}

async function fixture(ctx: ServiceContext) {
  const { version } = await createArtifact(ctx, agent, { name: 'readme', filename: 'run.sh', body: bytesOf('echo read\n') });
  const id = version.artifact_id;
  const run = await approveAndRun(ctx, id, 1, 'SUCCEEDED');
  return { id, run };
}

/** Every reader of the table, each returning what it read (so a pass is a real read). */
function readers(ctx: ServiceContext, f: { id: string; run: string }): Array<[string, () => Promise<unknown>]> {
  return [
    ['version content', async () => drain((await openVersionContent(ctx, f.id, 1)).stream)],
    ['execution output', async () => drain((await openExecutionOutput(ctx, f.run, 'stdout.log')).stream)],
    ['history', async () => (await history(ctx, f.id)).length],
    ['verify (object list)', async () => (await collectRefs(ctx, f.id)).length],
    ['verify --all (object list)', async () => (await collectRefs(ctx)).length],
  ];
}

async function allRead(ctx: ServiceContext, f: { id: string; run: string }): Promise<void> {
  for (const [name, read] of readers(ctx, f)) assert.ok(await read(), `${name} reads`);
  assert.equal(await drain((await openVersionContent(ctx, f.id, 1)).stream), 'echo read\n');
}

async function allRefused(ctx: ServiceContext, f: { id: string; run: string }): Promise<void> {
  for (const [name, read] of readers(ctx, f))
    await assert.rejects(read(), (e: unknown) => e instanceof MaintenanceInProgress && e.code === 'MAINTENANCE', `${name} is refused`);
}

for (const engine of ENGINES) {
  for (const shards of [1, 8]) {
    describe(`readers and the maintenance fence on ${engine} (${shards} fence shard${shards > 1 ? 's' : ''})`, () => {
      test('a fence with readers refuses every content read with MAINTENANCE; released, they read', async () => {
        const { ctx, close } = await installation(engine, shards);
        try {
          const f = await fixture(ctx);
          await allRead(ctx, f);
          const m = await acquireMaintenance(ctx, 1, 'retention os:alice', RETENTION);
          const status = await maintenanceStatus(ctx);
          assert.equal(status.fence?.readers, true);
          assert.equal(status.state, 'held');
          await allRefused(ctx, f);
          await releaseMaintenance(ctx, m);
          await allRead(ctx, f);
        } finally {
          await close();
        }
      });

      test('a fence without readers (backup, compaction, archive) leaves reads alone', async () => {
        const { ctx, close } = await installation(engine, shards);
        try {
          const f = await fixture(ctx);
          const m = await acquireMaintenance(ctx, 1, 'backup os:alice', { purpose: 'backup' });
          assert.equal((await maintenanceStatus(ctx)).fence?.readers, undefined);
          await allRead(ctx, f);
          await releaseMaintenance(ctx, m);
        } finally {
          await close();
        }
      });
    });
  }
}

for (const engine of ENGINES) {
  describe(`HTTP reads during a retention fence on ${engine} (8 fence shards)`, () => {
    test('503 MAINTENANCE with Retry-After while held, 200 after release', async () => {
      const { ctx, close } = await installation(engine, 8);
      const server = await buildServer(ctx, { logger: false, processMetrics: false, version: 'test' });
      try {
        const url = await server.listen('127.0.0.1', 0);
        const admin: Principal = { id: 'test-admin', kind: 'human' };
        const token = (await createToken(ctx, { principal: 'agent-7', kind: 'agent' }, admin)).token;
        const f = await fixture(ctx);
        const paths = [
          `/v1/artifacts/${f.id}/versions/1/content`,
          `/v1/executions/${f.run}/stdout.log`,
          `/v1/artifacts/${f.id}/history`,
          `/v1/artifacts/${f.id}/verification`,
        ];
        for (const p of paths) assert.equal((await call(url, 'GET', p, { token })).status, 200, p);
        const m = await acquireMaintenance(ctx, 1, 'retention os:alice', RETENTION);
        for (const p of paths) {
          const r = await call(url, 'GET', p, { token });
          assert.equal(r.status, 503, p);
          assert.equal(r.json.code, 'MAINTENANCE', p);
          assert.equal(r.headers.get('retry-after'), '1', p);
        }
        await releaseMaintenance(ctx, m);
        const back = await call(url, 'GET', paths[0] as string, { token });
        assert.equal(back.status, 200);
        assert.equal(back.text, 'echo read\n');
      } finally {
        await server.shutdown(1000);
        await close();
      }
    });
  });
}

describe('crash recovery fences readers (it may finish an interrupted purge)', () => {
  test('while the recovery steps run, reads are refused; after, they read', async () => {
    const { ctx, close } = await installation('sqlite', 8);
    try {
      const f = await fixture(ctx);
      await acquireMaintenance(ctx, 1, 'backup os:alice', { purpose: 'backup' }); // then "crashes"
      await advanceEpoch(ctx.items, 'alice', 'the backup died', ctx.clock.now().toISOString());
      let during: unknown;
      const step = {
        name: 'probe',
        run: async () => {
          during = await assertReadable(ctx, { kind: 'artifacts', ids: [f.id] }).catch((e: unknown) => e);
          return {};
        },
      };
      const r = await recoverMaintenance(ctx, 2, 'recovery os:alice', [step]);
      assert.equal(r.recovered, true);
      assert.ok(during instanceof MaintenanceInProgress, 'refused while recovery holds the fence');
      await allRead(ctx, f);
    } finally {
      await close();
    }
  });
});
