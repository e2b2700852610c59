/**
 * The telemetry CLI in child processes: init with limits (and a conflicting reopen refused), stats,
 * claim, ack, custom enqueue, and the example exporter (`drain`) to stdout and to a loopback HTTP
 * receiver (a failing receiver leaves the records unacknowledged).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { describe, it } from 'node:test';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { tempDir } from '../helpers/tmp.ts';

type Json = Record<string, unknown>;

async function receiver(status: () => number): Promise<{ url: string; bodies: string[]; close(): Promise<void> }> {
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(status()).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/ingest`,
    bodies,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('alp telemetry', () => {
  it('init persists limits and refuses a conflicting reopen; stats, claim, ack, enqueue and drain work end to end', async () => {
    const dir = tempDir('alp-telq-cli');
    const data = path.join(dir, 'd');
    const file = path.join(dir, 'x.sh');
    fs.writeFileSync(file, 'echo x\n');
    const env = { ALP_NOW: '2026-05-04T10:00:00.000Z' };
    const run = (args: string[], extra: Record<string, string> = {}) => alpJson([...args, '--data', data], { env: { ...env, ...extra } });
    const raw = (args: string[], extra: Record<string, string> = {}) => runAlp([...args, '--data', data], { env: { ...env, ...extra } });

    const init = await run(['init'], { ALP_TELEMETRY_MAX_RECORDS: '3' });
    assert.deepEqual(init.telemetry_limits, { maxRecords: 3, maxBytes: 8388608, maxAttempts: 5 });
    const conflict = await raw(['telemetry', 'stats'], { ALP_TELEMETRY_MAX_RECORDS: '30' });
    assert.equal(conflict.code, 4);
    assert.match(
      conflict.stderr,
      /^alp: CONFLICT: the telemetry queue was initialised with different limits: max_records 3 \(asked for 30\)/m,
    );
    const widen = await raw(['telemetry', 'init', '--max-records', '1000']);
    assert.equal(widen.code, 4, 'an explicit init cannot widen the limits either');

    for (let i = 0; i < 4; i++) await run(['artifact', 'create', '--name', `a${i}`, '--file', file]);
    let stats = await run(['telemetry', 'stats']);
    assert.deepEqual([stats.accepted, stats.dropped, stats.live_records], [3, 1, 3]);
    const human = await raw(['telemetry', 'stats']);
    assert.match(human.stdout, /dropped\s+1/);

    const claimed = (await run(['telemetry', 'claim', '--owner', 'cli-o', '--epoch', '1', '--max-records', '2'])).records as Json[];
    assert.equal(claimed.length, 2);
    const stale = await raw([
      'telemetry',
      'ack',
      '--owner',
      'cli-o',
      '--epoch',
      '2',
      '--id',
      claimed[0]?.id as string,
      '--lease-token',
      'x',
    ]);
    assert.equal(stale.code, 4);
    assert.match(stale.stderr, /^alp: STALE_EPOCH: /m);
    const wrong = await raw([
      'telemetry',
      'ack',
      '--owner',
      'cli-o',
      '--epoch',
      '1',
      '--id',
      claimed[0]?.id as string,
      '--lease-token',
      'nope',
    ]);
    assert.equal(wrong.code, 4);
    assert.match(wrong.stderr, /lease token does not match/);
    await run([
      'telemetry',
      'ack',
      '--owner',
      'cli-o',
      '--epoch',
      '1',
      '--id',
      claimed[0]?.id as string,
      '--lease-token',
      claimed[0]?.leaseToken as string,
    ]);
    const tooSmall = await raw(['telemetry', 'claim', '--owner', 'cli-o', '--epoch', '1', '--max-bytes', '10']);
    assert.equal(tooSmall.code, 2);
    assert.match(tooSmall.stderr, /^alp: INVALID: maxBytes 10 is smaller than the oldest available record/m);

    assert.equal((await run(['telemetry', 'enqueue', '--id', 'host.1', '--payload', '{"k":"v"}'])).status, 'accepted');
    assert.equal((await run(['telemetry', 'enqueue', '--id', 'host.1', '--payload', '{"k":"v"}'])).status, 'duplicate');
    const changed = await raw(['telemetry', 'enqueue', '--id', 'host.1', '--payload', '{"k":"w"}']);
    assert.equal(changed.code, 4);

    // drain to stdout: one JSON line per record, acknowledged (the lease of claimed[1] is still held,
    // so it is not available yet).
    const out = await raw(['telemetry', 'drain', '--to', 'stdout', '--owner', 'drainer']);
    assert.equal(out.code, 0, out.stderr);
    const lines = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Json);
    assert.equal(lines.length, 2);
    assert.equal(lines[0]?.kind, 'audit');
    assert.ok(lines[0]?.id !== claimed[0]?.id && lines[0]?.id !== claimed[1]?.id, 'the third audit record, not a leased one');
    assert.equal(lines[1]?.id, 'host.1');
    assert.deepEqual(Object.keys(lines[0]?.payload as Json).sort(), ['aggregate_id', 'event_id', 'timestamp', 'type']);
    assert.match(out.stderr, /drained 2 record\(s\) in 1 batch/);
    stats = await run(['telemetry', 'stats']);
    assert.deepEqual([stats.delivered, stats.live_records], [3, 1]);

    // After the lease expires, drain to a loopback HTTP receiver; a failing receiver acknowledges nothing.
    const later = { ALP_NOW: '2026-05-04T10:05:00.000Z' };
    let answer = 500;
    const rx = await receiver(() => answer);
    try {
      const failed = await raw(['telemetry', 'drain', '--to', rx.url, '--lease-ms', '1000'], later);
      assert.equal(failed.code, 1);
      assert.match(failed.stderr, /answered HTTP 500; the batch was not acknowledged/);
      assert.equal((await run(['telemetry', 'stats'])).delivered, 3);
      answer = 204;
      const ok = await alpJson(['telemetry', 'drain', '--to', rx.url, '--data', data], { env: { ALP_NOW: '2026-05-04T10:06:00.000Z' } });
      assert.deepEqual([ok.batches, ok.delivered], [1, 1]);
      assert.equal(rx.bodies.length, 2);
      const [first, second] = rx.bodies.map((b) => JSON.parse(b.trim()) as Json);
      assert.equal(second?.id, first?.id, 'the same stable id is redelivered');
      assert.equal(second?.attempt, (first?.attempt as number) + 1);
    } finally {
      await rx.close();
    }
    const remote = await raw(['telemetry', 'drain', '--to', 'http://203.0.113.5/x']);
    assert.equal(remote.code, 2);
    assert.match(remote.stderr, /only posts to a loopback/);
    stats = await run(['telemetry', 'stats']);
    assert.deepEqual([stats.accepted, stats.delivered, stats.live_records, stats.live_bytes], [4, 4, 0, 0]);
  });
});
