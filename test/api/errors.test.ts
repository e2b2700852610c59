/**
 * Errors and operations: problem+json for every error (404, 405, bad JSON, validation, too large,
 * internal failures without stacks or paths), request ids, the OpenAPI document against the route
 * table, the API page, health, readiness and metrics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Access, ROUTES } from '../../src/api/access.ts';
import { openapiPath } from '../../src/api/openapi.ts';
import { type ApiResponse, type Harness, startApi } from '../helpers/api-harness.ts';

describe('HTTP API: errors, documents and operations', () => {
  let h: Harness;
  before(async () => {
    h = await startApi();
  });
  after(async () => {
    await h.close();
  });

  const problem = (r: ApiResponse, status: number, code: string) => {
    assert.equal(r.status, status);
    assert.equal(r.headers.get('content-type'), 'application/problem+json');
    assert.equal(r.json.status, status);
    assert.equal(r.json.code, code);
    assert.equal(r.json.type, `urn:alp:problem:${code.toLowerCase()}`);
    assert.equal(typeof r.json.title, 'string');
    assert.equal(typeof r.json.detail, 'string');
    assert.equal(typeof r.json.request_id, 'string');
  };

  it('answers unknown routes 404 and wrong methods 405 with Allow', async () => {
    problem(await h.call('GET', '/v2/nothing'), 404, 'NOT_FOUND');
    problem(await h.call('GET', '/v1/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV/nothing', { token: h.tokens.human }), 404, 'NOT_FOUND');
    const del = await h.call('DELETE', '/v1/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV', { token: h.tokens.human });
    problem(del, 405, 'INVALID');
    assert.equal(del.headers.get('allow'), 'GET, HEAD');
    const put = await h.call('PUT', '/v1/artifacts', { token: h.tokens.human, body: 'x' });
    problem(put, 405, 'INVALID');
    assert.equal(put.headers.get('allow'), 'GET, HEAD, POST');
    const outputs = await h.call('DELETE', '/v1/executions/01ARZ3NDEKTSV4RRFFQ69G5FAV/stdout.log');
    assert.equal(outputs.headers.get('allow'), 'GET, HEAD, PUT');
    assert.equal((await h.call('PATCH', '/healthz')).status, 405);
  });

  it('answers bad bodies and parameters 400, oversized JSON 413, other media types 415', async () => {
    const id = (await h.call('POST', '/v1/artifacts?name=e&filename=e.txt', { token: h.tokens.agent, body: 'e' })).json.artifact_id;
    const url = `/v1/artifacts/${id}/versions/1/transitions`;
    const bad = await h.call('POST', url, { token: h.tokens.agent, body: '{"to":', headers: { 'content-type': 'application/json' } });
    problem(bad, 400, 'INVALID');
    const extra = await h.call('POST', url, { token: h.tokens.agent, json: { to: 'PROPOSED', sneaky: true } });
    problem(extra, 400, 'INVALID');
    assert.match(extra.json.detail, /sneaky|Unexpected property/);
    const wrongType = await h.call('POST', url, { token: h.tokens.agent, json: { to: 7 } });
    problem(wrongType, 400, 'INVALID');
    assert.match(wrongType.json.detail, /^body\.to: /);
    problem(await h.call('POST', url, { token: h.tokens.agent }), 400, 'INVALID');
    problem(await h.call('GET', `/v1/artifacts/${id}/versions/0`, { token: h.tokens.agent }), 400, 'INVALID');
    problem(await h.call('GET', '/v1/artifacts?limit=5000', { token: h.tokens.agent }), 400, 'INVALID');
    problem(await h.call('GET', '/v1/artifacts?cursor=bm9wZQ', { token: h.tokens.agent }), 400, 'INVALID');
    problem(await h.call('POST', '/v1/artifacts?name=x&filename=..', { token: h.tokens.agent, body: 'x' }), 400, 'INVALID');
    problem(await h.call('POST', '/v1/artifacts?name=x&filename=metadata.json', { token: h.tokens.agent, body: 'x' }), 400, 'INVALID');
    problem(
      await h.call('POST', url, {
        token: h.tokens.agent,
        body: JSON.stringify({ to: 'x'.repeat(2 * 1024 * 1024) }),
        headers: { 'content-type': 'application/json' },
      }),
      413,
      'TOO_LARGE',
    );
    problem(
      await h.call('POST', url, { token: h.tokens.agent, body: '<to/>', headers: { 'content-type': 'application/xml' } }),
      415,
      'INVALID',
    );
  });

  it('echoes a well-formed X-Request-Id and names it in problems and logs', async () => {
    const r = await h.call('GET', '/v1/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV', {
      token: h.tokens.human,
      headers: { 'x-request-id': 'trace-42' },
    });
    assert.equal(r.headers.get('x-request-id'), 'trace-42');
    assert.equal(r.json.request_id, 'trace-42');
    assert.ok(h.logs.some((l) => l.reqId === 'trace-42' && l.msg === 'request completed' && l.status === '404' && l.principal === 'alice'));
    const odd = await h.call('GET', '/healthz', { headers: { 'x-request-id': '../../etc/passwd' } });
    assert.notEqual(odd.headers.get('x-request-id'), '../../etc/passwd');
  });

  it('serves an OpenAPI 3.1 document that covers the route table', async () => {
    const doc = (await h.call('GET', '/openapi.json')).json;
    assert.equal(doc.openapi, '3.1.0');
    assert.deepEqual(doc.components.securitySchemes.bearer, { type: 'http', scheme: 'bearer', description: 'an ALP token (alp_…)' });
    assert.ok(doc.components.schemas.Problem);
    for (const [id, spec] of Object.entries(ROUTES)) {
      const op = doc.paths[openapiPath(spec.url)]?.[spec.method.toLowerCase()];
      assert.ok(op, `${spec.method} ${spec.url} is documented`);
      assert.equal(op.operationId, id);
      const access = spec.access as Access;
      assert.deepEqual(op['x-alp-principal-kinds'], access === 'public' ? [] : [...access]);
      assert.deepEqual(op.security, access === 'public' ? [] : [{ bearer: [] }]);
      if (access !== 'public') assert.ok(op.responses['401'] && op.responses['403']);
    }
    const ops = Object.values(doc.paths as Record<string, Record<string, unknown>>).flatMap((p) => Object.keys(p));
    assert.equal(ops.length, Object.keys(ROUTES).length, 'nothing undocumented, nothing extra');
    const create = doc.paths['/v1/artifacts'].post;
    assert.ok(create.requestBody.content['application/octet-stream']);
    assert.equal(create.responses['201'].content['application/json'].schema.$ref, '#/components/schemas/Version');
    assert.ok(create.responses['413']);
    const content = doc.paths['/v1/artifacts/{id}/versions/{v}/content'].get;
    assert.ok(content.responses['200'].content['application/octet-stream']);
    assert.ok(content.responses['206'] && content.responses['416']);
    const decide = doc.paths['/v1/artifacts/{id}/versions/{v}/approvals'].post;
    assert.deepEqual(decide['x-alp-principal-kinds'], ['human']);
    assert.ok(decide.requestBody.content['application/json'].schema.properties.evidence_ref);
  });

  it('serves a readable API page', async () => {
    const r = await h.call('GET', '/docs');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/html/);
    for (const spec of Object.values(ROUTES)) assert.ok(r.text.includes(`<code>${openapiPath(spec.url)}</code>`), spec.url);
    assert.match(r.text, /UNAUTHENTICATED/);
  });

  it('answers health, readiness and metrics', async () => {
    assert.deepEqual((await h.call('GET', '/healthz')).json, { status: 'ok' });
    const ready = (await h.call('GET', '/readyz')).json;
    assert.equal(ready.status, 'ready');
    assert.equal(ready.metadata, 'sqlite');
    assert.equal(ready.content, 'fs');
    const m = await h.call('GET', '/metrics');
    assert.match(m.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    for (const name of [
      'alp_http_requests_total',
      'alp_http_request_duration_seconds',
      'alp_http_request_body_bytes_total',
      'alp_http_response_body_bytes_total',
      'alp_integrity_failures_total',
      'alp_transitions_total',
      'alp_uploads_in_flight',
    ]) {
      assert.match(m.text, new RegExp(`# TYPE ${name} `), name);
    }
    assert.match(m.text, /alp_http_requests_total\{method="GET",route="\/healthz",status="200"\} \d+/);
  });
});

describe('HTTP API: internal failures', () => {
  it('answers 500 INTERNAL without the message, stack or paths, logs the error, and readiness turns 503', async () => {
    const h = await startApi();
    try {
      await h.ctx.items.close();
      const r = await h.call('GET', '/v1/artifacts', { token: h.tokens.human });
      assert.equal(r.status, 500);
      assert.equal(r.headers.get('content-type'), 'application/problem+json');
      assert.equal(r.json.code, 'INTERNAL');
      assert.doesNotMatch(r.text, /\/tmp|\/work|at [\w.]+ \(|database|sqlite/i);
      assert.match(r.json.detail, new RegExp(r.json.request_id));
      const logged = h.logs.find((l) => l.reqId === r.json.request_id && l.level === 50);
      assert.ok(logged && typeof (logged.err as { stack?: string }).stack === 'string', 'the log has the error with its stack');
      const ready = await h.call('GET', '/readyz');
      assert.equal(ready.status, 503);
      assert.equal(ready.headers.get('content-type'), 'application/problem+json');
      assert.doesNotMatch(ready.text, /\/tmp|\/work/);
      assert.equal((await h.call('GET', '/healthz')).status, 200);
    } finally {
      await h.server.shutdown(100);
      await h.ctx.content.close();
    }
  });

  it('a failing disk is a 503 STORAGE that says what failed, with Retry-After, logged as an error', async () => {
    const h = await startApi();
    try {
      // The one fault a test cannot produce for real here: the disk answering EIO.
      const items = h.ctx.items as unknown as { query: (...a: unknown[]) => Promise<unknown> };
      items.query = async () => {
        throw Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO', errno: -5 });
      };
      const r = await h.call('GET', '/v1/artifacts', { token: h.tokens.human });
      assert.equal(r.status, 503);
      assert.equal(r.headers.get('content-type'), 'application/problem+json');
      assert.equal(r.headers.get('retry-after'), '1');
      assert.equal(r.json.code, 'STORAGE');
      assert.equal(r.json.detail, 'storage failure: EIO (input/output error)');
      assert.ok(h.logs.some((l) => l.reqId === r.json.request_id && l.level === 50));
    } finally {
      await h.server.shutdown(100);
      await h.ctx.items.close();
      await h.ctx.content.close();
    }
  });
});
