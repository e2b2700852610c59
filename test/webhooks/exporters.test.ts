/**
 * Webhooks beside another exporter of the telemetry outbox (docs/design.md "Webhooks", "Exporters
 * sharing the outbox"): `alp telemetry drain` registers as a pull exporter; the webhook dispatcher then
 * claims nothing, and drain delivers each record's webhooks before acknowledging it. Both a webhook
 * endpoint (a loopback receiver verifying every delivery with the `standardwebhooks` library) and the
 * drain's loopback target receive the same events; a drain that dies mid-batch (its target fails: no
 * acknowledgement) leaves the records to their lease's expiry and both get them then; a failed webhook
 * keeps the record (deferred by the back-off) and both get it again; removing the exporter hands the
 * outbox back to the dispatcher. Real processes, time by ALP_NOW.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { initInstallation } from '../../src/system/installation.ts';
import { drainQueue } from '../../src/telemetry/drain.ts';
import { registerExporter, registeredExporters } from '../../src/telemetry/exporters.ts';
import { TelemetryQueue } from '../../src/telemetry/queue.ts';
import { DEFAULT_WEBHOOK_SETTINGS } from '../../src/webhooks/config.ts';
import { deliverPending } from '../../src/webhooks/dispatcher.ts';
import { addEndpoint } from '../../src/webhooks/endpoints.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { embeddedContext } from '../helpers/context.ts';
import { tempDir } from '../helpers/tmp.ts';
import { webhookReceiver } from '../helpers/webhook-receiver.ts';

type Json = Record<string, unknown>;

it('webhooks and telemetry drain each get every event; a crash mid-batch and a failed webhook redeliver to both', {
  timeout: 120_000,
}, async () => {
  const dir = tempDir('alp-exporters');
  const data = path.join(dir, 'd');
  const file = path.join(dir, 'x.sh');
  fs.writeFileSync(file, 'echo x\n');
  // Webhook endpoint: its 3rd request fails. Drain target: its 1st request fails (the drain dies).
  const rx = await webhookReceiver((p, n) => (p === '/hook' ? (n === 3 ? 500 : 200) : n === 1 ? 500 : 204));
  const d = ['--data', data];
  // ALP_NOW at `ms` past the real time now: records are available from their commit (real time), and a
  // lease or a back-off is passed by moving this later than it.
  const at = (ms: number) => ({ env: { ALP_NOW: new Date(Date.now() + ms).toISOString(), ALP_WEBHOOK_BACKOFF_BASE_MS: '60000' } });
  const hookEvents = (secret: string) =>
    rx.got.filter((g) => g.path === '/hook' && g.status === 200).map((g) => new Webhook(secret).verify(g.body, g.headers) as Json);
  const drained = () =>
    rx.got
      .filter((g) => g.path === '/drain' && g.status === 204)
      .flatMap((g) => g.body.trim().split('\n'))
      .map((l) => JSON.parse(l) as Json);
  try {
    await alpJson([...d, 'init']);
    const hook = await alpJson([...d, 'webhooks', 'add', `${rx.base}/hook`, '--events', '*']);
    const secret = hook.secret as string;
    const created = await alpJson([...d, 'artifact', 'create', '--name', 'x', '--file', file]);
    const id = created.artifact_id as string;
    await alpJson([...d, 'artifact', 'propose', id]);
    await alpJson([...d, 'telemetry', 'enqueue', '--id', 'host.1', '--payload', '{"k":1}']);

    // The drain dies mid-batch (its target fails before anything is acknowledged): registered already,
    // so the dispatcher leaves the leased records alone.
    const died = await runAlp([...d, 'telemetry', 'drain', '--to', `${rx.base}/drain`, '--lease-ms', '5000'], at(100));
    assert.equal(died.code, 1, died.stderr);
    const yielded = await alpJson([...d, 'webhooks', 'deliver'], at(1000));
    assert.deepEqual([yielded.claimed, yielded.yielded], [0, true], 'the dispatcher leaves the outbox to the registered exporter');
    assert.equal(rx.got.filter((g) => g.path === '/hook').length, 0);

    const second = await runAlp([...d, 'telemetry', 'drain', '--to', 'stdout', '--exporter', 'other']);
    assert.equal(second.code, 4, 'one pull exporter at a time');
    assert.match(second.stderr, /CONFLICT: the pull exporter "drain" is registered/);

    // After the lease expires: both get every record (the custom one is the drain's alone: no webhook type).
    const first = await alpJson([...d, 'telemetry', 'drain', '--to', `${rx.base}/drain`], at(6000));
    assert.deepEqual([first.delivered, first.deferred], [3, 0]);
    assert.deepEqual(
      hookEvents(secret).map((e) => e.type),
      ['version.created', 'version.proposed'],
    );
    assert.deepEqual(
      drained()
        .map((l) => l.kind)
        .sort(),
      ['audit', 'audit', 'custom'],
    );
    const hookIds = rx.got.filter((g) => g.path === '/hook').map((g) => g.headers['webhook-id']);
    const drainIds = drained()
      .filter((l) => l.kind === 'audit')
      .map((l) => (l.payload as Json).event_id);
    assert.deepEqual([...hookIds].sort(), [...drainIds].sort(), 'the same events, by id');

    // A webhook that fails: drain has the records, the outbox keeps them (deferred by the back-off) until
    // the endpoint has them too; both are sent them again, with the same ids.
    await alpJson([...d, 'artifact', 'approve', id, '--evidence', 'CR-1']);
    const failing = await alpJson([...d, 'telemetry', 'drain', '--to', `${rx.base}/drain`], at(100));
    // (The approval is the proposer's own: recorded, not counted by the approval policy — one event.)
    assert.deepEqual([failing.delivered, failing.deferred], [0, 1]);
    const failedIds = rx.got.filter((g) => g.path === '/hook' && g.status === 500).map((g) => g.headers['webhook-id']);
    assert.equal(failedIds.length, 1);
    const retried = await alpJson([...d, 'telemetry', 'drain', '--to', `${rx.base}/drain`], at(61_000));
    assert.deepEqual([retried.delivered, retried.deferred], [1, 0]);
    const okLater = rx.got.filter((g) => g.path === '/hook' && g.status === 200).slice(2);
    assert.deepEqual(
      okLater.map((g) => g.headers['webhook-id']),
      failedIds,
      'the webhook gets the same webhook-id again',
    );
    assert.deepEqual(
      hookEvents(secret).map((e) => e.type),
      ['version.created', 'version.proposed', 'approval.recorded'],
    );
    const sentTwice = drained().filter((l) => failedIds.includes((l.payload as Json | undefined)?.event_id as string));
    assert.equal(sentTwice.length, 2, 'drain got the record twice (at least once, same id)');

    // Removing the exporter hands the outbox back to the dispatcher.
    assert.equal((await alpJson([...d, 'telemetry', 'exporters', 'remove', 'drain'])).removed, true);
    await alpJson([...d, 'telemetry', 'enqueue', '--id', 'host.2', '--payload', '{"k":2}']);
    const back = await alpJson([...d, 'webhooks', 'deliver'], at(100));
    assert.deepEqual([back.yielded, back.claimed, back.skipped], [false, 1, 1], 'the dispatcher consumes the outbox again');
  } finally {
    await rx.close();
  }
});

it('a pull exporter registered while the dispatcher holds a claim: the batch goes back untouched, the exporter gets it', async () => {
  const ctx = await embeddedContext();
  const rx = await webhookReceiver(() => 200);
  try {
    await initInstallation(ctx);
    await addEndpoint(ctx, { url: `${rx.base}/hook`, events: ['*'] }, { id: 'alice', kind: 'human' });
    ctx.clock.advance(1000);
    const queue = new TelemetryQueue(ctx.items, undefined, { clock: ctx.clock });
    assert.equal((await queue.enqueue('host.1', { k: 1 }, ctx.clock.now())).status, 'accepted');
    // The registration lands between the dispatcher's claim and its next read of the registrations.
    const racing = new Proxy(queue, {
      get(target, prop, receiver) {
        if (prop === 'claim')
          return async (...args: Parameters<TelemetryQueue['claim']>) => {
            const batch = await target.claim(...args);
            if (batch.length > 0) await registerExporter(ctx.items, 'drain', ctx.clock.now());
            return batch;
          };
        const v = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const report = await deliverPending(ctx, { queue: racing, settings: { ...DEFAULT_WEBHOOK_SETTINGS } });
    assert.deepEqual([report.claimed, report.acknowledged, report.yielded], [1, 0, true]);
    assert.deepEqual(
      (await registeredExporters(ctx.items)).map((e) => e.name),
      ['drain'],
    );
    const again = await deliverPending(ctx, { queue, settings: { ...DEFAULT_WEBHOOK_SETTINGS } });
    assert.deepEqual([again.claimed, again.yielded], [0, true], 'registered: the dispatcher claims nothing');
    ctx.clock.advance(1);
    const got: string[] = [];
    const drained = await drainQueue(queue, {
      epoch: 1,
      owner: 'drain',
      clock: ctx.clock,
      send: async (batch) => {
        got.push(...batch.map((r) => `${r.id}#${r.attempts}`));
      },
    });
    assert.equal(drained.delivered, 1);
    assert.deepEqual(got, ['host.1#2'], 'available at once, its second lease');
  } finally {
    await rx.close();
    await ctx.items.close();
  }
});
