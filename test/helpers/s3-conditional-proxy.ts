/**
 * A MODEL OF S3's CONDITIONAL WRITES in front of s3rver. s3rver 3.7.1 ignores `If-None-Match: *` (it
 * overwrites; /work/shared/ENVIRONMENT.md), so the create-only rule of the content engines cannot be
 * shown against it directly. This loopback HTTP proxy forwards every request to s3rver unchanged (the
 * Host header too, so the SDK's signatures still verify) except PutObject and CompleteMultipartUpload
 * carrying `If-None-Match: *`: for those it asks s3rver whether the key exists (a signed HeadObject of
 * its own) and answers 412 PreconditionFailed, as S3 does, when it does. Conditional writes of one key
 * are serialised in the proxy, so check and write are atomic as on S3 (which answers a concurrent one
 * with 409 ConditionalRequestConflict or 412; the model only ever gives 412).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { HeadObjectCommand } from '@aws-sdk/client-s3';
import type { S3rverHandle } from './s3rver.ts';

export interface ConditionalProxy {
  endpoint: string;
  /** Conditional writes refused with 412 so far. */
  refused(): number;
  stop(): Promise<void>;
}

export async function startConditionalProxy(s3: S3rverHandle): Promise<ConditionalProxy> {
  const upstream = new URL(s3.endpoint);
  const client = s3.client();
  const locks = new Map<string, Promise<void>>();
  let refused = 0;

  async function exists(bucket: string, key: string): Promise<boolean> {
    try {
      await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
      return true;
    } catch (e) {
      if ((e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return false;
      throw e;
    }
  }

  function forward(req: http.IncomingMessage, res: http.ServerResponse, body?: Buffer): Promise<void> {
    return new Promise((resolve) => {
      const out = http.request(
        { hostname: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
          up.on('end', resolve);
          up.on('error', () => resolve());
        },
      );
      out.on('error', () => {
        if (!res.headersSent) res.writeHead(502);
        res.end();
        resolve();
      });
      if (body) out.end(body);
      else req.pipe(out);
    });
  }

  async function conditional(req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const [, bucket = '', ...rest] = url.pathname.split('/');
    const key = rest.map(decodeURIComponent).join('/');
    const id = `${bucket}/${key}`;
    const previous = locks.get(id) ?? Promise.resolve();
    let release = () => {};
    const mine = new Promise<void>((r) => {
      release = r;
    });
    locks.set(
      id,
      previous.then(() => mine),
    );
    await previous;
    try {
      if (await exists(decodeURIComponent(bucket), key)) {
        refused++;
        res.writeHead(412, { 'content-type': 'application/xml' });
        res.end(
          '<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message><Condition>If-None-Match</Condition></Error>',
        );
        return;
      }
      await forward(req, res, Buffer.concat(chunks));
    } finally {
      release();
    }
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://proxy');
    const isPut = req.method === 'PUT' && !url.searchParams.has('uploadId');
    const isComplete = req.method === 'POST' && url.searchParams.has('uploadId');
    const handled = req.headers['if-none-match'] === '*' && (isPut || isComplete) ? conditional(req, res, url) : forward(req, res);
    handled.catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    refused: () => refused,
    stop: async () => {
      client.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
