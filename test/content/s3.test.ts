/**
 * The S3 engine against a real s3rver started by this test process: the shared conformance suite,
 * unchanged, plus what only S3 has (storage classes, multipart uploads, prefixes, lifecycle rules,
 * request accounting).
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { LifecycleNotSupported, S3ContentStore } from '../../src/content/s3/s3-content-store.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { sha256 } from '../../src/core/digest.ts';
import { IntegrityError, InvalidInput, Throttled, TooLarge } from '../../src/core/errors.ts';
import { type ConditionalProxy, startConditionalProxy } from '../helpers/s3-conditional-proxy.ts';
import { type S3rverHandle, startS3rver } from '../helpers/s3rver.ts';
import { bytesOf, collect } from '../helpers/tmp.ts';
import { contentStoreConformance, immutableKeyConformance } from './conformance.ts';

let server: S3rverHandle | undefined;
let starting: Promise<S3rverHandle> | undefined;
const opened: S3ContentStore[] = [];

/** One s3rver for the whole file, started on first use, stopped after the last suite. */
function s3(): Promise<S3rverHandle> {
  starting ??= startS3rver().then((s) => {
    server = s;
    return s;
  });
  return starting;
}

let proxy: Promise<ConditionalProxy> | undefined;

after(async () => {
  for (const s of opened) await s.close();
  await (await proxy)?.stop();
  await server?.stop();
});

async function openStore(prefix = `alp-${randomUUID().slice(0, 8)}/`, clock?: ManualClock): Promise<S3ContentStore> {
  const s = await s3();
  const store = await S3ContentStore.open(
    { engine: 's3', bucket: s.bucket, prefix, region: s.region, endpoint: s.endpoint },
    { credentials: s.credentials, ...(clock ? { clock } : {}) },
  );
  opened.push(store);
  return store;
}

contentStoreConformance({
  name: 's3',
  runs: 40,
  open: () => openStore(),
  corrupt: async (store, key, bytes) => {
    await (await s3()).corrupt((store as S3ContentStore).prefix + key, bytes);
  },
  unreachable: async () => {
    const s = await s3();
    // A loopback port that was just free: connections to it are refused.
    const port = await new Promise<number>((resolve) => {
      const srv = http.createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as AddressInfo).port;
        srv.close(() => resolve(p));
      });
    });
    return S3ContentStore.open(
      { engine: 's3', bucket: s.bucket, prefix: 'alp-down/', region: s.region, endpoint: `http://127.0.0.1:${port}` },
      { credentials: s.credentials, maxAttempts: 1 },
    );
  },
});

// s3rver ignores If-None-Match: the create-only cases run through a proxy that models S3's conditional writes.
immutableKeyConformance({
  name: 's3 (through the conditional-write proxy in front of s3rver)',
  open: async () => {
    const s = await s3();
    proxy ??= startConditionalProxy(s);
    const store = await S3ContentStore.open(
      { engine: 's3', bucket: s.bucket, prefix: `alp-${randomUUID().slice(0, 8)}/`, region: s.region, endpoint: (await proxy).endpoint },
      { credentials: s.credentials },
    );
    opened.push(store);
    return store;
  },
  corrupt: async (store, key, bytes) => {
    await (await s3()).corrupt((store as S3ContentStore).prefix + key, bytes);
  },
});

// Long by nature: a list of short, independent tests of this engine's own behaviour.
describe('S3 engine specifics', () => {
  it('sets the storage class on put and copy and reports it in head', async () => {
    const store = await openStore();
    const put = await store.put('a/ia.bin', bytesOf('infrequent'), { storageClass: 'STANDARD_IA' });
    assert.deepEqual(await store.head('a/ia.bin'), { key: 'a/ia.bin', size: 10, storageClass: 'STANDARD_IA' });
    await store.copy('a/ia.bin', 'archive/2026/01/x/ia.bin', { expectedDigest: put.digest, storageClass: 'GLACIER' });
    assert.deepEqual(await store.head('archive/2026/01/x/ia.bin'), { key: 'archive/2026/01/x/ia.bin', size: 10, storageClass: 'GLACIER' });
    await store.copy('a/ia.bin', 'a/std.bin', { expectedDigest: put.digest });
    assert.equal((await store.head('a/std.bin'))?.storageClass, 'STANDARD');
    await assert.rejects(store.put('a/bad', bytesOf('x'), { storageClass: 'DEEP_FREEZE' as never }), InvalidInput);
  });

  it('keeps keys under its prefix and lists only valid keys of its own', async () => {
    const s = await s3();
    const store = await openStore('tenant-one/');
    const other = await openStore('tenant-two/');
    await store.put('k/one', bytesOf('1'));
    await other.put('k/two', bytesOf('2'));
    const raw = s.client();
    // Foreign or reserved names under the prefix: a console "folder" marker and a reserved segment.
    await raw.send(new PutObjectCommand({ Bucket: s.bucket, Key: 'tenant-one/k/folder/', Body: '' }));
    await raw.send(new PutObjectCommand({ Bucket: s.bucket, Key: 'tenant-one/.alp-uploads/leftover', Body: 'x' }));
    const listed: string[] = [];
    for await (const o of store.list('')) listed.push(o.key);
    assert.deepEqual(listed, ['k/one']);
    const all = await raw.send(new ListObjectsV2Command({ Bucket: s.bucket, Prefix: 'tenant-' }));
    assert.ok(all.Contents?.some((o) => o.Key === 'tenant-one/k/one'));
    assert.ok(all.Contents?.some((o) => o.Key === 'tenant-two/k/two'));
    assert.equal(await store.head('k/two'), undefined);
    raw.destroy();
  });

  it('uploads large bodies in parts, verified, and a failing large put leaves nothing', async () => {
    const store = await openStore();
    const data = randomBytes(20 * 1024 * 1024 + 123);
    const chunks = () => {
      const parts: Buffer[] = [];
      for (let i = 0; i < data.length; i += 1 << 20) parts.push(data.subarray(i, i + (1 << 20)));
      return bytesOf(...parts);
    };
    store.resetStats();
    const result = await store.put('big/obj', chunks(), { expectedDigest: sha256(data) });
    assert.deepEqual(result, { digest: sha256(data), size: data.length });
    const stats = store.stats();
    assert.equal(stats.CreateMultipartUpload, 1);
    assert.equal(stats.UploadPart, 3, JSON.stringify(stats));
    assert.equal(stats.CompleteMultipartUpload, 1);
    assert.equal(stats.PutObject, undefined);
    assert.deepEqual(await collect(await store.get('big/obj', result.digest)), data);
    const tail = await collect(await store.get('big/obj', result.digest, { start: data.length - 10 }));
    assert.deepEqual(tail, data.subarray(data.length - 10));

    // Wrong digest: the parts were uploaded, but the upload is never completed.
    await assert.rejects(store.put('big/wrong', chunks(), { expectedDigest: sha256('something else') }), IntegrityError);
    assert.equal(await store.head('big/wrong'), undefined);
    // Past maxBytes in the middle of a multipart upload.
    await assert.rejects(store.put('big/limited', chunks(), { maxBytes: 12 * 1024 * 1024 }), TooLarge);
    assert.equal(await store.head('big/limited'), undefined);
    // A failed replacement keeps the previous object.
    await assert.rejects(store.put('big/obj', chunks(), { expectedDigest: sha256('nope') }), IntegrityError);
    assert.deepEqual(await collect(await store.get('big/obj', result.digest)), data);
    assert.deepEqual(
      (await store.listPage('big/')).objects.map((o) => o.key),
      ['big/obj'],
    );
  });

  it('counts one PutObject for a small put and one GetObject for a verified range read', async () => {
    const store = await openStore();
    store.resetStats();
    const { digest } = await store.put('s/small', bytesOf('small body'));
    const got = await collect(await store.get('s/small', digest, { start: 2, end: 4 }));
    assert.equal(got.toString(), 'all');
    assert.deepEqual(store.stats(), { GetObject: 1, PutObject: 1, bytesWritten: 10 });
  });

  it('deletes many keys in one request', async () => {
    const store = await openStore();
    for (const k of ['m/a', 'm/b', 'n/c']) await store.put(k, bytesOf(k));
    store.resetStats();
    assert.equal(await store.deleteMany(['m/a', 'n/c', 'n/c', 'm/missing']), 3);
    assert.equal(store.stats().DeleteObjects, 1);
    const left: string[] = [];
    for await (const o of store.list('')) left.push(o.key);
    assert.deepEqual(left, ['m/b']);
    await assert.rejects(store.deleteMany(['ok', '../escape']), InvalidInput);
  });

  it('refuses a list cursor of another prefix', async () => {
    const store = await openStore();
    for (const k of ['p/1', 'p/2', 'q/1']) await store.put(k, bytesOf(k));
    const page = await store.listPage('p/', { limit: 1 });
    assert.ok(page.cursor);
    await assert.rejects(store.listPage('q/', { cursor: page.cursor }), InvalidInput);
    await assert.rejects(store.listPage('p/', { cursor: '' }), InvalidInput);
  });

  it('tolerates servers without multipart listing when cleaning up', async () => {
    const store = await openStore(undefined, new ManualClock());
    assert.equal(await store.cleanupInterrupted(), 0);
  });

  it('maps a server without bucket lifecycle support to a clear error, after validating the rules', async () => {
    const store = await openStore();
    await assert.rejects(store.getLifecycleRules(), LifecycleNotSupported);
    await assert.rejects(
      store.putLifecycleRules([{ id: 'artifacts', prefix: 'artifacts/', transitions: [{ days: 30, storageClass: 'STANDARD_IA' }] }]),
      LifecycleNotSupported,
    );
    await assert.rejects(store.putLifecycleRules([{ id: 'bad id!', prefix: '', expirationDays: 1 }]), InvalidInput);
    await assert.rejects(store.putLifecycleRules([{ id: 'noop', prefix: 'x/' }]), InvalidInput);
  });
});

describe('S3 engine retries (faults injected in front of s3rver)', () => {
  it('retries SlowDown and counts every attempt', async () => {
    const s = await s3();
    const upstream = new URL(s.endpoint);
    let slowDowns = 0;
    const proxy = http.createServer((req, res) => {
      if (req.method === 'PUT' && slowDowns > 0) {
        slowDowns--;
        req.resume();
        req.on('end', () => {
          res.writeHead(503, { 'content-type': 'application/xml' });
          res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>');
        });
        return;
      }
      const up = http.request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        (r) => {
          res.writeHead(r.statusCode ?? 500, r.headers);
          r.pipe(res);
        },
      );
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const store = await S3ContentStore.open(
      {
        engine: 's3',
        bucket: s.bucket,
        prefix: 'slow/',
        region: s.region,
        endpoint: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
      },
      { credentials: s.credentials, maxAttempts: 3 },
    );
    try {
      slowDowns = 2;
      const { digest } = await store.put('k', bytesOf('patience'));
      assert.equal(store.stats().PutObject, 3);
      assert.equal((await collect(await store.get('k', digest))).toString(), 'patience');
      slowDowns = 3;
      await assert.rejects(store.put('k2', bytesOf('x')), Throttled);
      assert.equal(await store.head('k2'), undefined);
    } finally {
      await store.close();
      proxy.closeAllConnections();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });
});
