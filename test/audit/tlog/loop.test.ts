/** The server's transparency-log loop (issue 20 item 2): a round shortly after commits (coalesced), and on the interval. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { readLogState } from '../../../src/audit/tlog/state.ts';
import { createArtifact } from '../../../src/lifecycle/artifacts.ts';
import { attachAuditSinks } from '../../../src/runtime/sinks.ts';
import { startLogLoop, tlogBatchMs, tlogIntervalMs } from '../../../src/runtime/tlog-loop.ts';
import { registerLogLoopMetrics } from '../../../src/runtime/tlog-metrics.ts';
import { initInstallation } from '../../../src/system/installation.ts';
import { installationSigner } from '../../../src/system/installation-key.ts';
import { runAlp } from '../../helpers/cli.ts';
import { embeddedContext } from '../../helpers/context.ts';
import { bytesOf, tempDir } from '../../helpers/tmp.ts';
import { agent } from '../../helpers/walk.ts';

describe('transparency log loop', () => {
  it('sequences commits shortly after they land (one poke per commit, coalesced), without waiting for the interval', async () => {
    const ctx = await embeddedContext();
    await initInstallation(ctx);
    await attachAuditSinks(ctx);
    let rounds = 0;
    const loop = startLogLoop(ctx, { intervalMs: 3_600_000 }, { onRound: () => void rounds++, onError: (e) => assert.fail(String(e)) });
    (ctx.commitObservers ??= []).push(() => loop.poke());
    try {
      await installationSigner(ctx); // the key's activation (a leaf too: the key log is a chain of the log) before the commits
      await loop.idle();
      const started = performance.now();
      await Promise.all(
        Array.from({ length: 20 }, (_, i) => createArtifact(ctx, agent, { name: `l${i}`, filename: 'a.sh', body: bytesOf(`echo ${i}`) })),
      );
      await loop.idle();
      // A poke may land after idle() resolved for a commit of the last group: wait for the log to catch up.
      for (let i = 0; i < 300 && (await readLogState(ctx)).size < 21; i++) await new Promise((r) => setTimeout(r, 10));
      const state = await readLogState(ctx);
      assert.equal(state.size, 21, '20 creations and the key activation');
      assert.ok(state.checkpoint, 'signed');
      assert.ok(rounds >= 1 && rounds < 20, `${rounds} rounds for 20 commits (coalesced)`);
      assert.ok(performance.now() - started < 5_000);
      // What /metrics shows of it (tlog-metrics.ts), through prom-client's own registry.
      const status = loop.status();
      assert.deepEqual([status.failures, status.holding, status.size], [0, true, 21]);
      assert.ok(status.rounds >= rounds && (status.lastRoundAt ?? 0) > 0);
      const registry = new Registry();
      registerLogLoopMetrics(registry, () => loop.status());
      const text = await registry.metrics();
      assert.match(text, new RegExp(`^alp_tlog_rounds_total ${status.rounds}$`, 'm'));
      assert.match(text, /^alp_tlog_round_failures_total 0$/m);
      assert.match(text, /^alp_tlog_sequencer_holding 1$/m);
      assert.match(text, /^alp_tlog_leaves 21$/m);
      assert.match(text, /^alp_tlog_last_round_timestamp_seconds \d+(\.\d+)?$/m);
    } finally {
      await loop.stop();
      await ctx.items.close();
    }
  });

  it('counts a failed round in its status (and alp_tlog_round_failures_total), and keeps going', async () => {
    const ctx = await embeddedContext();
    await initInstallation(ctx);
    const errors: unknown[] = [];
    const loop = startLogLoop(ctx, { intervalMs: 10 }, { onError: (e) => errors.push(e) });
    try {
      await loop.idle();
      assert.equal(loop.status().failures, 0);
      await ctx.items.close(); // every round from now on fails
      for (let i = 0; i < 300 && loop.status().failures < 2; i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(loop.status().failures >= 2, 'rounds fail and the loop keeps trying');
      assert.equal(errors.length, loop.status().failures);
    } finally {
      await loop.stop();
    }
  });

  it('ALP_TLOG_INTERVAL_MS: default 1,000 ms, refused outside 10 … 3,600,000', () => {
    assert.equal(tlogIntervalMs({}), 1000);
    assert.equal(tlogIntervalMs({ ALP_TLOG_INTERVAL_MS: '250' }), 250);
    assert.throws(() => tlogIntervalMs({ ALP_TLOG_INTERVAL_MS: '5' }), /ALP_TLOG_INTERVAL_MS/);
    assert.throws(() => tlogIntervalMs({ ALP_TLOG_INTERVAL_MS: 'soon' }), /ALP_TLOG_INTERVAL_MS/);
  });

  it('ALP_TLOG_BATCH_MS: default 1,000 ms between rounds asked for by commits, refused outside 0 … 10,000', () => {
    assert.equal(tlogBatchMs({}), 1000);
    assert.equal(tlogBatchMs({ ALP_TLOG_BATCH_MS: '0' }), 0);
    assert.throws(() => tlogBatchMs({ ALP_TLOG_BATCH_MS: '-1' }), /ALP_TLOG_BATCH_MS/);
    assert.throws(() => tlogBatchMs({ ALP_TLOG_BATCH_MS: '20000' }), /ALP_TLOG_BATCH_MS/);
  });

  it('alp start refuses a bad ALP_TLOG_BATCH_MS or ALP_TLOG_INTERVAL_MS before it listens (usage, not a server without its log)', {
    timeout: 60_000,
  }, async () => {
    for (const env of [{ ALP_TLOG_BATCH_MS: 'soon' }, { ALP_TLOG_INTERVAL_MS: '5' }]) {
      const r = await runAlp(['start', '--data', tempDir('alp-tlog-env'), '--port', '0'], { env });
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, new RegExp(`${Object.keys(env)[0]} must be`));
      assert.doesNotMatch(r.stdout, /listening|http:\/\//);
    }
  });

  it('spaces the rounds commits ask for by batchMs: commits over ~300 ms of a 100 ms batch take a few rounds, not one each', async () => {
    const ctx = await embeddedContext();
    await initInstallation(ctx);
    await attachAuditSinks(ctx);
    let rounds = 0;
    const loop = startLogLoop(ctx, { intervalMs: 3_600_000, batchMs: 100 }, { onRound: () => void rounds++ });
    (ctx.commitObservers ??= []).push(() => loop.poke());
    try {
      await installationSigner(ctx); // the key's activation (a leaf too: the key log is a chain of the log) before the commits
      await loop.idle();
      const started = performance.now();
      let n = 0;
      while (performance.now() - started < 300)
        await createArtifact(ctx, agent, { name: `b${n++}`, filename: 'a.sh', body: bytesOf(`echo ${n}`) });
      await loop.idle();
      // n creations and the key's activation, whichever round took it.
      for (let i = 0; i < 300 && (await readLogState(ctx)).size < n + 1; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal((await readLogState(ctx)).size, n + 1);
      assert.ok(n > 10 && rounds >= 2 && rounds <= 6, `${rounds} rounds for ${n} commits over ~300 ms`);
    } finally {
      await loop.stop();
      await ctx.items.close();
    }
  });

  it('runs on the interval without any poke', async () => {
    const ctx = await embeddedContext();
    await initInstallation(ctx);
    await attachAuditSinks(ctx);
    await createArtifact(ctx, agent, { name: 'tick', filename: 'a.sh', body: bytesOf('echo') });
    const loop = startLogLoop(ctx, { intervalMs: 20 });
    try {
      for (let i = 0; i < 200 && (await readLogState(ctx)).size < 2; i++) {
        if (i === 5) await createArtifact(ctx, agent, { name: 'tock', filename: 'a.sh', body: bytesOf('echo') });
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.equal((await readLogState(ctx)).size, 2);
    } finally {
      await loop.stop();
      await ctx.items.close();
    }
  });
});
