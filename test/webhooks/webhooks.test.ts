/**
 * Webhooks (issue 20 item 5) with real processes: the `alp` CLI in child processes, `alp start` for the
 * server's loop, and a loopback HTTP receiver that checks every delivery with the `standardwebhooks`
 * library's own `Webhook.verify` (an implementation ALP did not write). Time moves by ALP_NOW (the
 * injected clock of each `alp webhooks deliver` run), kept within the library's 5-minute tolerance.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { verifyWebhookLog } from '../../src/audit/webhook-log.ts';
import { WEBHOOKS_PK, webhookLogSk } from '../../src/core/keys.ts';
import { TelemetryQueue } from '../../src/telemetry/queue.ts';
import { backoffDelay } from '../../src/webhooks/backoff.ts';
import { addEndpoint, validateEndpointUrl } from '../../src/webhooks/endpoints.ts';
import { parseEventFilter } from '../../src/webhooks/event-types.ts';
import { startAlpProcess } from '../helpers/alp-process.ts';
import { alpJson, cliErrorText, runAlp } from '../helpers/cli.ts';
import { embeddedContext } from '../helpers/context.ts';
import { tempDir } from '../helpers/tmp.ts';
import { type Delivery, webhookReceiver } from '../helpers/webhook-receiver.ts';

type Json = Record<string, unknown>;

/** The library's verification of one delivery: the parsed payload, or the error it threw. */
function verified(secret: string, d: Delivery): Json {
  return new Webhook(secret).verify(d.body, d.headers) as Json;
}

const DATA_KEYS = new Set([
  'event_id',
  'artifact_id',
  'seq',
  'version',
  'from',
  'to',
  'decision',
  'content_hash',
  'expires_at',
  'run_id',
  'status',
  'exit_code',
  'step',
  'alias',
  'action',
  'previous_version',
  'compensation_artifact_id',
  'output',
  'actor',
  'links',
]);

describe('webhooks', () => {
  it('a lifecycle walk arrives signed at every endpoint; a failing receiver gets the same webhook-id again after the back-off, and only it', async () => {
    const dir = tempDir('alp-webhooks');
    const data = path.join(dir, 'd');
    const file = path.join(dir, 'deploy.sh');
    const bytes = 'echo TOP-SECRET-ARTIFACT-BYTES-4711\n';
    fs.writeFileSync(file, bytes);
    const rx = await webhookReceiver((p, n) => (p === '/flaky' && n <= 2 ? 500 : 200));
    try {
      const d = ['--data', data];
      await alpJson([...d, 'init']);
      // One operator proposes and approves: counted (the approval policy's default would not count it,
      // and the walk's version.approved would not happen).
      await alpJson([...d, 'policy', 'set', '--self-approval', 'counted', '--reason', 'single-operator fixture']);
      const ok = await alpJson([...d, 'webhooks', 'add', `${rx.base}/ok`, '--events', '*']);
      const flaky = await alpJson([...d, 'webhooks', 'add', `${rx.base}/flaky`, '--events', 'version.*', '--description', 'CI']);
      const [okSecret, flakySecret] = [ok.secret as string, flaky.secret as string];
      assert.match(okSecret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      const listed = await runAlp([...d, 'webhooks', 'list', '--json']);
      assert.equal(listed.code, 0);
      assert.doesNotMatch(listed.stdout, /whsec_/, 'a listing never shows a secret');

      const created = await alpJson([...d, 'artifact', 'create', '--name', 'deploy', '--file', file]);
      const id = created.artifact_id as string;
      await alpJson([...d, 'artifact', 'propose', id]);
      await alpJson([...d, 'artifact', 'approve', id, '--evidence', 'CR-1']);

      const t0 = Date.now() + 1000;
      const deliver = async (at: number) =>
        alpJson([...d, 'webhooks', 'deliver'], {
          env: { ALP_NOW: new Date(at).toISOString(), ALP_WEBHOOK_BACKOFF_BASE_MS: '60000' },
        });
      const first = await deliver(t0);
      assert.equal(first.claimed, 4, JSON.stringify(first));
      assert.equal(first.failed, 2);
      assert.equal(first.deferred, 2);
      assert.equal(first.acknowledged, 2);

      const atOk = rx.got.filter((g) => g.path === '/ok');
      assert.deepEqual(
        atOk.map((g) => verified(okSecret, g).type).sort(),
        ['approval.recorded', 'version.approved', 'version.created', 'version.proposed'],
        'every event of the walk arrives at the * endpoint, each verified by the standardwebhooks library',
      );
      for (const g of atOk) {
        const payload = verified(okSecret, g);
        const dataPart = payload.data as Json;
        assert.equal(g.headers['webhook-id'], dataPart.event_id, 'webhook-id is the event id');
        assert.equal(dataPart.artifact_id, id);
        assert.deepEqual(
          Object.keys(dataPart).filter((k) => !DATA_KEYS.has(k)),
          [],
          'only identity fields',
        );
        assert.equal((dataPart.links as Json).artifact, `/v1/artifacts/${id}`);
        assert.doesNotMatch(g.body, /TOP-SECRET-ARTIFACT-BYTES/, 'no artifact bytes in a payload');
        assert.doesNotMatch(g.body, new RegExp(Buffer.from(bytes).toString('base64').slice(0, 20)), 'nor their base64');
        // Negative controls: another endpoint's secret, and one changed byte, fail verification.
        assert.throws(() => verified(flakySecret, g), /No matching signature/);
        assert.throws(() => verified(okSecret, { ...g, body: g.body.replace('"seq":', '"seq": ') }), /No matching signature/);
      }
      const failedIds = rx.got.filter((g) => g.path === '/flaky' && g.status === 500).map((g) => g.headers['webhook-id']);
      assert.equal(failedIds.length, 2);
      assert.ok(
        rx.got.filter((g) => g.path === '/flaky').every((g) => (verified(flakySecret, g).type as string).startsWith('version.')),
        'the version.* endpoint gets version events only',
      );

      const early = await deliver(t0 + 1000);
      assert.equal(early.claimed, 0, 'nothing is retried before its back-off');
      const retry = await deliver(t0 + 61_000);
      assert.equal(retry.claimed, 2);
      assert.equal(retry.delivered, 2);
      assert.equal(retry.acknowledged, 2);
      const redelivered = rx.got.filter((g) => g.path === '/flaky').slice(3);
      assert.deepEqual(redelivered.map((g) => g.headers['webhook-id']).sort(), [...failedIds].sort(), 'at least once, same webhook-id');
      for (const g of redelivered) {
        assert.equal(g.status, 200);
        verified(flakySecret, g);
      }
      assert.equal(rx.got.filter((g) => g.path === '/ok').length, 4, 'the endpoint that had it is not sent it again');

      const log = (await alpJson([...d, 'webhooks', 'log', flaky.endpoint_id as string])).attempts as Json[];
      assert.deepEqual(log.map((a) => `${a.outcome} ${a.status} attempt ${a.attempt}`).sort(), [
        'delivered 200 attempt 1',
        'delivered 200 attempt 2',
        'delivered 200 attempt 2',
        'failed 500 attempt 1',
        'failed 500 attempt 1',
      ]);
      const stats = await alpJson([...d, 'telemetry', 'stats']);
      assert.equal(stats.live_records, 0);
      assert.equal(stats.delivered, 4);
    } finally {
      await rx.close();
    }
  });

  it('repeated failure disables an endpoint, recorded in the hash-chained webhook log; agents are refused; enable re-arms it', async () => {
    const dir = tempDir('alp-webhooks-off');
    const data = path.join(dir, 'd');
    const file = path.join(dir, 'x.sh');
    fs.writeFileSync(file, 'echo x\n');
    // The second request of a path is answered late: the claim's first record has settled (one failure,
    // not yet disabled) when the second's failure disables the endpoint — the first must still be acknowledged.
    const rx = await webhookReceiver((_, n) => (n === 2 ? { code: 503, delayMs: 400 } : 503));
    try {
      const d = ['--data', data];
      await alpJson([...d, 'init']);
      const agent = (await alpJson([...d, 'token', 'create', '--principal', 'bot', '--kind', 'agent'])).token as string;
      const asAgent = await runAlp([...d, 'webhooks', 'add', `${rx.base}/x`, '--events', '*'], { env: { ALP_TOKEN: agent } });
      assert.equal(asAgent.code, 6, asAgent.stderr);
      assert.match(cliErrorText(asAgent.stderr), /FORBIDDEN: manageWebhooks needs a principal of kind human/);
      const remote = await runAlp([...d, 'webhooks', 'list', '--server', 'http://127.0.0.1:9', '--json']);
      assert.equal(remote.code, 2);
      assert.match(cliErrorText(remote.stderr), /runs only on the installation's host/);
      const withCredentials = await runAlp([...d, 'webhooks', 'add', 'https://user:pw@example.com/h', '--events', '*']);
      assert.equal(withCredentials.code, 2);
      assert.match(withCredentials.stderr, /must not carry credentials/);

      const ep = await alpJson([...d, 'webhooks', 'add', `${rx.base}/down`, '--events', 'version.*']);
      const id = (await alpJson([...d, 'artifact', 'create', '--name', 'x', '--file', file])).artifact_id as string;
      await alpJson([...d, 'artifact', 'propose', id]);
      const report = await alpJson([...d, 'webhooks', 'deliver'], { env: { ALP_WEBHOOK_DISABLE_AFTER: '2' } });
      assert.deepEqual(report.disabled, [ep.endpoint_id]);
      assert.equal(report.acknowledged, 2, 'a disabled endpoint no longer holds its events in the outbox');

      const [listed] = (await alpJson([...d, 'webhooks', 'list'])).endpoints as Json[];
      assert.equal(listed?.state, 'DISABLED');
      assert.equal(listed?.disabled_reason, '2 consecutive failed deliveries');
      const changes = (await alpJson([...d, 'webhooks', 'changes'])).events as Json[];
      assert.deepEqual(
        changes.map((c) => [c.seq, c.action, (c.by as Json).id]),
        [
          [1, 'added', `os:${os.userInfo().username}`],
          [2, 'disabled', 'alp:webhook-dispatcher'],
        ],
      );
      assert.doesNotMatch(JSON.stringify(changes), /whsec_/, 'the log never holds a secret');

      const enabled = await alpJson([...d, 'webhooks', 'enable', ep.endpoint_id as string, '--reason', 'receiver fixed']);
      assert.equal((enabled.endpoint as Json).state, 'ACTIVE');
      const removed = await alpJson([...d, 'webhooks', 'remove', ep.endpoint_id as string]);
      assert.equal(removed.removed, ep.endpoint_id);
      assert.deepEqual((await alpJson([...d, 'audit', 'verify'])).webhook_log, { entries: 4, ok: true });
    } finally {
      await rx.close();
    }
  });

  it('alp start delivers from its own loop, with links to its URL', async () => {
    const dir = tempDir('alp-webhooks-serve');
    const data = path.join(dir, 'd');
    const rx = await webhookReceiver(() => 204);
    try {
      await alpJson(['--data', data, 'init']);
      const ep = await alpJson(['--data', data, 'webhooks', 'add', `${rx.base}/hook`, '--events', 'version.created']);
      const token = (await alpJson(['--data', data, 'token', 'create', '--principal', 'bot', '--kind', 'agent'])).token as string;
      const server = await startAlpProcess({ args: ['--data', data], env: { ALP_WEBHOOK_POLL_MS: '100' } });
      try {
        const res = await fetch(`${server.url}/v1/artifacts?name=served&filename=s.sh`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' },
          body: 'echo served\n',
        });
        assert.equal(res.status, 201);
        const { artifact_id } = (await res.json()) as { artifact_id: string };
        const deadline = Date.now() + 20_000;
        while (rx.got.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
        const [g] = rx.got;
        assert.ok(g, 'the server delivered the event');
        const payload = verified(ep.secret as string, g);
        assert.equal(payload.type, 'version.created');
        assert.equal(((payload.data as Json).links as Json).version, `${server.url}/v1/artifacts/${artifact_id}/versions/1`);
      } finally {
        await server.stop();
      }
    } finally {
      await rx.close();
    }
  });

  it('the pieces: back-off bounds, URL and filter validation, deferAll on the outbox, a tampered webhook log', async () => {
    for (const n of [1, 2, 3, 10]) {
      const ceiling = Math.min(3_600_000, 1000 * 2 ** (n - 1));
      assert.equal(
        backoffDelay(n, 1000, 3_600_000, () => 0),
        ceiling / 2,
      );
      assert.equal(
        backoffDelay(n, 1000, 3_600_000, () => 0.999999),
        Math.round(ceiling / 2 + 0.999999 * (ceiling / 2)),
      );
    }
    assert.equal(
      backoffDelay(60, 1000, 3_600_000, () => 1),
      3_600_000,
      'capped',
    );
    assert.throws(() => validateEndpointUrl('ftp://example.com/x'), /http:\/\/ or https:\/\//);
    assert.throws(() => validateEndpointUrl('https://example.com/x#frag'), /fragment/);
    assert.equal(validateEndpointUrl('https://example.com/x?a=1'), 'https://example.com/x?a=1');
    assert.deepEqual(parseEventFilter(['version.*', ' approval.recorded ']), ['approval.recorded', 'version.*']);
    assert.throws(() => parseEventFilter(['version.aproved']), /unknown webhook event type "version.aproved"/);
    assert.throws(() => parseEventFilter(['']), /at least one/);

    const ctx = await embeddedContext();
    const queue = new TelemetryQueue(ctx.items, undefined, { clock: ctx.clock });
    await queue.enqueue('job-1', { n: 1 }, ctx.clock.now());
    const [rec] = await queue.claim(1, 'hooks', ctx.clock.now(), { leaseMs: 1000 });
    assert.ok(rec);
    const [wrong] = await queue.deferAll(1, 'hooks', [{ id: 'job-1', leaseToken: 'nope', delayMs: 60_000 }], ctx.clock.now());
    assert.equal(wrong?.deferred, false);
    const [ok] = await queue.deferAll(1, 'hooks', [{ id: 'job-1', leaseToken: rec.leaseToken, delayMs: 60_000 }], ctx.clock.now());
    assert.equal(ok?.deferred, true);
    ctx.clock.advance(30_000);
    assert.deepEqual(await queue.claim(1, 'hooks', ctx.clock.now()), [], 'past the claim lease, still inside the back-off');
    ctx.clock.advance(30_001);
    const [again] = await queue.claim(1, 'hooks', ctx.clock.now());
    assert.equal(again?.id, 'job-1');
    assert.equal(again?.attempts, 2);

    await addEndpoint(ctx, { url: 'https://example.com/h', events: ['*'] }, { id: 'alice', kind: 'human' });
    assert.equal((await verifyWebhookLog(ctx)).ok, true);
    await ctx.items.update({ PK: WEBHOOKS_PK, SK: webhookLogSk(1) }, { set: { url: 'https://evil.example/h' } });
    const report = await verifyWebhookLog(ctx);
    assert.equal(report.ok, false);
    assert.match(report.findings[0]?.problem ?? '', /hash does not match/);
    await ctx.items.close();
  });
});
