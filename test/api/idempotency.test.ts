/**
 * Idempotent creates over HTTP and the CLI (issue 16 item 7): the `Idempotency-Key` header on create
 * and version (a replay answers 201 with the first result and `Idempotent-Replayed: true`; a different
 * request with the key: 422, code CONFLICT, reason idempotency_key_reused), declared in OpenAPI; the CLI
 * flag `--idempotency-key` on `alp artifact create` / `alp artifact version`.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startApi } from '../helpers/api-harness.ts';
import { captureCli, patchCliOutput } from '../helpers/cli-inprocess.ts';
import { embeddedContext } from '../helpers/context.ts';

describe('Idempotency-Key over HTTP', () => {
  it('a retried create or version answers the first result; a different request with the key is 422', async () => {
    const h = await startApi();
    try {
      const post = (url: string, body: string, key?: string) =>
        h.call('POST', url, { token: h.tokens.agent, body, headers: key ? { 'idempotency-key': key } : {} });
      const first = await post('/v1/artifacts?name=idem&filename=a.txt', 'alpha', '"key-1"');
      assert.equal(first.status, 201, first.text);
      assert.equal(first.headers.get('idempotent-replayed'), null);
      const retry = await post('/v1/artifacts?name=idem&filename=a.txt', 'alpha', '"key-1"');
      assert.equal(retry.status, 201);
      assert.equal(retry.headers.get('idempotent-replayed'), 'true');
      assert.equal(retry.json.artifact_id, first.json.artifact_id);
      assert.equal(retry.headers.get('location'), first.headers.get('location'));
      const bare = await post('/v1/artifacts?name=idem&filename=a.txt', 'alpha', 'key-1');
      assert.equal(bare.json.artifact_id, first.json.artifact_id, 'the key unquoted is the same key');
      const changed = await post('/v1/artifacts?name=idem&filename=a.txt', 'beta', '"key-1"');
      assert.equal(changed.status, 422, changed.text);
      assert.equal(changed.json.code, 'CONFLICT');
      assert.equal(changed.json.details.reason, 'idempotency_key_reused');
      const list = await h.call('GET', '/v1/artifacts?name=idem', { token: h.tokens.agent });
      assert.equal(list.json.items.length, 1, 'one artifact');
      const id = first.json.artifact_id as string;
      const v2 = await post(`/v1/artifacts/${id}/versions?filename=a.txt`, 'v2', '"ver-2"');
      const v2again = await post(`/v1/artifacts/${id}/versions?filename=a.txt`, 'v2', '"ver-2"');
      assert.deepEqual([v2.status, v2again.status, v2again.json.version], [201, 201, 2]);
      assert.equal(v2again.headers.get('idempotent-replayed'), 'true');
      const other = await h.call('POST', `/v1/artifacts/${id}/versions?filename=a.txt`, {
        token: h.tokens.service,
        body: 'v2',
        headers: { 'idempotency-key': '"ver-2"' },
      });
      assert.equal(other.status, 403, 'a service may not add versions; its key is not consulted');
      const bad = await post('/v1/artifacts?name=idem&filename=a.txt', 'alpha', '"has space"');
      assert.equal(bad.status, 400);
      const without = await post(`/v1/artifacts/${id}/versions?filename=a.txt`, 'v2');
      assert.equal(without.json.version, 3, 'without a key, a new version as today');
      const doc = (await h.call('GET', '/openapi.json')).json;
      for (const [p, m] of [
        ['/v1/artifacts', 'post'],
        ['/v1/artifacts/{id}/versions', 'post'],
      ] as const) {
        const op = doc.paths[p][m];
        const header = (op.parameters as Array<{ name: string; in: string }>).find(
          (x) => x.in === 'header' && /^idempotency-key$/i.test(x.name),
        );
        assert.ok(header, `${m} ${p} declares Idempotency-Key`);
        assert.ok(op.responses['422'], `${m} ${p} documents 422`);
      }
    } finally {
      await h.close();
    }
  });
});

describe('alp artifact create / version --idempotency-key', () => {
  let restore: () => void;
  before(() => {
    restore = patchCliOutput();
  });
  after(() => restore());

  it('a retried command prints the first result; a different request with the key exits 4', async () => {
    const ctx = await embeddedContext();
    await ctx.items.close();
    const file = path.join(ctx.dir, 'a.sh');
    writeFileSync(file, 'echo a\n');
    const data = ['--data', ctx.dir];
    const run = async (args: string[]) => captureCli([...args, ...data, '--json']);
    const a = await run(['artifact', 'create', '--name', 'cli-idem', '--file', file, '--idempotency-key', 'c-1']);
    assert.equal(a.code, 0, a.stderr);
    const b = await run(['artifact', 'create', '--name', 'cli-idem', '--file', file, '--idempotency-key', 'c-1']);
    assert.equal(b.code, 0, b.stderr);
    assert.equal(JSON.parse(b.stdout).artifact_id, JSON.parse(a.stdout).artifact_id);
    const id = JSON.parse(a.stdout).artifact_id as string;
    const v = await run(['artifact', 'version', id, '--file', file, '--idempotency-key', 'c-2']);
    const v2 = await run(['artifact', 'version', id, '--file', file, '--idempotency-key', 'c-2']);
    assert.deepEqual([JSON.parse(v.stdout).version, JSON.parse(v2.stdout).version], [2, 2]);
    const clash = await run(['artifact', 'create', '--name', 'other-name', '--file', file, '--idempotency-key', 'c-1']);
    assert.equal(clash.code, 4, clash.stderr);
    assert.match(clash.stderr, /CONFLICT/);
    const show = await run(['artifact', 'show', id]);
    assert.equal(JSON.parse(show.stdout).versions.length, 2);
  });
});
