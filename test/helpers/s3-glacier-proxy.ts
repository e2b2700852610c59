/**
 * A MODEL OF S3's COLD STORAGE CLASSES AND COPY CHECKSUMS in front of s3rver (/work/shared/ENVIRONMENT.md:
 * s3rver 3.7.1 serves GLACIER objects like any other and computes no checksums). This loopback HTTP
 * proxy forwards every request unchanged (the Host header too, so signatures still verify) to
 * `upstream` (s3rver, or the conditional-write proxy in front of it) and models what real S3 does:
 * - GetObject of a GLACIER or DEEP_ARCHIVE object answers 403 InvalidObjectState, as S3 does until the
 *   object is restored; CopyObject from such a source too. RestoreObject (POST ?restore) marks the key
 *   restored at once (S3 takes hours), after which reads pass.
 * - CopyObject with `x-amz-checksum-algorithm: SHA256` answers CopyObjectResult ChecksumSHA256 (the
 *   base64 SHA-256 of the copy, computed here by reading s3rver directly) and records it, so HeadObject
 *   with `x-amz-checksum-mode: ENABLED` answers `x-amz-checksum-sha256` for that key, as S3 does.
 *   `corruptCopies(true)` makes the model answer a wrong checksum (a copy S3 would have damaged).
 * - ListObjectsV2 reports each object's own storage class, as S3 does (s3rver answers STANDARD for
 *   every object): the model rewrites each <StorageClass> from a HeadObject of the key.
 * A later PUT, copy without a checksum or DELETE of the key drops its recorded checksum.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetObjectCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import { S3ContentStore } from '../../src/content/s3/s3-content-store.ts';
import type { S3rverHandle } from './s3rver.ts';

export interface GlacierProxy {
  endpoint: string;
  /** GETs (and copies) of cold objects refused with 403 InvalidObjectState so far. */
  coldRefusals(): number;
  /** Copies answered with a checksum so far. */
  checksummedCopies(): number;
  /** Full S3 keys (bucket-relative) restored through RestoreObject. */
  restored: Set<string>;
  corruptCopies(on: boolean): void;
  stop(): Promise<void>;
}

const COLD = new Set(['GLACIER', 'DEEP_ARCHIVE']);

function xmlError(res: http.ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { 'content-type': 'application/xml' });
  res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`);
}

export async function startGlacierProxy(s3: S3rverHandle, opts: { upstream?: string } = {}): Promise<GlacierProxy> {
  const upstream = new URL(opts.upstream ?? s3.endpoint);
  const client = s3.client();
  const checksums = new Map<string, string>();
  const restored = new Set<string>();
  let refusals = 0;
  let checksummed = 0;
  let corrupt = false;

  async function storageClass(bucket: string, key: string): Promise<string | undefined> {
    try {
      return (await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }))).StorageClass ?? 'STANDARD';
    } catch {
      return undefined;
    }
  }

  async function sha256Of(bucket: string, key: string): Promise<string> {
    const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    const hash = createHash('sha256');
    for await (const c of out.Body as AsyncIterable<Buffer>) hash.update(c);
    return hash.digest('base64');
  }

  /** Forwards the request; `onBody` may rewrite a buffered answer (status, headers, body). */
  function forward(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    onAnswer?: (status: number, headers: http.IncomingHttpHeaders, body: Buffer) => Promise<Buffer>,
  ): Promise<void> {
    return new Promise((resolve) => {
      const out = http.request(
        { hostname: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        (up) => {
          if (!onAnswer) {
            res.writeHead(up.statusCode ?? 502, up.headers);
            up.pipe(res);
            up.on('end', resolve);
            up.on('error', () => resolve());
            return;
          }
          const chunks: Buffer[] = [];
          up.on('data', (c: Buffer) => chunks.push(c));
          up.on('error', () => resolve());
          up.on('end', () => {
            onAnswer(up.statusCode ?? 502, up.headers, Buffer.concat(chunks))
              .then((body) => {
                // A HEAD answer's content-length is the object's, not this (empty) body's.
                const headers = { ...up.headers };
                if (req.method !== 'HEAD') {
                  delete headers['transfer-encoding'];
                  headers['content-length'] = String(body.length);
                }
                res.writeHead(up.statusCode ?? 502, headers);
                res.end(body);
              })
              .catch(() => {
                if (!res.headersSent) res.writeHead(500);
                res.end();
              })
              .finally(resolve);
          });
        },
      );
      out.on('error', () => {
        if (!res.headersSent) res.writeHead(502);
        res.end();
        resolve();
      });
      req.pipe(out);
    });
  }

  /** Rewrites each listed object's StorageClass with the class s3rver keeps for it. */
  async function listedClasses(bucket: string, body: Buffer): Promise<Buffer> {
    let xml = body.toString('utf8');
    const blocks = xml.match(/<Contents>[\s\S]*?<\/Contents>/g) ?? [];
    for (const block of blocks) {
      const key = /<Key>([\s\S]*?)<\/Key>/.exec(block)?.[1];
      if (key === undefined) continue;
      const decoded = key
        .replace(/&amp;/g, '&')
        .replace(/&lt;/g, '<')
        .replace(/&gt;/g, '>')
        .replace(/&quot;/g, '"')
        .replace(/&apos;/g, "'");
      const cls = (await storageClass(bucket, decoded)) ?? 'STANDARD';
      const fixed = /<StorageClass>/.test(block)
        ? block.replace(/<StorageClass>[^<]*<\/StorageClass>/, `<StorageClass>${cls}</StorageClass>`)
        : block.replace('</Contents>', `<StorageClass>${cls}</StorageClass></Contents>`);
      xml = xml.replace(block, fixed);
    }
    return Buffer.from(xml);
  }

  async function copy(req: http.IncomingMessage, res: http.ServerResponse, bucket: string, key: string): Promise<void> {
    const src = decodeURIComponent(String(req.headers['x-amz-copy-source']).replace(/^\//, ''));
    const [srcBucket = '', ...srcRest] = src.split('/');
    const srcKey = srcRest.join('/');
    const cls = await storageClass(srcBucket, srcKey);
    if (cls !== undefined && COLD.has(cls) && !restored.has(`${srcBucket}/${srcKey}`)) {
      refusals++;
      return xmlError(res, 403, 'InvalidObjectState', 'The operation is not valid for the object storage class');
    }
    const wantsSha = String(req.headers['x-amz-checksum-algorithm'] ?? '').toUpperCase() === 'SHA256';
    await forward(req, res, async (status, _headers, body) => {
      if (status !== 200) return body;
      checksums.delete(`${bucket}/${key}`);
      restored.delete(`${bucket}/${key}`);
      if (!wantsSha) return body;
      let sum = await sha256Of(bucket, key);
      if (corrupt) sum = createHash('sha256').update(sum).digest('base64');
      checksums.set(`${bucket}/${key}`, sum);
      checksummed++;
      return Buffer.from(
        body.toString('utf8').replace('</CopyObjectResult>', `<ChecksumSHA256>${sum}</ChecksumSHA256></CopyObjectResult>`),
      );
    });
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://proxy');
    const [, rawBucket = '', ...rest] = url.pathname.split('/');
    const bucket = decodeURIComponent(rawBucket);
    const key = rest.map(decodeURIComponent).join('/');
    const id = `${bucket}/${key}`;
    if (key === '' && req.method === 'GET' && url.searchParams.get('list-type') === '2') {
      return forward(req, res, async (status, _headers, body) => (status === 200 ? listedClasses(bucket, body) : body));
    }
    if (key === '') return forward(req, res);
    if (req.method === 'POST' && url.searchParams.has('restore')) {
      restored.add(id);
      res.writeHead(202);
      res.end();
      return;
    }
    // GetObject: only the SDK's x-id marker and response overrides, no sub-resource (acl, tagging, uploads).
    if (req.method === 'GET' && [...url.searchParams.keys()].every((k) => k === 'x-id' || k.startsWith('response-'))) {
      const cls = await storageClass(bucket, key);
      if (cls !== undefined && COLD.has(cls) && !restored.has(id)) {
        refusals++;
        return xmlError(res, 403, 'InvalidObjectState', 'The operation is not valid for the object storage class');
      }
    }
    if (req.method === 'PUT' && req.headers['x-amz-copy-source'] !== undefined) return copy(req, res, bucket, key);
    if (req.method === 'PUT' || req.method === 'DELETE') {
      checksums.delete(id);
      restored.delete(id);
    }
    if (req.method === 'HEAD' && String(req.headers['x-amz-checksum-mode'] ?? '').toUpperCase() === 'ENABLED') {
      const sum = checksums.get(id);
      if (sum !== undefined) {
        return forward(req, res, async (status, headers, body) => {
          if (status === 200) Object.assign(headers, { 'x-amz-checksum-sha256': sum, 'x-amz-checksum-type': 'FULL_OBJECT' });
          return body;
        });
      }
    }
    return forward(req, res);
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    coldRefusals: () => refusals,
    checksummedCopies: () => checksummed,
    restored,
    corruptCopies: (on) => {
      corrupt = on;
    },
    stop: async () => {
      client.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * `direct`'s bucket and prefix reached through the model: the same content root identity (its
 * `location`, which retention's observations are keyed by), every request seen by the proxy.
 */
export async function behindGlacierModel(direct: S3ContentStore, s3: S3rverHandle, proxy: GlacierProxy): Promise<S3ContentStore> {
  const content = await S3ContentStore.open(
    { engine: 's3', bucket: s3.bucket, prefix: direct.prefix, region: s3.region, endpoint: proxy.endpoint },
    { credentials: s3.credentials },
  );
  Object.defineProperty(content, 'location', { value: direct.location });
  return content;
}
