/**
 * Safe retries (issue 19 A2): creates carry an `Idempotency-Key` (generated when not given) and are
 * retried after a 503 with `Retry-After`, through a loopback proxy in front of the real server:
 * refused before reaching the server, or acted on by the server with its answer lost on the way
 * back — either way exactly ONE artifact exists and the retry waited what Retry-After said. Attempts
 * are bounded; a write without a key (a transition) and a stream body are never sent twice.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, beforeEach, describe, it } from 'node:test';
import { AlpHttpError, retryAfterMs } from '../../src/client/index.ts';
import { createNodeClient, streamBody } from '../../src/client/node.ts';
import { type Harness, startApi } from '../helpers/api-harness.ts';
import { type LoopbackProxy, startProxy } from './proxy.ts';

describe('alp/client retries what is safe to send again', () => {
  let h: Harness;
  let proxy: LoopbackProxy;
  let waits: number[];
  const client = () =>
    createNodeClient({
      url: proxy.url,
      token: h.tokens.agent,
      sleep: async (ms) => {
        waits.push(ms);
      },
    });
  before(async () => {
    h = await startApi();
    proxy = await startProxy(h.url);
  });
  beforeEach(() => {
    waits = [];
    proxy.rules.length = 0;
    proxy.seen.length = 0;
  });
  after(async () => {
    await proxy.close();
    await h.close();
  });

  const count = async (name: string) =>
    (await createNodeClient({ url: h.url, token: h.tokens.agent }).listArtifacts({ name })).items.length;

  it('a create refused with 503 + Retry-After is retried after that delay, under the same key: one artifact', async () => {
    proxy.rules.push({ action: 'refuse', method: 'POST', path: /^\/v1\/artifacts$/, times: 1, retryAfter: '2' });
    const v = await client().createArtifact({ name: 'refused-once', filename: 'a.txt' }, 'hello\n');
    assert.equal(v.version, 1);
    assert.deepEqual(waits, [2000]);
    const posts = proxy.seen.filter((s) => s.method === 'POST');
    assert.deepEqual(
      posts.map((s) => s.status),
      [503, 201],
    );
    const keys = posts.map((s) => s.headers['idempotency-key']);
    assert.ok(keys[0] && keys[0] === keys[1], `one generated key for both attempts: ${keys}`);
    assert.equal(await count('refused-once'), 1);
  });

  it('a create the server made but whose answer was lost (503 instead) is replayed, not made twice: one artifact', async () => {
    proxy.rules.push({ action: 'loseAnswer', method: 'POST', path: /^\/v1\/artifacts$/, times: 1, retryAfter: '1' });
    const v = await client().createArtifact({ name: 'lost-answer', filename: 'a.txt', idempotencyKey: 'my-key-1' }, 'hello\n');
    const posts = proxy.seen.filter((s) => s.method === 'POST');
    assert.deepEqual(
      posts.map((s) => [s.status, s.upstreamHeaders?.['idempotent-replayed']]),
      [
        [503, undefined],
        [201, 'true'],
      ],
      'the server made it on the first attempt and replayed it on the second',
    );
    assert.equal(posts[0]?.headers['idempotency-key'], '"my-key-1"');
    assert.deepEqual(waits, [1000]);
    assert.equal(await count('lost-answer'), 1);
    const versions = await createNodeClient({ url: h.url, token: h.tokens.agent }).listVersions(v.artifact_id);
    assert.equal(versions.versions.length, 1);
  });

  it('gives up after the bounded number of attempts with the typed error of the last answer', async () => {
    proxy.rules.push({ action: 'refuse', method: 'GET', path: /^\/v1\/whoami$/, times: 100, retryAfter: '3600' });
    const e = await client()
      .whoami()
      .catch((err: unknown) => err);
    assert.ok(e instanceof AlpHttpError);
    assert.equal(e.code, 'MAINTENANCE');
    assert.equal(e.status, 503);
    assert.equal(proxy.seen.length, 4, 'four attempts in all');
    assert.deepEqual(waits, [30_000, 30_000, 30_000], 'Retry-After is capped');
  });

  it('never sends twice what is not idempotent: a transition, or a create from a stream', async () => {
    const direct = createNodeClient({ url: h.url, token: h.tokens.agent });
    const v = await direct.createArtifact({ name: 'once', filename: 'a.txt' }, 'a');
    proxy.rules.push({ action: 'refuse', method: 'POST', path: /transitions$/, times: 1 });
    await assert.rejects(client().propose(v.artifact_id, 1), (e: unknown) => e instanceof AlpHttpError && e.status === 503);
    assert.equal(proxy.seen.length, 1);
    assert.equal((await direct.showVersion(v.artifact_id, 1)).state, 'DRAFT');

    proxy.seen.length = 0;
    proxy.rules.push({ action: 'refuse', method: 'POST', path: /^\/v1\/artifacts$/, times: 1 });
    await assert.rejects(
      client().createArtifact({ name: 'from-stream', filename: 's.txt' }, streamBody(Readable.from([Buffer.from('s')]))),
    );
    assert.equal(proxy.seen.length, 1);
    assert.deepEqual(waits, []);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    assert.equal(retryAfterMs('7'), 7000);
    assert.equal(retryAfterMs('Wed, 02 Dec 2026 10:00:30 GMT', Date.parse('2026-12-02T10:00:00Z')), 30_000);
    assert.equal(retryAfterMs('soon'), undefined);
    assert.equal(retryAfterMs(null), undefined);
  });
});
