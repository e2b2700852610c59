/**
 * Streaming transfer over real HTTP: client digests (a mismatch keeps nothing), the size limit, Range
 * responses, conditional requests, and corrupted objects, which are never delivered as a complete 200.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { listAll } from '../../src/content/content-store.ts';
import { sha256, toStructuredDigest } from '../../src/core/digest.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { startExecution } from '../../src/lifecycle/executions.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { expectStatus, type Harness, startApi } from '../helpers/api-harness.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, approveAndRun } from '../helpers/walk.ts';

interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  complete: boolean;
  error?: string;
}

/** A GET with node:http, reporting whether the response completed or was aborted. */
function rawRequest(url: string, opts: { method?: string; headers?: Record<string, string>; body?: Buffer } = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: opts.method ?? 'GET', headers: opts.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let error: string | undefined;
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (e) => {
        error = e.message;
      });
      res.on('close', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks),
          complete: res.complete,
          ...(error ? { error } : {}),
        }),
      );
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

function tempFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...tempFiles(p));
    else if (e.name.startsWith('.alp-tmp-')) out.push(p);
  }
  return out;
}

async function keys(h: Harness, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const o of listAll(h.ctx.content, prefix)) out.push(o.key);
  return out;
}

describe('HTTP API: client digests', () => {
  let h: Harness;
  before(async () => {
    h = await startApi();
  });
  after(async () => {
    await h.close();
  });

  it('a wrong Repr-Digest on a new artifact stores nothing (400 INTEGRITY)', async () => {
    const body = randomBytes(300_000);
    const r = await h.call('POST', '/v1/artifacts?name=digest-check&filename=blob.bin', {
      token: h.tokens.agent,
      body,
      headers: { 'repr-digest': toStructuredDigest(sha256('something else')) },
    });
    assert.equal(r.status, 400);
    assert.equal(r.headers.get('content-type'), 'application/problem+json');
    assert.equal(r.json.code, 'INTEGRITY');
    assert.equal(r.json.details.expected, sha256('something else'));
    assert.deepEqual(await keys(h, 'artifacts/'), []);
    assert.deepEqual(tempFiles(h.ctx.contentRoot), []);
    const listed = await h.call('GET', '/v1/artifacts?name=digest-check', { token: h.tokens.agent });
    assert.deepEqual(listed.json.items, []);
    const metrics = (await h.call('GET', '/metrics')).text;
    assert.match(metrics, /alp_integrity_failures_total\{operation="upload",cause="client_digest"\} 1/);

    const good = await h.call('POST', '/v1/artifacts?name=digest-check&filename=blob.bin', {
      token: h.tokens.agent,
      body,
      headers: { 'content-digest': toStructuredDigest(sha256(body)) },
    });
    assert.equal(good.status, 201);
    assert.equal(good.json.content_hash, sha256(body));
  });

  it('a wrong digest on a new version, a compensation or an execution output stores nothing; a retry succeeds at once', async () => {
    const { version } = await createArtifact(h.ctx, agent, { name: 'd2', filename: 'a.sh', body: bytesOf('a\n') });
    const id = version.artifact_id;
    const wrong = { 'repr-digest': toStructuredDigest(sha256('nope')) };
    const v = await h.call('POST', `/v1/artifacts/${id}/versions?filename=a.sh`, { token: h.tokens.agent, body: 'b\n', headers: wrong });
    assert.equal(v.status, 400);
    assert.equal(v.json.code, 'INTEGRITY');
    const shown = await h.call('GET', `/v1/artifacts/${id}/versions`, { token: h.tokens.agent });
    assert.deepEqual(
      shown.json.versions.map((x: { version: number }) => x.version),
      [1],
    );
    assert.deepEqual(await keys(h, `artifacts/${id}/`), [`artifacts/${id}/v1/a.sh`, `artifacts/${id}/v1/metadata.json`]);

    await approveAndRun(h.ctx, id, 1, 'SUCCEEDED', false);
    const c = await h.call('POST', `/v1/artifacts/${id}/versions/1/compensations?filename=undo.sh`, {
      token: h.tokens.agent,
      body: 'undo\n',
      headers: wrong,
    });
    assert.equal(c.status, 400);
    assert.equal((await h.call('GET', `/v1/artifacts/${id}/versions/1`, { token: h.tokens.agent })).json.state, 'EXECUTED');
    assert.deepEqual(await keys(h, `artifacts/${id}/`), [`artifacts/${id}/v1/a.sh`, `artifacts/${id}/v1/metadata.json`]);

    const { version: other } = await createArtifact(h.ctx, agent, { name: 'd3', filename: 'b.sh', body: bytesOf('b\n') });
    await propose(h.ctx, agent, other.artifact_id, 1);
    await decide(h.ctx, { id: 'alice', kind: 'human' }, other.artifact_id, 1, { decision: 'APPROVE', evidenceRef: 'x' });
    const run = (await startExecution(h.ctx, agent, other.artifact_id, 1)).run_id;
    const bad = await h.call('PUT', `/v1/executions/${run}/stdout.log`, { token: h.tokens.agent, body: 'log\n', headers: wrong });
    assert.equal(bad.status, 400);
    assert.deepEqual(await keys(h, `executions/${run}/`), []);
    const shownRun = await h.call('GET', `/v1/executions/${run}`, { token: h.tokens.agent });
    assert.deepEqual(shownRun.json.outputs, {});
    assert.equal(shownRun.json.uploads_in_progress, undefined, 'the failed upload released its reservation');
    const retry = await h.call('PUT', `/v1/executions/${run}/stdout.log`, {
      token: h.tokens.agent,
      body: 'log\n',
      headers: { 'repr-digest': toStructuredDigest(sha256('log\n')) },
    });
    assert.equal(retry.status, 201, retry.text);
    assert.equal(retry.json.digest, sha256('log\n'));
    assert.deepEqual(tempFiles(h.ctx.contentRoot), []);
  });

  it('refuses malformed or disagreeing digest headers and content codings before storing anything', async () => {
    const cases: Array<[Record<string, string>, number]> = [
      [{ 'repr-digest': 'sha-256=:not base64!:' }, 400],
      [{ 'repr-digest': `sha-256=:${Buffer.alloc(16).toString('base64')}:` }, 400],
      [{ 'repr-digest': `sha-512=:${Buffer.alloc(64).toString('base64')}:` }, 400],
      [{ 'repr-digest': toStructuredDigest(sha256('x')), 'content-digest': toStructuredDigest(sha256('y')) }, 400],
      [{ 'content-encoding': 'gzip' }, 415],
    ];
    for (const [headers, status] of cases) {
      const r = await h.call('POST', '/v1/artifacts?name=hdr&filename=x', { token: h.tokens.agent, body: 'x', headers });
      assert.equal(r.status, status, JSON.stringify(headers));
      assert.equal(r.headers.get('content-type'), 'application/problem+json');
      assert.equal(r.json.code, 'INVALID');
    }
    const listed = await h.call('GET', '/v1/artifacts?name=hdr', { token: h.tokens.agent });
    assert.deepEqual(listed.json.items, []);
  });
});

describe('HTTP API: upload size limit', () => {
  let h: Harness;
  const limit = 1024 * 1024;
  before(async () => {
    h = await startApi({ maxUploadBytes: limit });
  });
  after(async () => {
    await h.close();
  });

  it('answers 413 TOO_LARGE from Content-Length, keeps nothing, and accepts exactly the limit', async () => {
    const r = await rawRequest(`${h.url}/v1/artifacts?name=big&filename=big.bin`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.tokens.agent}`, 'content-type': 'application/octet-stream' },
      body: Buffer.alloc(limit + 1),
    }).catch((e: Error) => ({ status: -1, error: e.message }) as RawResponse);
    assert.equal(r.status, 413, JSON.stringify(r.error));
    assert.equal(r.headers['content-type'], 'application/problem+json');
    assert.equal(JSON.parse(r.body.toString()).code, 'TOO_LARGE');
    const exact = await h.call('POST', '/v1/artifacts?name=exact&filename=exact.bin', {
      token: h.tokens.agent,
      body: Buffer.alloc(limit, 1),
    });
    assert.equal(exact.status, 201);
    assert.equal(exact.json.size, limit);
  });

  it('stops a chunked upload at the limit with 413 and removes its temp file', async () => {
    const status = await new Promise<number>((resolve) => {
      const req = http.request(`${h.url}/v1/artifacts?name=chunked&filename=c.bin`, {
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${h.tokens.agent}`, 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' },
      });
      let sent = 0;
      const chunk = Buffer.alloc(64 * 1024, 2);
      const pump = () => {
        while (sent < 4 * limit) {
          sent += chunk.length;
          if (!req.write(chunk)) {
            req.once('drain', pump);
            return;
          }
        }
        req.end();
      };
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', () => resolve(-1));
      pump();
    });
    assert.ok(status === 413 || status === -1, `status ${status}`);
    assert.equal(status, 413);
    const listed = await h.call('GET', '/v1/artifacts?name=chunked', { token: h.tokens.agent });
    assert.deepEqual(listed.json.items, []);
    for (let i = 0; i < 50 && tempFiles(h.ctx.contentRoot).length; i++) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(tempFiles(h.ctx.contentRoot), []);
    assert.equal((await h.call('GET', '/healthz')).status, 200);
  });
});

describe('HTTP API: verified downloads', () => {
  let h: Harness;
  let big: Buffer;
  let bigId: string;
  let smallId: string;
  const small = Buffer.from('0123456789');
  before(async () => {
    h = await startApi();
    big = randomBytes(3 * 1024 * 1024 + 12_345);
    bigId = expectStatus(await h.call('POST', '/v1/artifacts?name=big&filename=big.bin', { token: h.tokens.agent, body: big }), 201).json
      .artifact_id;
    smallId = expectStatus(await h.call('POST', '/v1/artifacts?name=small&filename=s.txt', { token: h.tokens.agent, body: small }), 201)
      .json.artifact_id;
  });
  after(async () => {
    await h.close();
  });

  const expected = (header: string, size: number): { status: number; start?: number; end?: number } => {
    const m = /^bytes=(\d*)-(\d*)$/.exec(header);
    if (!m) return { status: 200 };
    const [a, b] = [m[1] as string, m[2] as string];
    if (a === '' && b === '') return { status: 200 };
    if (a === '') {
      const n = Number(b);
      if (n === 0) return { status: 416 };
      return { status: 206, start: Math.max(0, size - n), end: size - 1 };
    }
    const start = Number(a);
    if (b !== '' && Number(b) < start) return { status: 200 };
    if (start >= size) return { status: 416 };
    return { status: 206, start, end: b === '' ? size - 1 : Math.min(Number(b), size - 1) };
  };

  it('answers Range requests with the right status, bytes and headers (property)', async () => {
    for (const [id, blob, runs] of [
      [bigId, big, 40],
      [smallId, small, 60],
    ] as const) {
      const size = blob.length;
      const pos = fc.oneof(fc.integer({ min: 0, max: size + 5 }), fc.constantFrom(0, size - 1, size, 1024 * 1024 - 1, 1024 * 1024));
      const header = fc.oneof(
        fc.tuple(pos, pos).map(([a, b]) => `bytes=${a}-${b}`),
        pos.map((a) => `bytes=${a}-`),
        pos.map((n) => `bytes=-${n}`),
        fc.constantFrom('bytes=0-1,4-5', 'items=0-3', 'bytes=x-y', 'bytes=-', 'bytes=5'),
      );
      await fc.assert(
        fc.asyncProperty(header, async (range) => {
          const r = await h.call('GET', `/v1/artifacts/${id}/versions/1/content`, { token: h.tokens.service, headers: { range } });
          const want = expected(range, size);
          assert.equal(r.status, want.status, range);
          if (want.status === 416) {
            assert.equal(r.headers.get('content-range'), `bytes */${size}`);
            assert.equal(r.headers.get('content-type'), 'application/problem+json');
            return;
          }
          assert.equal(r.headers.get('etag'), `"${sha256(blob)}"`);
          assert.equal(r.headers.get('repr-digest'), toStructuredDigest(sha256(blob)));
          if (want.status === 200) {
            assert.ok(r.bytes.equals(blob));
            assert.equal(r.headers.get('content-length'), String(size));
            return;
          }
          const slice = blob.subarray(want.start, (want.end as number) + 1);
          assert.ok(r.bytes.equals(slice), `${range}: ${r.bytes.length} bytes vs ${slice.length}`);
          assert.equal(r.headers.get('content-length'), String(slice.length));
          assert.equal(r.headers.get('content-range'), `bytes ${want.start}-${want.end}/${size}`);
        }),
        { numRuns: runs },
      );
    }
  });

  it('honours If-Range, If-None-Match and HEAD', async () => {
    const etag = `"${sha256(big)}"`;
    const stale = await h.call('GET', `/v1/artifacts/${bigId}/versions/1/content`, {
      token: h.tokens.service,
      headers: { range: 'bytes=0-9', 'if-range': '"sha256:0000"' },
    });
    assert.equal(stale.status, 200);
    assert.equal(stale.bytes.length, big.length);
    const fresh = await h.call('GET', `/v1/artifacts/${bigId}/versions/1/content`, {
      token: h.tokens.service,
      headers: { range: 'bytes=0-9', 'if-range': etag },
    });
    assert.equal(fresh.status, 206);
    assert.ok(fresh.bytes.equals(big.subarray(0, 10)));
    const cached = await h.call('GET', `/v1/artifacts/${bigId}/versions/1/content`, {
      token: h.tokens.service,
      headers: { 'if-none-match': etag },
    });
    assert.equal(cached.status, 304);
    assert.equal(cached.bytes.length, 0);
    const head = await h.call('HEAD', `/v1/artifacts/${bigId}/versions/1/content`, { token: h.tokens.service });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(big.length));
    assert.equal(head.headers.get('etag'), etag);
    const headRange = await h.call('HEAD', `/v1/artifacts/${bigId}/versions/1/content`, {
      token: h.tokens.service,
      headers: { range: 'bytes=-5' },
    });
    assert.equal(headRange.status, 206);
    assert.equal(headRange.headers.get('content-range'), `bytes ${big.length - 5}-${big.length - 1}/${big.length}`);
  });

  it('never delivers a corrupted object as a complete 200: small objects get a 502 problem, large ones an aborted response', async () => {
    const corrupt = (id: string, key: string, at: (size: number) => number) => {
      const file = path.join(h.ctx.contentRoot, key);
      const bytes = fs.readFileSync(file);
      const i = at(bytes.length);
      bytes[i] = ((bytes[i] as number) + 1) % 256;
      fs.writeFileSync(file, bytes);
      return `${h.url}/v1/artifacts/${id}/versions/1/content`;
    };
    const auth = { authorization: `Bearer ${h.tokens.service}` };
    const before = Number(
      /alp_integrity_failures_total\{operation="download",cause="stored_bytes"\} (\d+)/.exec((await h.call('GET', '/metrics')).text)?.[1] ??
        0,
    );

    // Small: verified completely before the first byte goes out.
    const smallKey = (await h.call('GET', `/v1/artifacts/${smallId}/versions/1`, { token: h.tokens.service })).json.content_key;
    const smallUrl = corrupt(smallId, smallKey, () => 3);
    const s = await rawRequest(smallUrl, { headers: auth });
    assert.equal(s.status, 502);
    assert.equal(s.headers['content-type'], 'application/problem+json');
    assert.equal(JSON.parse(s.body.toString()).code, 'INTEGRITY');

    // Large, corrupted at the end, in the middle and at the start: headers went out, the body never completes.
    const key = (await h.call('GET', `/v1/artifacts/${bigId}/versions/1`, { token: h.tokens.service })).json.content_key;
    const file = path.join(h.ctx.contentRoot, key);
    const original = fs.readFileSync(file);
    let failures = 1;
    for (const at of [(n: number) => n - 1, (n: number) => Math.floor(n / 2), () => 0]) {
      fs.writeFileSync(file, original);
      const url = corrupt(bigId, key, at);
      const r = await rawRequest(url, { headers: auth });
      failures++;
      if (r.status === 200) {
        assert.equal(r.complete, false, 'the response must be aborted');
        assert.ok(r.body.length < big.length, `received ${r.body.length} of ${big.length} bytes`);
      } else {
        assert.equal(r.status, 502);
      }
      // fetch sees a failed body (or a 502), never a complete response.
      const res = await fetch(url, { headers: auth });
      if (res.status === 200) await assert.rejects(res.arrayBuffer());
      else assert.equal(res.status, 502);
      failures++;
      // A range inside the first read chunk is verified before its first byte: a clean 502.
      const ranged = await rawRequest(url, { headers: { ...auth, range: 'bytes=10-99' } });
      assert.equal(ranged.status, 502);
      failures++;
      // A range over several chunks is aborted like a full read.
      const wide = await rawRequest(url, { headers: { ...auth, range: 'bytes=100-2500000' } });
      assert.ok(
        wide.status === 502 || (wide.status === 206 && !wide.complete && wide.body.length < 2_499_901),
        `${wide.status} ${wide.complete}`,
      );
      failures++;
    }
    // Truncated on disk: the size differs from the record.
    fs.writeFileSync(file, original.subarray(0, original.length - 1000));
    const truncated = await rawRequest(`${h.url}/v1/artifacts/${bigId}/versions/1/content`, { headers: auth });
    assert.ok(truncated.status === 502 || !truncated.complete);
    failures++;

    const metrics = (await h.call('GET', '/metrics')).text;
    const after = Number(/alp_integrity_failures_total\{operation="download",cause="stored_bytes"\} (\d+)/.exec(metrics)?.[1] ?? 0);
    assert.equal(after - before, failures);
    assert.ok(
      h.logs.some((l) => l.level === 50 && String(l.msg).startsWith('integrity failure')),
      'the failure is logged',
    );
    // The server is still up and serving.
    assert.equal((await h.call('GET', '/healthz')).status, 200);
    fs.writeFileSync(file, original);
    const ok = await h.call('GET', `/v1/artifacts/${bigId}/versions/1/content`, { token: h.tokens.service });
    assert.equal(ok.status, 200);
    assert.ok(ok.bytes.equals(big));
  });
});
