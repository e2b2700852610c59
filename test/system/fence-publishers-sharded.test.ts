/**
 * The publisher table of test/recovery/fence-publishers.test.ts (library entry points) with 8 fence
 * shards, on both engines: while a maintenance holds the sharded fence every publishing function is
 * refused with MAINTENANCE and writes no item; released, each one writes. The artifacts land on
 * different shards, so this shows the refusals come from each artifact's own shard.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { canonicalJson } from '../../src/core/canonical-json.ts';
import { MaintenanceInProgress } from '../../src/core/errors.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { compensate } from '../../src/lifecycle/compensation.ts';
import { finishExecution, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import { createToken, revokeToken } from '../../src/lifecycle/principals.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import { propose, transition, withdraw } from '../../src/lifecycle/transitions.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import { acquireMaintenance, releaseMaintenance } from '../../src/system/fence.ts';
import { shardOfScope } from '../../src/system/fence-shards.ts';
import { stopDistributedServers } from '../helpers/distributed.ts';
import { allItems } from '../helpers/items.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice, approveAndRun } from '../helpers/walk.ts';
import { ENGINES, installation } from './fence-harness.ts';

after(stopDistributedServers);

async function fixtures(ctx: ServiceContext) {
  const make = async (name: string) =>
    (await createArtifact(ctx, agent, { name, filename: 'run.sh', body: bytesOf(`echo ${name}\n`) })).version.artifact_id;
  const draft = await make('draft');
  const [toWithdraw, toTransition, toApprove, toReject] = await Promise.all(['withdraw', 'transition', 'approve', 'reject'].map(make));
  for (const id of [toWithdraw, toTransition, toApprove, toReject] as string[]) await propose(ctx, agent, id, 1);
  const approved = await make('approved');
  const running = await make('running');
  for (const id of [approved, running]) {
    await propose(ctx, agent, id, 1);
    await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'CR' });
  }
  const run = (await startExecution(ctx, agent, running, 1)).run_id;
  const executed = await make('executed');
  await approveAndRun(ctx, executed, 1, 'SUCCEEDED');
  const settled = await make('settled');
  await propose(ctx, agent, settled, 1);
  await decide(ctx, alice, settled, 1, { decision: 'REJECT', evidenceRef: 'no' });
  const { token } = await createToken(ctx, { principal: 'bot', kind: 'agent' }, alice);
  return { draft, toWithdraw, toTransition, toApprove, toReject, approved, run, executed, settled, token } as Record<string, string>;
}

type F = Awaited<ReturnType<typeof fixtures>>;
const LIBRARY: Array<[string, (ctx: ServiceContext, f: F) => Promise<unknown>]> = [
  ['createArtifact', (c) => createArtifact(c, agent, { name: 'new', filename: 'a.sh', body: bytesOf('new') })],
  ['addVersion', (c, f) => addVersion(c, agent, f.draft as string, { filename: 'run.sh', body: bytesOf('v2') })],
  ['propose', (c, f) => propose(c, agent, f.draft as string, 1)],
  ['withdraw', (c, f) => withdraw(c, agent, f.toWithdraw as string, 1)],
  ['transition', (c, f) => transition(c, agent, f.toTransition as string, 1, 'DRAFT', 'back')],
  ['decide APPROVE', (c, f) => decide(c, alice, f.toApprove as string, 1, { decision: 'APPROVE', evidenceRef: 'CR-7' })],
  ['decide REJECT', (c, f) => decide(c, alice, f.toReject as string, 1, { decision: 'REJECT', evidenceRef: 'CR-8' })],
  ['startExecution', (c, f) => startExecution(c, agent, f.approved as string, 1)],
  ['uploadOutput', (c, f) => uploadOutput(c, agent, f.run as string, 'stdout.log', bytesOf('out\n'))],
  ['finishExecution', (c, f) => finishExecution(c, agent, f.run as string, { status: 'SUCCEEDED', exitCode: 0 })],
  ['compensate', (c, f) => compensate(c, agent, f.executed as string, 1, { filename: 'undo.sh', body: bytesOf('undo') })],
  ['addProvenance', (c, f) => addProvenance(c, agent, f.draft as string, { action: 'review', model: 'm@1' })],
  ['archiveArtifact', (c, f) => archiveArtifact(c, alice, f.settled as string)],
  ['createToken', (c) => createToken(c, { principal: 'newcomer', kind: 'agent' }, alice)],
  ['revokeToken', (c, f) => revokeToken(c, f.token as string)],
];

const picture = async (ctx: ServiceContext) => (await allItems(ctx.items)).map((i) => canonicalJson(i)).sort();

for (const engine of ENGINES) {
  describe(`every publisher is refused by the sharded fence on ${engine} (8 shards)`, () => {
    test('refused with MAINTENANCE, nothing written; released, each one writes', async () => {
      const { ctx, close } = await installation(engine, 8);
      try {
        const f = await fixtures(ctx);
        const ids = [f.draft, f.toWithdraw, f.toTransition, f.toApprove, f.toReject, f.approved, f.executed, f.settled] as string[];
        const shards = new Set(ids.map((id) => shardOfScope({ kind: 'artifacts', ids: [id] }, 8)));
        assert.ok(shards.size >= 3, `the fixtures span several shards (${[...shards].join(',')})`);
        const m = await acquireMaintenance(ctx, 1, 'retention os:alice', { purpose: 'publisher table' });
        const before = await picture(ctx);
        for (const [name, call] of LIBRARY) await assert.rejects(call(ctx, f), MaintenanceInProgress, `${name} must be refused`);
        assert.deepEqual(await picture(ctx), before, 'no publisher wrote an item');
        await releaseMaintenance(ctx, m);
        for (const [name, call] of LIBRARY) {
          const pre = await picture(ctx);
          await call(ctx, f);
          assert.notDeepEqual(await picture(ctx), pre, `${name} writes when unfenced`);
        }
      } finally {
        await close();
      }
    });
  });
}
