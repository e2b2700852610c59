/**
 * kill -9 at random points of a PURGE, many runs (seed 004: "Purge commits a PREPARED journal before
 * touching bytes ... Interruption leaves a retryable responsibility record"). After every kill each
 * candidate is either present and QUARANTINED/PREPARED, or absent and PREPARED/PURGED; recovery under
 * maintenance (epoch advance + fence takeover) and a retry complete the purge; reconcile stays VERIFIED.
 * ALP_RETENTION_KILL_RUNS (default 12) sets the runs.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, it } from 'node:test';
import { DAY_MS } from '../../src/core/clock.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { reconcile } from '../../src/recovery/reconcile.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import { readFence } from '../../src/system/fence.ts';
import { recoverMaintenance } from '../../src/system/recovery.ts';
import { advanceEpoch } from '../../src/system/state.ts';
import { fromSource } from '../helpers/cli-bundle.ts';
import { embedded, epochOf, host } from '../helpers/retention-harness.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

const RUNS = Number(process.env.ALP_RETENTION_KILL_RUNS ?? 12);
const worker = path.join(import.meta.dirname, 'fixtures', 'purge-worker.ts');

function purgeIn(options: Record<string, unknown>, killAfterMs: number): Promise<{ completed: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...fromSource(worker), JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes('READY\n') && !out.includes('KILLSET')) {
        out += 'KILLSET';
        setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      }
    });
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (signal !== 'SIGKILL' && code !== 0) reject(new Error(`purge worker exited ${code}: ${err}`));
      else resolve({ completed: out.includes('DONE\n') });
    });
  });
}

describe('kill -9 during PURGE', () => {
  it(`${RUNS} runs killed at random points: every object present-and-not-purged or absent-and-journaled; recovery completes; reconcile VERIFIED`, async () => {
    const i = await embedded.open();
    const restore = await i.verifiedRestore();
    const stats = { killed: 0, completed: 0, recovered: 0, purged: 0 };
    for (let runNo = 0; runNo < RUNS; runNo++) {
      const keys = Array.from({ length: 6 }, (_, k) => `artifacts/kill${runNo}/v1/o${k}`);
      for (const [k, key] of keys.entries()) await i.ctx.content.put(key, bytesOf(`run ${runNo} object ${k} `.repeat(2000)));
      // Live data keeps changing too: reconcile must stay VERIFIED for everything referenced.
      await createArtifact(i.ctx, agent, { name: `live${runNo}`, filename: 'f', body: bytesOf(`live ${runNo}`) });
      const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
      await retention.run(await epochOf(i.ctx), 'QUARANTINE', host(i.ctx, { restore }));
      i.ctx.clock.advance(7 * DAY_MS);
      await retention.run(await epochOf(i.ctx), 'QUARANTINE', host(i.ctx, { restore }));
      i.ctx.clock.advance(30 * DAY_MS);
      const outcome = await purgeIn(
        {
          db: i.ctx.items.location,
          content: (i.ctx.content.location as string).replace(/^file:/, ''),
          now: i.ctx.clock.now().toISOString(),
          restore,
          epoch: await epochOf(i.ctx),
        },
        Math.floor(Math.random() * 250),
      );
      if (outcome.completed) stats.completed++;
      else stats.killed++;
      const observations = await retention.observations();
      for (const key of keys) {
        const state = observations.get(key)?.state;
        const present = (await i.ctx.content.head(key)) !== undefined;
        if (present) assert.ok(state === 'QUARANTINED' || state === 'PREPARED', `${key} present in state ${String(state)}`);
        else assert.ok(state === 'PREPARED' || state === 'PURGED', `${key} absent in state ${String(state)}`);
      }
      // The operator's recovery: a fence left by the dead purge is taken over in a new epoch; the
      // journal is reviewed and retried under it; then a purge finishes whatever is left.
      if (await readFence(i.ctx)) {
        await advanceEpoch(i.ctx.items, 'operator', 'purge worker died', i.ctx.clock.now().toISOString());
        const recovery = await recoverMaintenance(i.ctx, await epochOf(i.ctx), 'operator');
        assert.equal(recovery.recovered, true);
        stats.recovered++;
      }
      const retry = await retention.run(await epochOf(i.ctx), 'PURGE', host(i.ctx, { restore }));
      stats.purged += retry.purged.length;
      const after = await retention.observations();
      for (const key of keys) {
        assert.equal(after.get(key)?.state, 'PURGED', `${key} purged after recovery`);
        assert.equal(await i.ctx.content.head(key), undefined);
      }
    }
    const report = await reconcile(i.ctx, { actor: 'operator' });
    assert.equal(report.status, 'VERIFIED', JSON.stringify(report.findings.slice(0, 3)));
    assert.ok(stats.killed + stats.completed === RUNS);
    process.stdout.write(`# purge kill stats ${JSON.stringify(stats)}\n`);
    await i.close();
  });
});
