/**
 * A loopback HTTP proxy in front of a real ALP server, for the client's tests. It forwards every
 * request as it is, except what its rules say:
 *
 * - `refuse`: answer a matching request 503 with `Retry-After` (a problem document, as the server's
 *   own MAINTENANCE answer) without forwarding it (the request never reached the server);
 * - `loseAnswer`: forward a matching request, let the server act on it, then answer 503 instead of
 *   its answer (the answer was lost on the way back: the case `Idempotency-Key` exists for);
 * - `tamper`: forward, and flip one byte of a matching response body at the given offset, headers
 *   untouched (a hop that corrupts bytes: only the client's own re-hash can notice).
 *
 * Each rule applies to the first `times` matching requests. Every request and the status it got are
 * recorded in `seen`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ProxyRule {
  action: 'refuse' | 'loseAnswer' | 'tamper';
  method: string;
  /** Matches the path (without the query). */
  path: RegExp;
  times: number;
  retryAfter?: string;
  /** tamper: the body offset whose byte is flipped. */
  at?: number;
}

export interface Seen {
  method: string;
  url: string;
  status: number;
  headers: http.IncomingHttpHeaders;
  upstreamHeaders?: http.IncomingHttpHeaders;
}

export interface LoopbackProxy {
  url: string;
  seen: Seen[];
  rules: ProxyRule[];
  close(): Promise<void>;
}

const MAINTENANCE = JSON.stringify({
  type: 'urn:alp:problem:maintenance',
  title: 'Maintenance in progress',
  status: 503,
  detail: 'the proxy refused this request (test)',
  instance: '',
  code: 'MAINTENANCE',
  request_id: 'proxy',
});

function drain(req: http.IncomingMessage): Promise<void> {
  return new Promise((resolve, reject) => {
    req.on('data', () => {});
    req.on('end', resolve);
    req.on('error', reject);
  });
}

function refuse(res: http.ServerResponse, retryAfter: string): void {
  res.writeHead(503, {
    'content-type': 'application/problem+json',
    'retry-after': retryAfter,
    'content-length': Buffer.byteLength(MAINTENANCE),
  });
  res.end(MAINTENANCE);
}

export async function startProxy(target: string, rules: ProxyRule[] = []): Promise<LoopbackProxy> {
  const upstream = new URL(target);
  const seen: Seen[] = [];
  const ruleFor = (req: http.IncomingMessage) => {
    const path = (req.url ?? '').split('?')[0] ?? '';
    const rule = rules.find((r) => r.times > 0 && r.method === req.method && r.path.test(path));
    if (rule) rule.times--;
    return rule;
  };
  const server = http.createServer(async (req, res) => {
    const rule = ruleFor(req);
    const record = (status: number, upstreamHeaders?: http.IncomingHttpHeaders) =>
      seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        status,
        headers: req.headers,
        ...(upstreamHeaders ? { upstreamHeaders } : {}),
      });
    if (rule?.action === 'refuse') {
      await drain(req);
      record(503);
      refuse(res, rule.retryAfter ?? '1');
      return;
    }
    const out = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } },
      (up) => {
        if (rule?.action === 'loseAnswer') {
          up.resume();
          up.on('end', () => {
            record(503, up.headers);
            refuse(res, rule.retryAfter ?? '1');
          });
          return;
        }
        record(up.statusCode ?? 0, up.headers);
        res.writeHead(up.statusCode ?? 502, up.headers);
        if (rule?.action !== 'tamper') {
          up.pipe(res);
          return;
        }
        let offset = 0;
        up.on('data', (chunk: Buffer) => {
          const i = (rule.at ?? 0) - offset;
          if (i >= 0 && i < chunk.length) chunk[i] = ((chunk[i] as number) ^ 0xff) & 0xff;
          offset += chunk.length;
          res.write(chunk);
        });
        up.on('end', () => res.end());
        up.on('error', () => res.destroy());
      },
    );
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    rules,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
