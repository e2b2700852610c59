/**
 * Hostile HTTP requests over raw TCP (so nothing is normalised by a client library), shared by the
 * fuzz test in `npm test` (test/api/fuzz.test.ts, a few thousand) and `npm run fuzz`
 * (scripts/fuzz-http.ts, 100,000 against a server in its own process).
 *
 * Every route of the access table (src/api/access.ts) with every token kind and bad ones; wrong types
 * and bad JSON in every body; traversal (`..%2f`, `%00`, backslashes), overlong and invalid UTF-8 in
 * paths, queries and bodies; unicode normalization tricks, bidi overrides and marks, zero-width and tag
 * characters, and 10 KB values in names, filenames, labels, evidence and provenance; huge and many
 * headers; absurd ranges; malformed digest headers; uploads with hostile names and filenames; chunked
 * and fixed-length bodies cut short; garbage that is not HTTP.
 *
 * The contract checked for each answer: no 5xx; every error is application/problem+json with a known
 * code, its status, and no internal detail (paths, stacks).
 */
import net from 'node:net';
import fc from 'fast-check';
import { ROUTES } from '../../src/api/access.ts';
import { ERROR_CODES, httpStatusOfCode } from '../../src/core/errors.ts';

/** The codes a client's request may earn: every 4xx code, and INTEGRITY (a digest the body does not match). */
export const PROBLEM_CODES = new Set<string>(ERROR_CODES.filter((c) => httpStatusOfCode(c) < 500 || c === 'INTEGRITY'));

export interface FuzzFixtures {
  tokens: { human: string; agent: string; service: string };
  /** A DRAFT artifact, a PROPOSED one, and an EXECUTING run. */
  artifact: string;
  proposed: string;
  run: string;
}

export interface RawReq {
  method: string;
  target: string;
  headers: Array<[string, string]>;
  body?: Buffer;
  /** Bytes sent as they are (not HTTP at all, or a broken request line). */
  raw?: Buffer;
  /** The request is cut short: its bytes are sent, then the connection is closed without waiting. */
  cut?: boolean;
}

export interface Parsed {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export function serialize(r: RawReq): Buffer {
  if (r.raw) return r.raw;
  const lines = [`${r.method} ${r.target} HTTP/1.1`, 'Host: 127.0.0.1', ...r.headers.map(([k, v]) => `${k}: ${v}`)];
  const chunked = r.headers.some(([k]) => k.toLowerCase() === 'transfer-encoding' || k.toLowerCase() === 'content-length');
  if (r.body !== undefined && !chunked) lines.push(`Content-Length: ${r.body.length}`);
  lines.push('Connection: close', '', '');
  return Buffer.concat([Buffer.from(lines.join('\r\n'), 'latin1'), r.body ?? Buffer.alloc(0)]);
}

/**
 * Writes the bytes and reads until the server closes (every request says Connection: close). Like a
 * real client it keeps its side open while waiting (Node aborts requests whose client half-closes);
 * only when nothing arrives for `quietMs` (an incomplete request) does it end its side. A cut request
 * is closed `cutMs` after its bytes are written, whatever arrived.
 */
export function send(
  port: number,
  bytes: Buffer,
  opts: { timeoutMs?: number; quietMs?: number; cut?: boolean; cutMs?: number } = {},
): Promise<Buffer> {
  const { timeoutMs = 10_000, quietMs = 1000, cutMs = 30 } = opts;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(port, '127.0.0.1');
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('no answer within the timeout'));
    }, timeoutMs);
    const quiet = setTimeout(() => socket.end(), quietMs);
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
    socket.write(bytes, () => {
      if (opts.cut) setTimeout(() => socket.destroy(), cutMs);
    });
  });
}

export function parse(all: Buffer, method: string): Parsed | undefined {
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

export function describeRequest(req: RawReq): string {
  return req.raw
    ? `raw bytes ${JSON.stringify(req.raw.subarray(0, 120).toString('latin1'))}`
    : `${req.cut ? 'CUT ' : ''}${req.method} ${req.target.slice(0, 200)} ${JSON.stringify(req.headers).slice(0, 200)} body=${req.body?.subarray(0, 80).toString('latin1') ?? '-'}`;
}

export interface Verdict {
  /** The status answered, or undefined when nothing was (allowed only for cut requests and blank lines). */
  status?: number;
  failure?: string;
}

/** Checks one answer against the contract. */
export function judge(req: RawReq, bytes: Buffer): Verdict {
  const what = () => describeRequest(req);
  if (req.raw && /^[\r\n]*$/.test(req.raw.toString('latin1'))) {
    // Empty lines before a request line are ignored (RFC 9112 §2.2): no request, no response.
    return bytes.length ? { failure: `${what()}: answered a non-request` } : {};
  }
  if (req.cut && bytes.length === 0) return {};
  const res = parse(bytes, req.method);
  if (!res) return { failure: `${what()}: no HTTP response (${bytes.length} bytes: ${bytes.subarray(0, 80).toString('latin1')})` };
  if (res.status >= 500) return { status: res.status, failure: `${what()}: ${res.status} ${res.body.subarray(0, 300).toString()}` };
  if (res.status >= 400) {
    if (res.headers['content-type'] !== 'application/problem+json')
      return { status: res.status, failure: `${what()}: ${res.status} with content-type ${res.headers['content-type']}` };
    if (req.method === 'HEAD') return { status: res.status };
    if (req.cut && res.body.length < Number(res.headers['content-length'] ?? 0)) return { status: res.status };
    try {
      const p = JSON.parse(res.body.toString('utf8')) as { status: number; code: string; type: string; detail: string };
      if (p.status !== res.status || !PROBLEM_CODES.has(p.code) || !p.type.startsWith('urn:alp:problem:'))
        return { status: res.status, failure: `${what()}: bad problem ${res.body.toString().slice(0, 200)}` };
      if (/\/tmp\/|\/work\/|\/home\/|\n\s+at /.test(p.detail))
        return { status: res.status, failure: `${what()}: internal detail leaked: ${p.detail}` };
    } catch {
      return { status: res.status, failure: `${what()}: problem body is not JSON: ${res.body.subarray(0, 100).toString('latin1')}` };
    }
  }
  return { status: res.status };
}

// ---- generators

/** Names, filenames, labels, evidence: the unicode and size tricks, as strings. */
export const hostileText = fc.constantFrom(
  'deploy.sh',
  'e\u0301', // NFD
  'caf\u00e9', // NFC
  'cafe\u0301.sh', // NFD filename
  '\u212Belvin', // Kelvin sign (NFKC differs)
  '\u212B', // Angstrom sign (NFC differs)
  'ﬁle.txt', // ligature
  'ｆｕｌｌ.sh', // fullwidth
  'evil\u202Ehs.exe', // RTL override
  '\u202Dltr',
  '\u2066isolate\u2069',
  'rlm\u200F.sh',
  'lrm\u200E',
  'alm\u061C',
  'zero\u200Bwidth.sh',
  'zwj\u200Dok',
  'bom\uFEFF.sh',
  'soft\u00ADhyphen',
  'tag\u{E0041}\u{E0042}',
  'vs\u{E0100}',
  '👨\u200D👩\u200D👧.txt',
  'מסמך.txt',
  'تقرير.csv',
  '\uFF0Fetc\uFF0Fpasswd', // fullwidth solidus
  '\u2215etc\u2215passwd', // division slash
  '..\u2215..\u2215x',
  'a\u0000b',
  'line\nbreak',
  'cr\rlf',
  'tab\t',
  '\u001b[2J',
  '\u0085nel',
  '\u2028ls',
  '\uD800',
  '\uDFFF',
  'n'.repeat(10 * 1024),
  'é'.repeat(128),
  `${'a'.repeat(253)}é`,
  'a'.repeat(255),
  'a'.repeat(256),
  ' padded ',
  '',
  '.',
  '..',
  'metadata.json',
  'rollback-x.sh',
  '.alp-tmp-1',
  'CON',
  'nul.txt',
  'a:b',
  '*?<>|',
);

/** Percent-encodes anything: a lone surrogate becomes its (invalid, CESU-8) UTF-8 bytes. */
export function encodeAny(s: string): string {
  return s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]|[\s\S]/gu, (c) => {
    const u = c.charCodeAt(0);
    if (c.length === 1 && u >= 0xd800 && u <= 0xdfff)
      return `%${(0xe0 | (u >> 12)).toString(16)}%${(0x80 | ((u >> 6) & 0x3f)).toString(16)}%${(0x80 | (u & 0x3f)).toString(16)}`.toUpperCase();
    return encodeURIComponent(c);
  });
}

/** Percent-encoded bytes that are not what they seem: overlong, surrogates, out of range, broken. */
const badPercent = fc.constantFrom(
  '%c0%af', // overlong "/"
  '%c0%ae%c0%ae%c0%af', // overlong "../"
  '%e0%80%af',
  '%f0%80%80%af',
  '%c1%9c', // overlong "\"
  '%ed%a0%80', // surrogate
  '%f4%90%80%80', // > U+10FFFF
  '%f8%88%80%80%80', // 5-byte form
  '%ff%fe',
  '%80',
  '%c3',
  '%e2%80%ae', // RTL override, well-formed
  '%00',
  '%2e%2e%2f',
  '%2e%2e%5c',
  '%252e%252e%252f', // double-encoded
  '%',
  '%g0',
);

export function fuzzRequests(f: FuzzFixtures, count: number, seed: number): RawReq[] {
  const tokens = [f.tokens.human, f.tokens.agent, f.tokens.service];
  const ids = [f.artifact, f.proposed, f.run];
  const traversal = fc.oneof(
    fc.constantFrom(
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
    ),
    badPercent,
    fc.tuple(fc.constantFrom(...ids), badPercent).map(([id, p]) => `${id}${p}`),
  );
  const seg = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...ids) },
    { weight: 4, arbitrary: traversal },
    { weight: 2, arbitrary: fc.string({ maxLength: 30 }).map(encodeAny) },
    { weight: 1, arbitrary: hostileText.map((t) => encodeAny(t.slice(0, 400))) },
    { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9._~-]{0,40}$/) },
  );
  const versionSeg = fc.constantFrom('1', '0', '-1', '1.5', '1e3', '99999999999', '0x1', 'abc', '%31', '', '1%00', '１');
  const outputSeg = fc.constantFrom(
    'stdout.log',
    'stderr.log',
    'output.json',
    '..%2fstdout.log',
    'stdout.log%00',
    'finish',
    'STDOUT.LOG',
    '%2e%2e',
    'stdout%c0%aelog',
  );
  const templated = fc
    .tuple(fc.constantFrom(...Object.values(ROUTES).map((r) => r.url)), seg, versionSeg, outputSeg, seg)
    .map(([url, id, v, out, run]) => url.replace(':id', id).replace(':v', v).replace(':output', out).replace(':run', run));
  /** Every route of the table with real ids: the requests that reach the handlers and services. */
  const wellRouted = fc
    .tuple(
      fc.constantFrom(...Object.values(ROUTES).map((r) => r.url)),
      fc.constantFrom(f.artifact, f.proposed),
      fc.constantFrom('stdout.log', 'stderr.log', 'output.json'),
    )
    .map(([url, id, out]) => url.replace(':id', id).replace(':v', '1').replace(':output', out).replace(':run', f.run));
  const path = fc.oneof(
    { weight: 5, arbitrary: templated },
    { weight: 3, arbitrary: wellRouted },
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
        '/assets/..%2f..%2fpackage.json',
        '/assets/%2e%2e/%2e%2e/etc/passwd',
        '/artifacts/..%2f..%2f..%2fetc%2fpasswd',
        '/index.html%00.js',
        '/\\..\\..\\windows\\win.ini',
        `/v1/artifacts/${'a'.repeat(20_000)}`,
      ),
    },
  );
  const queryValue = fc.oneof(
    traversal,
    badPercent,
    hostileText.map((t) => encodeAny(t)),
    fc.string({ maxLength: 30 }).map(encodeAny),
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
          'constructor',
          '%ff',
          'name%00',
          'label[]',
        ),
        queryValue,
      ),
      { maxLength: 6 },
    )
    .map((pairs) => (pairs.length ? `?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}` : ''));
  const manyParams = fc.integer({ min: 50, max: 1500 }).map((n) => `?${Array.from({ length: n }, (_, i) => `label=k${i}=v`).join('&')}`);
  const text = fc.oneof(hostileText, fc.string({ maxLength: 20 }));
  const jsonish = fc.oneof(
    fc.anything({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'undefined'),
    fc
      .record(
        {
          to: fc.oneof(
            fc.constantFrom('PROPOSED', 'DRAFT', 'APPROVED', 'proposed', '', 'PROPOSED\u0000', 'PROPOSED\u200B'),
            fc.anything({ maxDepth: 1 }),
          ),
          reason: fc.oneof(text, fc.anything({ maxDepth: 1 })),
          decision: fc.oneof(fc.constantFrom('APPROVE', 'REJECT', 'approve', 'APPROVE\u202E'), fc.integer()),
          evidence_ref: fc.oneof(text, fc.integer(), fc.constant('x'.repeat(3000))),
          expires_at: fc.oneof(
            fc.constantFrom('2026-03-02T00:00:00Z', 'tomorrow', '9999-12-31T00:00:00Z', '+275760-09-13T00:00:00Z', '2026-02-30T25:61:00Z'),
            fc.integer(),
          ),
          expires_in: fc.oneof(fc.constantFrom('7d', '0s', '-1d', '400d', 'forever', '99999999999999999999d', '1e3d'), fc.integer()),
          content_hash: fc.oneof(
            fc.constantFrom('sha256:00', 'md5:x', `SHA256:${'A'.repeat(64)}`),
            fc.stringMatching(/^[0-9a-f]{64}$/).map((x) => `sha256:${x}`),
          ),
          comment: text,
          status: fc.oneof(fc.constantFrom('SUCCEEDED', 'FAILED', 'succeeded'), fc.integer()),
          exit_code: fc.oneof(fc.integer(), fc.double(), fc.constantFrom('0', 2 ** 40, -(2 ** 31) - 1)),
          action: fc.oneof(text, fc.integer(), fc.constant('x'.repeat(500))),
          actor: text,
          tool: text,
          model: text,
          note: fc.oneof(text, fc.constant('n'.repeat(10 * 1024))),
          inputs: fc.oneof(
            fc.array(fc.string({ maxLength: 70 }), { maxLength: 3 }),
            fc.string(),
            fc.constant(Array(300).fill(`sha256:${'0'.repeat(64)}`)),
          ),
          outputs: fc.oneof(fc.array(text, { maxLength: 3 }), fc.constant(null)),
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
      '{"a":'.repeat(2000),
      '{"a":"\\ud800"}',
      '{"action":"\\u0000"}',
      '\ufeff{"to":"PROPOSED"}',
      `{"note":"${'\\u202e'.repeat(1000)}"}`,
    ),
  );
  /** JSON with bytes that are not UTF-8 inside a string: overlong, surrogates, truncated sequences. */
  const badUtf8Json = fc
    .tuple(
      fc.constantFrom('to', 'reason', 'evidence_ref', 'action', 'note', 'decision'),
      fc.constantFrom(
        [0xc0, 0xaf],
        [0xe0, 0x80, 0xaf],
        [0xed, 0xa0, 0x80],
        [0xf4, 0x90, 0x80, 0x80],
        [0xff],
        [0xc3],
        [0xe2, 0x80],
        [0xf8, 0x88, 0x80, 0x80, 0x80],
      ),
    )
    .map(([k, b]) => Buffer.concat([Buffer.from(`{"${k}":"x`), Buffer.from(b), Buffer.from('y"}')]));
  const body = fc.oneof(
    { weight: 2, arbitrary: fc.constant(undefined) },
    { weight: 6, arbitrary: jsonish.map((s) => Buffer.from(s, 'utf8')) },
    { weight: 2, arbitrary: badUtf8Json },
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)) },
    { weight: 1, arbitrary: fc.constant(Buffer.alloc(300 * 1024, 0x61)) },
    { weight: 1, arbitrary: fc.constant(Buffer.alloc(1100 * 1024, 0x7b)) },
  );
  const contentType = fc.constantFrom(
    undefined,
    'application/json',
    'application/json',
    'application/json; charset=utf-16',
    'application/json; charset=latin1',
    'application/octet-stream',
    'text/plain',
    'multipart/form-data; boundary=x',
    'application/x-www-form-urlencoded',
    '*/*',
    ';;;',
    'application/json\u00ff',
    `application/json; ${'a=b;'.repeat(500)}`,
  );
  const auth = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...tokens).map((t) => `Bearer ${t}`) },
    { weight: 1, arbitrary: fc.constant(undefined) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        'Bearer',
        'Bearer ',
        'Bearer alp_',
        'Basic Zm9vOmJhcg==',
        `Bearer ${'a'.repeat(5000)}`,
        'Bearer alp_\u00ff\u00fe',
        'bearer   alp_x y',
        `Bearer ${tokens[0]}x`,
        `Bearer ${tokens[0]?.slice(0, -1)}`,
        `Bearer ${tokens[0]} ${tokens[1]}`,
        `Bearer  ${tokens[1]}\t`,
        `BEARER ${tokens[2]}`,
        `Bearer ${tokens[0]}%00`,
      ),
    },
  );
  const header = fc.oneof(
    {
      weight: 4,
      arbitrary: fc.constantFrom<[string, string]>(
        ['Range', 'bytes=0-0,1-1'],
        ['Range', 'bytes=-'],
        ['Range', 'bytes=-0'],
        ['Range', 'bytes=5-3'],
        ['Range', 'bytes=0-99999999999999999999'],
        ['Range', 'bytes=999999999999999999999-'],
        ['Range', `bytes=${'9'.repeat(1000)}-`],
        ['Range', `bytes=${'0-0,'.repeat(2000)}0-0`],
        ['Range', 'bytes=-99999999999999999999'],
        ['Range', 'bytes=1e3-2e3'],
        ['Range', 'bytes= 0 - 1 '],
        ['Range', 'lines=1-2'],
        ['Range', 'bytes=0x0-0x10'],
        ['If-Range', '"x"'],
        ['If-Range', 'Mon, 01 Jan 2001 00:00:00 GMT'],
        ['If-None-Match', '*'],
        ['If-None-Match', `${'"x",'.repeat(2000)}"y"`],
        ['Repr-Digest', 'sha-256=:AAAA:'],
        ['Repr-Digest', 'sha-256=:x:, sha-512=:y:'],
        ['Repr-Digest', `sha-256=:${'A'.repeat(10_000)}:`],
        ['Repr-Digest', 'sha-256=:!!!!:'],
        ['Repr-Digest', 'sha-256=AAAA'],
        ['Repr-Digest', 'SHA-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:'],
        ['Repr-Digest', 'sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:, sha-256=:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=:'],
        ['Repr-Digest', 'sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:'],
        ['Repr-Digest', 'sha-256=:\u00ff\u00fe:'],
        ['Repr-Digest', ''],
        ['Content-Digest', 'garbage'],
        ['Content-Digest', 'sha-256=:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=:'],
        ['Content-Encoding', 'gzip'],
        ['Content-Encoding', 'identity'],
        ['Content-Encoding', 'gzip, identity'],
        ['Content-Length', '-1'],
        ['Content-Length', '99999999999999999999'],
        ['X-Request-Id', '../../etc/passwd'],
        ['X-Request-Id', 'ok-id-1'],
        ['X-Request-Id', 'x'.repeat(65)],
        ['Expect', '100-continue'],
        ['Expect', 'teapot'],
        ['Transfer-Encoding', 'gzip'],
        ['Accept', 'text/html'],
        ['Accept-Encoding', 'gzip, br, deflate'],
        ['Origin', 'http://evil.example'],
        ['Host', 'evil.example'],
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
  );
  const extra = fc.oneof(
    { weight: 12, arbitrary: fc.array(header, { maxLength: 3 }) },
    // Many headers: thousands of short ones (within the 16 KB header limit, and past it).
    {
      weight: 1,
      arbitrary: fc.integer({ min: 500, max: 4000 }).map((n) => Array.from({ length: n }, (_, i): [string, string] => [`x${i}`, 'v'])),
    },
  );
  const method = fc.constantFrom('GET', 'GET', 'POST', 'POST', 'PUT', 'HEAD', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'CONNECT');
  const request = fc
    .record({
      method,
      path,
      query: fc.oneof({ weight: 20, arbitrary: query }, { weight: 1, arbitrary: manyParams }),
      body,
      contentType,
      auth,
      extra,
    })
    .map((r): RawReq => {
      const headers: Array<[string, string]> = [];
      if (r.auth !== undefined) headers.push(['Authorization', r.auth]);
      if (r.contentType !== undefined && r.body !== undefined) headers.push(['Content-Type', r.contentType]);
      headers.push(...r.extra);
      return { method: r.method, target: `${r.path}${r.query}`, headers, ...(r.body !== undefined ? { body: r.body } : {}) };
    });
  /** Uploads with valid tokens and hostile names, filenames and labels: what the services must refuse or store safely. */
  const upload = fc
    .record({
      route: fc.constantFrom('create', 'version', 'compensate', 'output'),
      name: hostileText,
      filename: hostileText,
      label: fc.array(fc.tuple(fc.constantFrom('team', 'a/b', 'k'.repeat(70), '\u202Ek', ''), hostileText), { maxLength: 3 }),
      token: fc.constantFrom(f.tokens.agent, f.tokens.human, f.tokens.service),
      body: fc.oneof(
        fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
        fc.constant(Buffer.from('echo hi\n')),
      ),
      digest: fc.option(
        fc.constantFrom(
          'sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:',
          'sha-256=:AAAA:',
          'sha-256=:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=:',
        ),
        { freq: 3 },
      ),
    })
    .map((u): RawReq => {
      const enc = encodeAny;
      const labels = u.label.map(([k, v]) => `&label=${enc(`${k}=${v}`)}`).join('');
      const target =
        u.route === 'create'
          ? `/v1/artifacts?name=${enc(u.name)}&filename=${enc(u.filename)}${labels}`
          : u.route === 'version'
            ? `/v1/artifacts/${f.artifact}/versions?filename=${enc(u.filename)}`
            : u.route === 'compensate'
              ? `/v1/artifacts/${f.artifact}/versions/1/compensations?filename=${enc(u.filename)}&reason=${enc(u.name)}`
              : `/v1/executions/${f.run}/${enc(u.filename)}`;
      const headers: Array<[string, string]> = [
        ['Authorization', `Bearer ${u.token}`],
        ['Content-Type', 'application/octet-stream'],
      ];
      if (u.digest) headers.push(['Repr-Digest', u.digest]);
      return { method: u.route === 'output' ? 'PUT' : 'POST', target, headers, body: u.body };
    });
  /** Bodies cut short: chunked uploads that stop mid-chunk, and fixed lengths that never arrive. */
  const cut = fc
    .record({
      target: fc.constantFrom(
        `/v1/artifacts?name=cut&filename=cut.bin`,
        `/v1/artifacts/${f.artifact}/versions?filename=cut.bin`,
        `/v1/executions/${f.run}/stderr.log`,
        `/v1/artifacts/${f.proposed}/versions/1/transitions`,
        `/v1/artifacts/${f.proposed}/versions/1/approvals`,
      ),
      chunked: fc.boolean(),
      sent: fc.integer({ min: 0, max: 64 * 1024 }),
      promised: fc.integer({ min: 1, max: 10 * 1024 * 1024 }),
      token: fc.constantFrom(f.tokens.agent, f.tokens.human),
    })
    .map((c): RawReq => {
      const payload = Buffer.alloc(c.sent, 0x41);
      const method = c.target.includes('/executions/') ? 'PUT' : 'POST';
      const type = c.target.endsWith('transitions') || c.target.endsWith('approvals') ? 'application/json' : 'application/octet-stream';
      const headers: Array<[string, string]> = [
        ['Authorization', `Bearer ${c.token}`],
        ['Content-Type', type],
      ];
      let body: Buffer;
      if (c.chunked) {
        headers.push(['Transfer-Encoding', 'chunked']);
        body = Buffer.concat([Buffer.from(`${(c.sent + 100).toString(16)}\r\n`), payload]);
      } else {
        headers.push(['Content-Length', String(c.sent + c.promised)]);
        body = payload;
      }
      return { method, target: c.target, headers, body, cut: true };
    });
  const garbage = fc.oneof(
    fc.uint8Array({ minLength: 1, maxLength: 200 }).map((a) => Buffer.from(a)),
    fc
      .constantFrom(
        'GET /v1/artifacts HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
        'GET /v1/artifacts HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
        'POST /v1/artifacts HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n',
        'POST /v1/artifacts HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\nConnection: close\r\n\r\n0\r\n\r\n',
        'POST /v1/artifacts HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\nConnection: close\r\n\r\n0\r\n\r\n',
        'GET /\u00ff\u00fe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
        'GET /v1/artifacts/\u00c0\u00af\u00c0\u00af HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
        'GET /v1/artifacts?name=\u00ed\u00a0\u0080 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
        'GET /v1/artifacts HTTP/9.9\r\nHost: x\r\n\r\n',
        'GET /v1 artifacts HTTP/1.1\r\nHost: x\r\n\r\n',
        'BREW /coffee HTTP/1.1\r\nHost: x\r\n\r\n',
        'GET /v1/artifacts HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
        'GET /v1/artifacts HTTP/1.1\r\nHost: x\r\n Folded: header\r\nConnection: close\r\n\r\n',
        'GET /v1/artifacts HTTP/1.1\nHost: x\nConnection: close\n\n',
        'GET /v1/artifacts HTTP/1.1\r\nHost: x\r\nX: a\u0000b\r\nConnection: close\r\n\r\n',
        'GET http://127.0.0.1/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
        'GET /healthz HTTP/1.0\r\n\r\n',
        `GET /${'a'.repeat(70_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
        '\r\n\r\n\r\n',
      )
      .map((s) => Buffer.from(s, 'latin1')),
  );
  const shares = { structured: 0.78, upload: 0.12, cut: 0.04 };
  const n = (share: number) => Math.round(count * share);
  const sampleOf = <T>(arb: fc.Arbitrary<T>, k: number, s: number) => (k > 0 ? fc.sample(arb, { numRuns: k, seed: s }) : []);
  const out: RawReq[] = [
    ...sampleOf(request, n(shares.structured), seed),
    ...sampleOf(upload, n(shares.upload), seed + 1),
    ...sampleOf(cut, n(shares.cut), seed + 2),
  ];
  out.push(...sampleOf(garbage, count - out.length, seed + 3).map((b): RawReq => ({ method: 'RAW', target: '', headers: [], raw: b })));
  // Interleave the classes (a deterministic shuffle), so a batch of requests holds a bit of each.
  const rand = mulberry32(seed);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j] as RawReq, out[i] as RawReq];
  }
  return out;
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Whether the request as sent is whole (its body, if any, framed by the Content-Length serialize()
 * adds): the server owes it an answer, however long it takes, so the client does not end its side
 * early. Others (garbage, cut bodies, framing headers of their own) may never be whole.
 */
function complete(req: RawReq): boolean {
  if (req.raw || req.cut) return false;
  return !req.headers.some(([k]) => /^(content-length|transfer-encoding)$/i.test(k));
}

export interface FuzzRun {
  requests: number;
  statuses: Map<number, number>;
  /** Requests that were answered with nothing (cut requests and blank lines only). */
  unanswered: number;
  failures: string[];
}

/** Sends the requests with `concurrency` connections at a time and judges every answer. */
export async function runFuzz(port: number, requests: RawReq[], concurrency: number, into?: FuzzRun): Promise<FuzzRun> {
  const run: FuzzRun = into ?? { requests: 0, statuses: new Map(), unanswered: 0, failures: [] };
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const req = requests[next++] as RawReq;
      run.requests++;
      let bytes: Buffer;
      try {
        bytes = await send(port, serialize(req), { cut: req.cut === true, quietMs: complete(req) ? 10_000 : 1000 });
      } catch (e) {
        run.failures.push(`${describeRequest(req)}: ${(e as Error).message}`);
        continue;
      }
      const v = judge(req, bytes);
      if (v.failure) run.failures.push(v.failure);
      if (v.status === undefined) run.unanswered++;
      else run.statuses.set(v.status, (run.statuses.get(v.status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return run;
}
