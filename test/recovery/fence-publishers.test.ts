/**
 * With the maintenance fence held, every publishing entry point is refused with MAINTENANCE and
 * writes nothing (the whole table and every content file compared before and after); a competing
 * maintenance and a stale epoch are refused too. Released, each entry point works (so each row is a
 * real writer, refused by the fence and by nothing else).
 *
 * The HTTP routes call these same library functions; their 503 + Retry-After mapping of MAINTENANCE
 * belongs to the API layer.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { resolveStorageConfig } from '../../src/core/config.ts';
import { MaintenanceInProgress, StaleEpoch } from '../../src/core/errors.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { compensate } from '../../src/lifecycle/compensation.ts';
import { finishExecution, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import { createToken, revokeToken } from '../../src/lifecycle/principals.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import { propose, transition, withdraw } from '../../src/lifecycle/transitions.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import { openInstallation } from '../../src/runtime/open.ts';
import { acquireMaintenance, releaseMaintenance, withMaintenance } from '../../src/system/fence.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { advanceEpoch } from '../../src/system/state.ts';
import { runAlp } from '../helpers/cli.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { agent, alice, approveAndRun } from '../helpers/walk.ts';
import { dirState, tableLines } from './helpers.ts';

/** Artifacts in the states each entry point needs, so that each call would succeed without the fence. */
async function fixtures(ctx: ServiceContext, tag: string) {
  const make = async (name: string) =>
    (await createArtifact(ctx, agent, { name: `${tag}-${name}`, filename: 'run.sh', body: bytesOf(`echo ${name}\n`) })).version.artifact_id;
  const draft = await make('draft');
  const proposed = await Promise.all(['withdraw', 'transition', 'approve', 'reject'].map(make));
  for (const id of proposed) await propose(ctx, agent, id, 1);
  const [toWithdraw, toTransition, toApprove, toReject] = proposed as [string, string, string, string];
  const approved = await make('approved');
  await propose(ctx, agent, approved, 1);
  await decide(ctx, alice, approved, 1, { decision: 'APPROVE', evidenceRef: 'CR' });
  const running = await make('running');
  await propose(ctx, agent, running, 1);
  await decide(ctx, alice, running, 1, { decision: 'APPROVE', evidenceRef: 'CR' });
  const run = (await startExecution(ctx, agent, running, 1)).run_id;
  const executed = await make('executed');
  await approveAndRun(ctx, executed, 1, 'SUCCEEDED');
  const settled = await make('settled');
  await propose(ctx, agent, settled, 1);
  await decide(ctx, alice, settled, 1, { decision: 'REJECT', evidenceRef: 'no' });
  const { token } = await createToken(ctx, { principal: `${tag}-bot`, kind: 'agent' }, alice);
  return { draft, toWithdraw, toTransition, toApprove, toReject, approved, run, executed, settled, token };
}

type Fixtures = Awaited<ReturnType<typeof fixtures>>;

/** Every publishing library function. */
const LIBRARY: Array<[string, (ctx: ServiceContext, f: Fixtures) => Promise<unknown>]> = [
  ['createArtifact', (c) => createArtifact(c, agent, { name: 'new', filename: 'a.sh', body: bytesOf('new') })],
  ['addVersion', (c, f) => addVersion(c, agent, f.draft, { filename: 'run.sh', body: bytesOf('v2') })],
  ['propose', (c, f) => propose(c, agent, f.draft, 1)],
  ['withdraw', (c, f) => withdraw(c, agent, f.toWithdraw, 1)],
  ['transition', (c, f) => transition(c, agent, f.toTransition, 1, 'DRAFT', 'back')],
  ['decide APPROVE', (c, f) => decide(c, alice, f.toApprove, 1, { decision: 'APPROVE', evidenceRef: 'CR-7' })],
  ['decide REJECT', (c, f) => decide(c, alice, f.toReject, 1, { decision: 'REJECT', evidenceRef: 'CR-8' })],
  ['startExecution', (c, f) => startExecution(c, agent, f.approved, 1)],
  ['uploadOutput', (c, f) => uploadOutput(c, agent, f.run, 'stdout.log', bytesOf('out\n'))],
  ['finishExecution', (c, f) => finishExecution(c, agent, f.run, { status: 'SUCCEEDED', exitCode: 0 })],
  ['compensate', (c, f) => compensate(c, agent, f.executed, 1, { filename: 'undo.sh', body: bytesOf('undo') })],
  ['addProvenance', (c, f) => addProvenance(c, agent, f.draft, { action: 'review', model: 'm@1' })],
  ['archiveArtifact', (c, f) => archiveArtifact(c, alice, f.settled)],
  ['createToken', (c) => createToken(c, { principal: 'newcomer', kind: 'agent' }, alice)],
  ['revokeToken', (c, f) => revokeToken(c, f.token)],
];

/** Every publishing CLI command (as `alp …` arguments). */
function cliTable(f: Fixtures, file: string): Array<[string, string[]]> {
  return [
    ['artifact create', ['artifact', 'create', '--name', 'cli-new', '--file', file]],
    ['artifact version', ['artifact', 'version', f.draft, '--file', file]],
    ['artifact propose', ['artifact', 'propose', f.draft, '--version', '1']],
    ['artifact withdraw', ['artifact', 'withdraw', f.toWithdraw, '--version', '1']],
    ['artifact transition', ['artifact', 'transition', f.toTransition, '--version', '1', '--to', 'DRAFT']],
    ['artifact approve', ['artifact', 'approve', f.toApprove, '--version', '1', '--evidence', 'CR-1']],
    ['artifact reject', ['artifact', 'reject', f.toReject, '--version', '1', '--evidence', 'CR-2']],
    ['exec start', ['exec', 'start', f.approved, '--version', '1']],
    ['exec upload', ['exec', 'upload', f.run, 'stdout.log', '--file', file]],
    ['exec finish', ['exec', 'finish', f.run, '--status', 'SUCCEEDED', '--exit-code', '0']],
    ['compensate', ['compensate', f.executed, '--version', '1', '--file', file, '--filename', 'undo.sh']],
    ['provenance add', ['provenance', 'add', f.draft, '--action', 'review']],
    ['archive', ['archive', f.settled]],
    ['token create', ['token', 'create', '--principal', 'cli-newcomer', '--kind', 'agent']],
  ];
}

async function inBatches<T>(list: T[], size: number, fn: (x: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < list.length; i += size) await Promise.all(list.slice(i, i + size).map(fn));
}

describe('the maintenance fence refuses every publisher', () => {
  it('library and CLI entry points are refused with MAINTENANCE and write nothing; released, each one writes', async () => {
    const data = tempDir('alp-fence');
    // Opened the way every entry point opens it (runtime/open.ts: engines + audit sinks).
    const { ctx, close } = await openInstallation(resolveStorageConfig({ data }), new ManualClock('2026-03-01T12:00:00.000Z'));
    const contentRoot = path.join(data, 'content');
    await initInstallation(ctx);
    const lib = await fixtures(ctx, 'lib');
    const cli = await fixtures(ctx, 'cli');
    const input = path.join(tempDir('alp-fence-in'), 'input.sh');
    fs.writeFileSync(input, 'echo from the cli\n');
    const picture = async () => ({ items: await tableLines(ctx.items), content: dirState(contentRoot) });

    const fence = await acquireMaintenance(ctx, 1, 'retention os:alice', { purpose: 'publisher table' });
    const before = await picture();

    for (const [name, call] of LIBRARY) {
      await assert.rejects(call(ctx, lib), MaintenanceInProgress, `library ${name} must be refused`);
    }
    assert.deepEqual(await picture(), before, 'no library entry point wrote anything');

    await inBatches(cliTable(cli, input), 5, async ([name, args]) => {
      const r = await runAlp([...args, '--data', data], { env: { ALP_NOW: ctx.clock.now().toISOString() } });
      assert.equal(r.code, 4, `alp ${name}: exit ${r.code}, ${r.stderr}`);
      assert.match(r.stderr, /^alp: MAINTENANCE: /m, `alp ${name}`);
    });
    assert.deepEqual(await picture(), before, 'no CLI command wrote anything');

    // A competing maintenance and a stale epoch are refused as well.
    await assert.rejects(
      withMaintenance(ctx, 1, 'competitor', async () => {}),
      MaintenanceInProgress,
    );
    await releaseMaintenance(ctx, fence);
    await advanceEpoch(ctx.items, 'op', 'test', ctx.clock.now().toISOString());
    await assert.rejects(
      withMaintenance(ctx, 1, 'stale', async () => {}),
      StaleEpoch,
    );
    const unfenced = await picture();

    // Without the fence every row writes: the refusals above were the fence's doing.
    for (const [name, call] of LIBRARY) {
      const pre = await tableLines(ctx.items);
      await call(ctx, lib);
      assert.notDeepEqual(await tableLines(ctx.items), pre, `library ${name} writes when unfenced`);
    }
    for (const [name, args] of cliTable(cli, input)) {
      const pre = await tableLines(ctx.items);
      const r = await runAlp([...args, '--data', data], { env: { ALP_NOW: ctx.clock.now().toISOString() } });
      assert.equal(r.code, 0, `alp ${name}: ${r.stderr}`);
      assert.notDeepEqual(await tableLines(ctx.items), pre, `alp ${name} writes when unfenced`);
    }
    assert.notDeepEqual((await picture()).content, unfenced.content);
    await close();
  });
});
