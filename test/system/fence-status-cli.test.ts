/**
 * `alp maintenance status` tells a partially acquired sharded fence honestly (issue 16 item 3): a
 * maintenance that died after the master and before its shards shows PARTIAL with the shards it does
 * not hold; recovered, the fence is free. The CLI opens the installation with its recorded layout.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { acquireMaintenance } from '../../src/system/fence.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { UNSHARDED } from '../../src/system/layout.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { embeddedContext } from '../helpers/context.ts';
import { dying } from './fence-harness.ts';

describe('alp maintenance status with 8 fence shards', () => {
  test('shows a partial fence and which shards are not held; after recovery, free', async () => {
    const ctx = await embeddedContext('2026-03-01T12:00:00.000Z', { layout: { ...UNSHARDED, fence_shards: 8 } });
    await initInstallation(ctx);
    await assert.rejects(acquireMaintenance({ ...ctx, items: dying(ctx.items, 1) }, 1, 'dies acquiring'), /process crashed/);
    const env = { env: { ALP_NOW: ctx.clock.now().toISOString() } };
    const human = await runAlp(['maintenance', 'status', '--data', ctx.dir], env);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /fence HELD by dies acquiring/);
    assert.match(human.stdout, /shards: 0 of 8 held by this fence \(PARTIAL: .*not held: 0, 1, 2, 3, 4, 5, 6, 7\)/);
    const json = await alpJson<{ state: string; shards: { count: number; held: number } }>(
      ['maintenance', 'status', '--data', ctx.dir],
      env,
    );
    assert.deepEqual([json.state, json.shards.count, json.shards.held], ['partial', 8, 0]);
    assert.equal((await runAlp(['epoch', 'advance', '--reason', 'crash', '--data', ctx.dir], env)).code, 0);
    const released = await runAlp(['maintenance', 'release', '--epoch', '2', '--data', ctx.dir], env);
    assert.equal(released.code, 0, released.stderr);
    assert.match((await runAlp(['maintenance', 'status', '--data', ctx.dir], env)).stdout, /no fence held \(epoch 2\)/);
    await ctx.items.close();
  });
});
