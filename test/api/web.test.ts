/**
 * The web UI's static files at `/`: index.html for `/` and the client routes (CSP, revalidated),
 * hashed assets immutable with their content types, ETag/304, HEAD; nothing outside the build is
 * reachable (traversal, encoded dots, symlinks); the API's own routes and its problem+json 404s are
 * untouched, and the UI is not in the OpenAPI document. Without a build, `/` says how to make one.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CLIENT_ROUTES, WEB_CSP } from '../../src/api/web.ts';
import { type Harness, startApi } from '../helpers/api-harness.ts';
import { tempDir } from '../helpers/tmp.ts';

function fakeBuild(): string {
  const root = tempDir('alp-web');
  fs.mkdirSync(path.join(root, 'assets'));
  fs.writeFileSync(
    path.join(root, 'index.html'),
    '<!doctype html><title>ALP</title><script type="module" src="/assets/app-1a2b3c.js"></script>',
  );
  fs.writeFileSync(path.join(root, 'assets', 'app-1a2b3c.js'), 'console.log("app")\n');
  fs.writeFileSync(path.join(root, 'assets', 'app-1a2b3c.css'), 'body{margin:0}\n');
  fs.writeFileSync(path.join(root, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  fs.writeFileSync(path.join(root, 'assets', 'notes.unknownext'), 'not served: no known type');
  const secret = path.join(tempDir('alp-secret'), 'secret.js');
  fs.writeFileSync(secret, 'the secret');
  fs.symlinkSync(secret, path.join(root, 'assets', 'linked.js'));
  return root;
}

describe('HTTP: the web UI served at /', () => {
  let h: Harness;
  before(async () => {
    h = await startApi({ webRoot: fakeBuild() });
  });
  after(async () => {
    await h.close();
  });

  it('answers index.html for / and every client route, with a strict CSP and revalidation', async () => {
    for (const p of [
      '/',
      '/artifacts',
      '/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV',
      '/artifacts/x/versions/2',
      '/runs/R/stdout.log',
      '/operations',
      '/signin',
    ]) {
      const r = await h.call('GET', `${p}?state=PROPOSED`);
      assert.equal(r.status, 200, p);
      assert.equal(r.headers.get('content-type'), 'text/html; charset=utf-8', p);
      assert.match(r.text, /<title>ALP<\/title>/);
      assert.equal(r.headers.get('cache-control'), 'no-cache');
      assert.equal(r.headers.get('content-security-policy'), WEB_CSP);
      assert.equal(r.headers.get('x-frame-options'), 'DENY');
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
      assert.ok(r.headers.get('etag'));
    }
    assert.ok(CLIENT_ROUTES.length >= 5);
  });

  it('serves hashed assets immutable with their content types, with ETag, 304 and HEAD', async () => {
    const js = await h.call('GET', '/assets/app-1a2b3c.js');
    assert.equal(js.status, 200);
    assert.equal(js.headers.get('content-type'), 'text/javascript; charset=utf-8');
    assert.equal(js.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal(js.text, 'console.log("app")\n');
    const css = await h.call('GET', '/assets/app-1a2b3c.css');
    assert.equal(css.headers.get('content-type'), 'text/css; charset=utf-8');
    const icon = await h.call('GET', '/favicon.svg');
    assert.equal(icon.status, 200);
    assert.equal(icon.headers.get('content-type'), 'image/svg+xml');
    assert.equal(icon.headers.get('cache-control'), 'no-cache');
    const etag = js.headers.get('etag') as string;
    const again = await h.call('GET', '/assets/app-1a2b3c.js', { headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
    assert.equal(again.bytes.length, 0);
    const head = await h.call('HEAD', '/assets/app-1a2b3c.js');
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(Buffer.byteLength('console.log("app")\n')));
  });

  it('serves nothing outside the build: traversal, encoded dots, symlinks, unknown types', async () => {
    for (const p of [
      '/assets/../index.html',
      '/assets/%2e%2e/index.html',
      '/assets/..%2f..%2fpackage.json',
      '/assets/%2e%2e%2f%2e%2e%2fpackage.json',
      '/assets/linked.js',
      '/assets/notes.unknownext',
      '/assets/',
      '/assets/missing.js',
      '/assets/app-1a2b3c.js/..',
      '/index.html/../../package.json',
      '/package.json',
      '/../package.json',
      '/%2e%2e/package.json',
    ]) {
      const r = await h.call('GET', p);
      assert.notEqual(r.status, 200, p);
      assert.ok(!r.text.includes('the secret') && !r.text.includes('"name": "alp"'), p);
      if (r.status === 404) assert.equal(r.headers.get('content-type'), 'application/problem+json', p);
    }
  });

  it('leaves the API alone: /v1 routes, problem+json 404s, operations routes, OpenAPI', async () => {
    const who = await h.call('GET', '/v1/whoami', { token: h.tokens.human });
    assert.equal(who.status, 200);
    for (const p of ['/v1/nothing', '/v1/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV/nothing', '/v1', '/v2/artifacts', '/nothing']) {
      const r = await h.call('GET', p, { token: h.tokens.human });
      assert.equal(r.status, 404, p);
      assert.equal(r.headers.get('content-type'), 'application/problem+json', p);
      assert.equal(r.json.code, 'NOT_FOUND', p);
    }
    assert.equal((await h.call('GET', '/healthz')).json.status, 'ok');
    assert.match((await h.call('GET', '/metrics')).text, /alp_http_requests_total/);
    assert.match((await h.call('GET', '/docs')).headers.get('content-type') ?? '', /^text\/html/);
    const doc = (await h.call('GET', '/openapi.json')).json;
    const paths = Object.keys(doc.paths);
    assert.ok(!paths.some((p) => p === '/' || p.startsWith('/assets') || p.startsWith('/artifacts') || p === '/favicon.svg'), paths.join());
    // A POST to the UI's paths is not a route.
    const post = await h.call('POST', '/artifacts/x', { json: {} });
    assert.ok(post.status === 404 || post.status === 405);
    assert.equal(post.headers.get('content-type'), 'application/problem+json');
  });

  it('labels the UI’s requests in the metrics without one series per file', async () => {
    await h.call('GET', '/artifacts/a');
    await h.call('GET', '/artifacts/b');
    const metrics = (await h.call('GET', '/metrics')).text;
    assert.match(metrics, /alp_http_requests_total\{method="GET",route="\/",status="200"\} \d+/);
    assert.match(metrics, /alp_http_requests_total\{method="GET",route="\/assets\/\*",status="200"\} \d+/);
  });
});

describe('HTTP: the web UI before it is built', () => {
  it('answers / with a 404 problem that says how to build it, and the API still works', async () => {
    const h = await startApi({ webRoot: tempDir('alp-empty-web') });
    try {
      const r = await h.call('GET', '/');
      assert.equal(r.status, 404);
      assert.equal(r.headers.get('content-type'), 'application/problem+json');
      assert.match(r.json.detail, /npm run build/);
      assert.equal((await h.call('GET', '/v1/whoami', { token: h.tokens.agent })).status, 200);
    } finally {
      await h.close();
    }
  });

  it('can be turned off', async () => {
    const h = await startApi({ webRoot: false });
    try {
      assert.equal((await h.call('GET', '/')).status, 404);
      assert.equal((await h.call('GET', '/artifacts')).status, 404);
    } finally {
      await h.close();
    }
  });
});
