/** A loopback HTTP receiver for webhook deliveries (the webhook and exporter suites). */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  path: string;
  headers: Record<string, string>;
  body: string;
  status: number;
}

/**
 * Answers each request with `status(path, n)` (n: that path's 1-based request count): a status code,
 * or a code and how long to wait before answering. `got` holds every request in arrival order.
 */
export async function webhookReceiver(status: (path: string, n: number) => number | { code: number; delayMs: number }) {
  const got: Delivery[] = [];
  const counts = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const p = req.url ?? '/';
      const n = (counts.get(p) ?? 0) + 1;
      counts.set(p, n);
      const answer = status(p, n);
      const [code, delayMs] = typeof answer === 'number' ? [answer, 0] : [answer.code, answer.delayMs];
      got.push({ path: p, headers: req.headers as Record<string, string>, body: Buffer.concat(chunks).toString('utf8'), status: code });
      setTimeout(() => res.writeHead(code).end(), delayMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, got, close: () => new Promise<void>((r) => server.close(() => r())) };
}
