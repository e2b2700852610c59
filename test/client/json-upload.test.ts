/**
 * Small artifacts as JSON (issue 19 A6): `POST /v1/artifacts` and `…/versions` take
 * `{name, filename, content, encoding, …}` with at most 1 MiB of decoded content, under the same
 * digest rule as a raw upload (a wrong `content_hash` stores nothing), raw streaming unchanged; and
 * the client's `createArtifactFromText` / `addVersionFromText` send it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { JSON_CONTENT_LIMIT } from '../../src/api/schemas.ts';
import type { AlpHttpError } from '../../src/client/index.ts';
import { createNodeClient } from '../../src/client/node.ts';
import { sha256 } from '../../src/core/digest.ts';
import { type Harness, startApi } from '../helpers/api-harness.ts';

describe('small artifacts as JSON', () => {
  let h: Harness;
  before(async () => {
    h = await startApi();
  });
  after(async () => {
    await h.close();
  });
  const post = (path: string, json: unknown) => h.call('POST', path, { token: h.tokens.agent, json });
  const named = async (name: string) => (await h.call('GET', `/v1/artifacts?name=${name}`, { token: h.tokens.agent })).json.items.length;

  it('stores utf8 and base64 content as version 1 and the next versions, with the digest of the decoded bytes', async () => {
    const r = await post('/v1/artifacts', { name: 'j1', filename: 'a.sh', content: 'echo ☃\n', kind: 'script', labels: { team: 'ops' } });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.content_hash, sha256('echo ☃\n'));
    assert.equal(r.json.kind, 'script');
    const id = r.json.artifact_id as string;
    const binary = Buffer.from([0, 255, 1, 254, 10]);
    const v2 = await post(`/v1/artifacts/${id}/versions`, { filename: 'b.bin', content: binary.toString('base64'), encoding: 'base64' });
    assert.equal(v2.status, 201, v2.text);
    assert.equal(v2.json.version, 2);
    const bytes = await h.call('GET', `/v1/artifacts/${id}/versions/2/content`, { token: h.tokens.agent });
    assert.ok(bytes.bytes.equals(binary));
    assert.equal((await h.call('GET', `/v1/artifacts/${id}`, { token: h.tokens.agent })).json.labels.team, 'ops');
  });

  it('refuses a wrong content_hash (nothing stored), oversized content (413), bad base64, unknown fields and a query beside JSON', async () => {
    const wrong = await post('/v1/artifacts', { name: 'j-wrong', filename: 'a', content: 'x', content_hash: sha256('y') });
    assert.equal(wrong.status, 400);
    assert.equal(wrong.json.code, 'INTEGRITY');
    assert.equal(await named('j-wrong'), 0);
    const big = await post('/v1/artifacts', { name: 'j-big', filename: 'a', content: 'a'.repeat(JSON_CONTENT_LIMIT + 1) });
    assert.equal(big.status, 413);
    assert.equal(big.json.code, 'TOO_LARGE');
    const atLimit = await post('/v1/artifacts', {
      name: 'j-limit',
      filename: 'a',
      content: Buffer.alloc(JSON_CONTENT_LIMIT, 7).toString('base64'),
      encoding: 'base64',
    });
    assert.equal(atLimit.status, 201, atLimit.text);
    for (const [json, what] of [
      [{ name: 'j', filename: 'a', content: '!!', encoding: 'base64' }, 'bad base64'],
      [{ name: 'j', filename: 'a', content: 'x', surprise: 1 }, 'an unknown field'],
      [{ name: 'j', content: 'x' }, 'no filename'],
      [{ name: 'j', filename: 'a', content: 'x', encoding: 'hex' }, 'an unknown encoding'],
    ] as const) {
      const r = await post('/v1/artifacts', json);
      assert.equal(r.status, 400, `${what}: ${r.text}`);
      assert.equal(r.json.code, 'INVALID', what);
    }
    const both = await post('/v1/artifacts?name=q', { name: 'j', filename: 'a', content: 'x' });
    assert.equal(both.status, 400);
    const notJson = await h.call('POST', '/v1/artifacts', {
      token: h.tokens.agent,
      body: '{',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(notJson.status, 400);
    // Raw bodies still need their query.
    const raw = await h.call('POST', '/v1/artifacts?name=r', { token: h.tokens.agent, body: 'x' });
    assert.equal(raw.status, 400);
    assert.match(raw.json.detail, /filename/);
  });

  it('the client sends it (createArtifactFromText / addVersionFromText), checked and idempotent', async () => {
    const alp = createNodeClient({ url: h.url, token: h.tokens.agent });
    const v = await alp.createArtifactFromText({ name: 'j-client', filename: 'note.md', content: '# hi\n', idempotencyKey: 'k-1' });
    assert.equal(v.content_hash, sha256('# hi\n'));
    const again = await alp.createArtifactFromText({ name: 'j-client', filename: 'note.md', content: '# hi\n', idempotencyKey: 'k-1' });
    assert.equal(again.artifact_id, v.artifact_id, 'the same key replays the first create');
    assert.equal(await named('j-client'), 1);
    const v2 = await alp.addVersionFromText(v.artifact_id, {
      filename: 'note.md',
      content: Buffer.from('# two\n').toString('base64'),
      encoding: 'base64',
    });
    assert.equal(await (await alp.getContent(v.artifact_id, v2.version)).text(), '# two\n');
    const e = await alp
      .createArtifactFromText({ name: 'j-c2', filename: 'a', content: 'x', content_hash: sha256('y') })
      .catch((err: unknown) => err);
    assert.ok(e instanceof Error && (e as AlpHttpError).code === 'INTEGRITY', String(e));
  });

  it('is in the OpenAPI document beside the raw body', async () => {
    const doc = (await h.call('GET', '/openapi.json')).json;
    for (const path of ['/v1/artifacts', '/v1/artifacts/{id}/versions']) {
      const content = doc.paths[path].post.requestBody.content;
      assert.deepEqual(Object.keys(content).sort(), ['application/json', 'application/octet-stream']);
      assert.equal(content['application/json'].schema.properties.encoding.anyOf.length, 2);
    }
  });
});
