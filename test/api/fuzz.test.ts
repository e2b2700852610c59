/**
 * Malformed requests over raw TCP (so nothing is normalised by a client library): bad JSON, wrong
 * types, huge headers, traversal attempts in ids and filenames, invalid UTF-8, missing bodies, wrong
 * methods, garbage that is not HTTP. At least 5,000 of them: no 5xx, every error is
 * application/problem+json with a known code, and the server stays up.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { ROUTES } from '../../src/api/access.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { startExecution } from '../../src/lifecycle/executions.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';
import { type Harness, startApi } from './harness.ts';

const REQUESTS = 5200;
const CONCURRENCY = 8;
const TIMEOUT_MS = 10_000;
const CODES = new Set([
  'INVALID',
  'TOO_LARGE',
  'NOT_FOUND',
  'CONFLICT',
  'CONDITION_FAILED',
  'TRANSACTION_CONFLICT',
  'ILLEGAL_TRANSITION',
  'STALE_EPOCH',
  'RESTORE_HELD',
  'UNAUTHENTICATED',
  'FORBIDDEN',
  'INTEGRITY',
  'USAGE',
]);

interface RawReq {
  method: string;
  target: string;
  headers: Array<[string, string]>;
  body?: Buffer;
  /** Bytes sent as they are (not HTTP at all, or a broken request line). */
  raw?: Buffer;
}

interface Parsed {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

function serialize(r: RawReq): Buffer {
  if (r.raw) return r.raw;
  const lines = [`${r.method} ${r.target} HTTP/1.1`, 'Host: 127.0.0.1', ...r.headers.map(([k, v]) => `${k}: ${v}`)];
  if (r.body !== undefined) lines.push(`Content-Length: ${r.body.length}`);
  lines.push('Connection: close', '', '');
  return Buffer.concat([Buffer.from(lines.join('\r\n'), 'latin1'), r.body ?? Buffer.alloc(0)]);
}

/**
 * Writes the bytes and reads until the server closes (every request says Connection: close). Like a
 * real client it keeps its side open while waiting (Node aborts requests whose client half-closes);
 * only when nothing arrives for a while (an incomplete request) does it end its side.
 */
function send(port: number, bytes: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('no answer within the timeout'));
    }, TIMEOUT_MS);
    const quiet = setTimeout(() => socket.end(), 1000);
    socket.on('data', (c) => {
      clearTimeout(quiet);
      chunks.push(c);
    });
    socket.on('error', () => {
      // The server may close while we still write (e.g. after a 431); what it answered is what counts.
    });
    socket.on('close', () => {
      clearTimeout(timer);
      clearTimeout(quiet);
      resolve(Buffer.concat(chunks));
    });
    socket.write(bytes);
  });
}

function parse(all: Buffer, method: string): Parsed | undefined {
  let bytes = all;
  // Skip interim responses (100 Continue).
  while (/^HTTP\/1\.[01] 1\d\d/.test(bytes.subarray(0, 16).toString('latin1'))) {
    const e = bytes.indexOf('\r\n\r\n');
    if (e < 0) return undefined;
    bytes = bytes.subarray(e + 4);
  }
  const end = bytes.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = bytes.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? '');
  if (!m) return undefined;
  const headers: Record<string, string> = {};
  for (const line of head.slice(1)) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  let body = bytes.subarray(end + 4);
  if (method === 'HEAD') body = Buffer.alloc(0);
  else if (headers['content-length'] !== undefined) body = body.subarray(0, Number(headers['content-length']));
  else if (headers['transfer-encoding'] === 'chunked') {
    const parts: Buffer[] = [];
    let rest = body;
    for (;;) {
      const nl = rest.indexOf('\r\n');
      if (nl < 0) break;
      const size = Number.parseInt(rest.subarray(0, nl).toString(), 16);
      if (!size) break;
      parts.push(rest.subarray(nl + 2, nl + 2 + size));
      rest = rest.subarray(nl + 2 + size + 2);
    }
    body = Buffer.concat(parts);
  }
  return { status: Number(m[1]), headers, body };
}

describe('HTTP API: fuzzing with malformed requests', () => {
  let h: Harness;
  let port: number;
  let ids: { artifact: string; proposed: string; run: string };
  before(async () => {
    h = await startApi({ maxUploadBytes: 256 * 1024 });
    port = Number(new URL(h.url).port);
    const a = (await createArtifact(h.ctx, agent, { name: 'fuzz', filename: 'f.sh', body: bytesOf('echo fuzz\n') })).version.artifact_id;
    const p = (await createArtifact(h.ctx, agent, { name: 'fuzz-p', filename: 'f.sh', body: bytesOf('echo p\n') })).version.artifact_id;
    await propose(h.ctx, agent, p, 1);
    const r = (await createArtifact(h.ctx, agent, { name: 'fuzz-r', filename: 'f.sh', body: bytesOf('echo r\n') })).version.artifact_id;
    await propose(h.ctx, agent, r, 1);
    await decide(h.ctx, alice, r, 1, { decision: 'APPROVE', evidenceRef: 'fuzz' });
    const run = (await startExecution(h.ctx, agent, r, 1)).run_id;
    ids = { artifact: a, proposed: p, run };
  });
  after(async () => {
    await h.close();
  });

  function requests(): RawReq[] {
    const tokens = [h.tokens.human, h.tokens.agent, h.tokens.service];
    const traversal = fc.constantFrom(
      '..%2f..%2fetc%2fpasswd',
      '..%2F..%2F..%2Fcontent',
      '%2e%2e',
      '%2e%2e%2f%2e%2e',
      '..',
      '.',
      '%00',
      'a%00b',
      'a%2fb',
      '%5c..%5c',
      '..%5c..%5cwin.ini',
      '%c0%ae%c0%ae%2f',
      '%ff%fe%fd',
      '%ed%a0%80',
      '%e2%80%ae',
      '%',
      '%zz',
      '%25',
      '~root',
      'metadata.json',
      'rollback-x',
      '.alp-tmp-1',
      'x'.repeat(300),
      '01ARZ3NDEKTSV4RRFFQ69G5FAV',
      '01arz3ndektsv4rrffq69g5fav',
    );
    const seg = fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(ids.artifact, ids.proposed, ids.run) },
      { weight: 4, arbitrary: traversal },
      { weight: 2, arbitrary: fc.string({ maxLength: 30 }).map(encodeURIComponent) },
      { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9._~-]{0,40}$/) },
    );
    const versionSeg = fc.constantFrom('1', '0', '-1', '1.5', '1e3', '99999999999', '0x1', 'abc', '%31', '');
    const outputSeg = fc.constantFrom(
      'stdout.log',
      'stderr.log',
      'output.json',
      '..%2fstdout.log',
      'stdout.log%00',
      'finish',
      'STDOUT.LOG',
      '%2e%2e',
    );
    const templated = fc
      .tuple(fc.constantFrom(...Object.values(ROUTES).map((r) => r.url)), seg, versionSeg, outputSeg, seg)
      .map(([url, id, v, out, run]) => url.replace(':id', id).replace(':v', v).replace(':output', out).replace(':run', run));
    const path = fc.oneof(
      { weight: 6, arbitrary: templated },
      { weight: 2, arbitrary: fc.array(seg, { maxLength: 5 }).map((s) => `/v1/${s.join('/')}`) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          '/v1/artifacts/../../etc/passwd',
          '//v1//artifacts',
          '/v1/artifacts/%2e%2e/%2e%2e/x',
          '/v1/executions/x/../../../',
          '*',
          'http://evil.example/v1/artifacts',
          '/v1/artifacts/',
          '/V1/ARTIFACTS',
          '/v1/artifacts;jsessionid=1',
          '/%ff/%fe',
          '/docs/../openapi.json',
        ),
      },
    );
    const queryValue = fc.oneof(
      traversal,
      fc.string({ maxLength: 30 }).map(encodeURIComponent),
      fc.integer({ min: -5, max: 2000 }).map(String),
      fc.constantFrom(
        '1e999',
        'NaN',
        '-0',
        '',
        '[]',
        '{}',
        'true',
        'DRAFT',
        'draft',
        'APPROVED',
        '2026-03-01',
        '2026-13-45',
        'x'.repeat(5000),
      ),
      fc.base64String({ maxLength: 60 }),
    );
    const query = fc
      .array(
        fc.tuple(
          fc.constantFrom(
            'name',
            'filename',
            'kind',
            'label',
            'quorum',
            'limit',
            'cursor',
            'state',
            'date',
            'approver',
            'format',
            'reason',
            'x',
            '__proto__',
            '%ff',
          ),
          queryValue,
        ),
        { maxLength: 6 },
      )
      .map((pairs) => (pairs.length ? `?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}` : ''));
    const jsonish = fc.oneof(
      fc.anything({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'undefined'),
      fc
        .record(
          {
            to: fc.oneof(fc.constantFrom('PROPOSED', 'DRAFT', 'APPROVED', 'proposed', ''), fc.anything({ maxDepth: 1 })),
            reason: fc.anything({ maxDepth: 1 }),
            decision: fc.oneof(fc.constantFrom('APPROVE', 'REJECT', 'approve'), fc.integer()),
            evidence_ref: fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.constant('x'.repeat(3000))),
            expires_at: fc.oneof(fc.constantFrom('2026-03-02T00:00:00Z', 'tomorrow', '9999-12-31T00:00:00Z'), fc.integer()),
            expires_in: fc.oneof(fc.constantFrom('7d', '0s', '-1d', '400d', 'forever'), fc.integer()),
            content_hash: fc.oneof(
              fc.constantFrom('sha256:00', 'md5:x'),
              fc.stringMatching(/^[0-9a-f]{64}$/).map((x) => `sha256:${x}`),
            ),
            status: fc.oneof(fc.constantFrom('SUCCEEDED', 'FAILED', 'succeeded'), fc.integer()),
            exit_code: fc.oneof(fc.integer(), fc.double(), fc.constantFrom('0', 2 ** 40)),
            action: fc.oneof(fc.string({ maxLength: 20 }), fc.integer(), fc.constant('x'.repeat(500))),
            inputs: fc.oneof(fc.array(fc.string({ maxLength: 70 }), { maxLength: 3 }), fc.string()),
          },
          { requiredKeys: [] },
        )
        .map((o) => JSON.stringify(o)),
      fc.constantFrom(
        '{',
        '{"to":',
        '[]',
        'null',
        '"x"',
        '0',
        '{"__proto__":{"polluted":1}}',
        '{"constructor":{"prototype":{"polluted":1}}}',
        '{"to":"PROPOSED","to":"DRAFT"}',
        '{"exit_code":1e400,"status":"SUCCEEDED"}',
        '['.repeat(3000),
        '{"a":"\\ud800"}',
        '\ufeff{"to":"PROPOSED"}',
      ),
    );
    const body = fc.oneof(
      { weight: 2, arbitrary: fc.constant(undefined) },
      { weight: 5, arbitrary: jsonish.map((s) => Buffer.from(s, 'utf8')) },
      { weight: 2, arbitrary: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)) },
      { weight: 1, arbitrary: fc.constant(Buffer.from([0x7b, 0x22, 0x74, 0x6f, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])) },
      { weight: 1, arbitrary: fc.constant(Buffer.alloc(300 * 1024, 0x61)) },
      { weight: 1, arbitrary: fc.constant(Buffer.alloc(1100 * 1024, 0x7b)) },
    );
    const contentType = fc.constantFrom(
      undefined,
      'application/json',
      'application/json; charset=utf-16',
      'application/octet-stream',
      'text/plain',
      'multipart/form-data; boundary=x',
      'application/x-www-form-urlencoded',
      '*/*',
      ';;;',
      'application/json\u00ff',
    );
    const auth = fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom(...tokens).map((t) => `Bearer ${t}`) },
      { weight: 1, arbitrary: fc.constant(undefined) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          'Bearer',
          'Bearer alp_',
          'Basic Zm9vOmJhcg==',
          `Bearer ${'a'.repeat(5000)}`,
          'Bearer alp_\u00ff\u00fe',
          'bearer   alp_x y',
        ),
      },
    );
    const extra = fc.array(
      fc.oneof(
        {
          weight: 4,
          arbitrary: fc.constantFrom<[string, string]>(
            ['Range', 'bytes=0-0,1-1'],
            ['Range', 'bytes=-'],
            ['Range', 'bytes=999999999999999999999-'],
            ['Range', 'lines=1-2'],
            ['If-Range', '"x"'],
            ['If-None-Match', '*'],
            ['Repr-Digest', 'sha-256=:AAAA:'],
            ['Repr-Digest', 'sha-256=:x:, sha-512=:y:'],
            ['Content-Digest', 'garbage'],
            ['Content-Encoding', 'gzip'],
            ['Content-Encoding', 'identity'],
            ['X-Request-Id', '../../etc/passwd'],
            ['X-Request-Id', 'ok-id-1'],
            ['Expect', '100-continue'],
            ['Transfer-Encoding', 'gzip'],
            ['Accept', 'text/html'],
          ),
        },
        { weight: 1, arbitrary: fc.integer({ min: 17 * 1024, max: 80 * 1024 }).map((n): [string, string] => ['X-Huge', 'h'.repeat(n)]) },
        {
          weight: 3,
          arbitrary: fc.tuple(
            fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,20}$/),
            fc.string({ maxLength: 40 }).map((s) => s.replace(/[\r\n]/g, ' ')),
          ),
        },
      ),
      { maxLength: 3 },
    );
    const request = fc.record({
      method: fc.constantFrom('GET', 'POST', 'PUT', 'HEAD', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE'),
      path,
      query,
      body,
      contentType,
      auth,
      extra,
    });
    const garbage = fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 200 }).map((a) => Buffer.from(a)),
      fc
        .constantFrom(
          'GET /v1/artifacts HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
          'GET /v1/artifacts HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
          'POST /v1/artifacts HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n',
          'GET /\u00ff\u00fe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
          'GET /v1/artifacts HTTP/9.9\r\nHost: x\r\n\r\n',
          'GET /v1 artifacts HTTP/1.1\r\nHost: x\r\n\r\n',
          'BREW /coffee HTTP/1.1\r\nHost: x\r\n\r\n',
          'GET /v1/artifacts HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
          '\r\n\r\n\r\n',
        )
        .map((s) => Buffer.from(s, 'latin1')),
    );
    const structured = fc.sample(request, { numRuns: REQUESTS - 300, seed: 20261130 }).map((r): RawReq => {
      const headers: Array<[string, string]> = [];
      if (r.auth !== undefined) headers.push(['Authorization', r.auth]);
      if (r.contentType !== undefined && r.body !== undefined) headers.push(['Content-Type', r.contentType]);
      headers.push(...r.extra);
      return { method: r.method, target: `${r.path}${r.query}`, headers, ...(r.body !== undefined ? { body: r.body } : {}) };
    });
    const raw = fc.sample(garbage, { numRuns: 300, seed: 7 }).map((b): RawReq => ({ method: 'RAW', target: '', headers: [], raw: b }));
    return [...structured, ...raw];
  }

  it(`answers ${REQUESTS} malformed requests without a 5xx, always with problem+json errors, and stays up`, async (t) => {
    const all = requests();
    assert.ok(all.length >= 5000);
    const failures: string[] = [];
    const statuses = new Map<number, number>();
    let next = 0;
    const worker = async () => {
      while (next < all.length) {
        const req = all[next++] as RawReq;
        const describeReq = () =>
          req.raw
            ? `raw bytes ${JSON.stringify(req.raw.subarray(0, 120).toString('latin1'))}`
            : `${req.method} ${req.target.slice(0, 200)} ${JSON.stringify(req.headers).slice(0, 200)} body=${req.body?.subarray(0, 80).toString('latin1') ?? '-'}`;
        let bytes: Buffer;
        try {
          bytes = await send(port, serialize(req));
        } catch (e) {
          failures.push(`${describeReq()}: ${(e as Error).message}`);
          continue;
        }
        if (req.raw && /^[\r\n]*$/.test(req.raw.toString('latin1'))) {
          // Empty lines before a request line are ignored (RFC 9112 §2.2): no request, no response.
          if (bytes.length) failures.push(`${describeReq()}: answered a non-request`);
          continue;
        }
        const res = parse(bytes, req.method);
        if (!res) {
          failures.push(`${describeReq()}: no HTTP response (${bytes.length} bytes: ${bytes.subarray(0, 80).toString('latin1')})`);
          continue;
        }
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status >= 500) failures.push(`${describeReq()}: ${res.status} ${res.body.subarray(0, 300).toString()}`);
        if (res.status >= 400) {
          if (res.headers['content-type'] !== 'application/problem+json') {
            failures.push(`${describeReq()}: ${res.status} with content-type ${res.headers['content-type']}`);
            continue;
          }
          if (req.method === 'HEAD') continue;
          try {
            const p = JSON.parse(res.body.toString('utf8')) as { status: number; code: string; type: string; detail: string };
            if (p.status !== res.status || !CODES.has(p.code) || !p.type.startsWith('urn:alp:problem:'))
              failures.push(`${describeReq()}: bad problem ${res.body.toString().slice(0, 200)}`);
            if (/\/tmp\/|\/work\/|\n\s+at /.test(p.detail)) failures.push(`${describeReq()}: internal detail leaked: ${p.detail}`);
          } catch {
            failures.push(`${describeReq()}: problem body is not JSON: ${res.body.subarray(0, 100).toString('latin1')}`);
          }
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    t.diagnostic(`statuses: ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`);
    assert.deepEqual(failures.slice(0, 20), [], `${failures.length} failures`);
    // The mix really was malformed: mostly 4xx, across the families we meant to hit.
    for (const s of [400, 401, 403, 404, 405, 413, 415, 431])
      assert.ok((statuses.get(s) ?? 0) > 0, `no ${s} among ${JSON.stringify([...statuses])}`);
    assert.equal((await h.call('GET', '/healthz')).status, 200);
    assert.equal((await h.call('GET', '/readyz')).status, 200);
    const shown = await h.call('GET', `/v1/artifacts/${ids.artifact}`, { token: h.tokens.service });
    assert.equal(shown.status, 200);
    assert.equal(({} as Record<string, unknown>).polluted, undefined, 'no prototype pollution');
  });
});
