/**
 * S3 semantics of real AWS for archive copies, against s3rver behind two loopback MODELS of S3
 * (test/helpers/s3-glacier-proxy.ts: GLACIER GETs answer 403 InvalidObjectState, copies answer a
 * SHA-256 checksum; test/helpers/s3-conditional-proxy.ts: If-None-Match: * is enforced). The copy is
 * server-side (CopyObject), verified by S3's checksum or by the source, never by reading the target.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { RestoreObjectCommand } from '@aws-sdk/client-s3';
import { type CopyHost, checksumOfDigest, digestOfChecksum, MAX_COPY_OBJECT_BYTES, serverSideCopy } from '../../src/content/s3/copy.ts';
import { S3ContentStore } from '../../src/content/s3/s3-content-store.ts';
import { sha256 } from '../../src/core/digest.ts';
import { ArchivedCold, Conflict, ERROR_TABLE, IntegrityError, TooLarge } from '../../src/core/errors.ts';
import { type ConditionalProxy, startConditionalProxy } from '../helpers/s3-conditional-proxy.ts';
import { type GlacierProxy, startGlacierProxy } from '../helpers/s3-glacier-proxy.ts';
import { type S3rverHandle, startS3rver } from '../helpers/s3rver.ts';
import { bytesOf, collect } from '../helpers/tmp.ts';

let s3: S3rverHandle;
let conditional: ConditionalProxy;
let glacier: GlacierProxy;
const opened: S3ContentStore[] = [];

before(async () => {
  s3 = await startS3rver();
  conditional = await startConditionalProxy(s3);
  glacier = await startGlacierProxy(s3, { upstream: conditional.endpoint });
});

after(async () => {
  for (const s of opened) await s.close();
  await glacier?.stop();
  await conditional?.stop();
  await s3?.stop();
});

async function openStore(prefix = `g-${randomUUID().slice(0, 8)}/`): Promise<S3ContentStore> {
  const store = await S3ContentStore.open(
    { engine: 's3', bucket: s3.bucket, prefix, region: s3.region, endpoint: glacier.endpoint },
    { credentials: s3.credentials },
  );
  opened.push(store);
  return store;
}

describe('S3 archive copies against the GLACIER model (loopback proxy in front of s3rver)', () => {
  it('copies server-side into GLACIER with a SHA-256 checksum; a cold read is ARCHIVED_COLD until restored', async () => {
    const store = await openStore();
    const { digest, size } = await store.put('artifacts/a/v1/f', bytesOf('cold bytes'));
    const copied = await store.copy('artifacts/a/v1/f', 'archive/2026/03/a/artifacts/a/v1/f', {
      expectedDigest: digest,
      storageClass: 'GLACIER',
    });
    assert.deepEqual(copied, { digest, size });
    const head = await store.head('archive/2026/03/a/artifacts/a/v1/f');
    assert.deepEqual(head, { key: 'archive/2026/03/a/artifacts/a/v1/f', size, storageClass: 'GLACIER', sha256: digest });
    assert.ok(glacier.checksummedCopies() >= 1);
    assert.equal(store.stats().CopyObject, 1, 'one server-side CopyObject');
    assert.equal(store.stats().PutObject, 1, 'only the original was uploaded');
    const before = glacier.coldRefusals();
    const cold = await store.get('archive/2026/03/a/artifacts/a/v1/f', digest).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(cold instanceof ArchivedCold, String(cold));
    assert.equal(cold.code, 'ARCHIVED_COLD');
    assert.match(cold.message, /restore-object/);
    assert.deepEqual([ERROR_TABLE.ARCHIVED_COLD.exit, ERROR_TABLE.ARCHIVED_COLD.http], [4, 409]);
    await assert.rejects(store.readRaw('archive/2026/03/a/artifacts/a/v1/f'), ArchivedCold);
    assert.equal(glacier.coldRefusals(), before + 2);
    await s3
      .client()
      .send(
        new RestoreObjectCommand({
          Bucket: s3.bucket,
          Key: `${store.prefix}archive/2026/03/a/artifacts/a/v1/f`,
          RestoreRequest: { Days: 1 },
        }),
      )
      .catch(() => undefined);
    glacier.restored.add(`${s3.bucket}/${store.prefix}archive/2026/03/a/artifacts/a/v1/f`);
    assert.equal((await collect(await store.get('archive/2026/03/a/artifacts/a/v1/f', digest))).toString(), 'cold bytes');
  });

  it('verifies the source before the first copy, then trusts the checksums the endpoint answers', async () => {
    const store = await openStore();
    const a = await store.put('artifacts/b/v1/a', bytesOf('first'));
    const b = await store.put('artifacts/b/v1/b', bytesOf('second'));
    await store.copy('artifacts/b/v1/a', 'archive/2026/03/b/a', { expectedDigest: a.digest, storageClass: 'GLACIER' });
    assert.equal(store.stats().GetObject, 1, 'the source was read once, before the copy');
    await store.copy('artifacts/b/v1/b', 'archive/2026/03/b/b', { expectedDigest: b.digest, storageClass: 'GLACIER' });
    assert.equal(store.stats().GetObject, 1, 'no read once the endpoint showed checksums; the GLACIER target is never read');
  });

  it('create-only: the same bytes again are success (compared by checksum, no read); other bytes are CONFLICT', async () => {
    const store = await openStore();
    const a = await store.put('artifacts/c/v1/a', bytesOf('aaa'));
    const b = await store.put('artifacts/c/v1/b', bytesOf('bbb'));
    const target = 'archive/2026/03/c/x';
    await store.copy('artifacts/c/v1/a', target, { expectedDigest: a.digest, storageClass: 'GLACIER' });
    const refusedBefore = conditional.refused();
    const reads = glacier.coldRefusals();
    assert.deepEqual(await store.copy('artifacts/c/v1/a', target, { expectedDigest: a.digest, storageClass: 'GLACIER' }), a);
    assert.equal(conditional.refused(), refusedBefore + 1, 'S3 refused the second copy (If-None-Match: *)');
    assert.equal(glacier.coldRefusals(), reads, 'the cold target was not read');
    await assert.rejects(store.copy('artifacts/c/v1/b', target, { expectedDigest: b.digest, storageClass: 'GLACIER' }), Conflict);
    assert.equal((await store.head(target))?.sha256, a.digest, 'the first copy stays');
  });

  it('a copy S3 answers with another checksum is deleted and fails INTEGRITY; a corrupted source copies nothing', async () => {
    const store = await openStore();
    const a = await store.put('artifacts/d/v1/a', bytesOf('ddd'));
    await store.copy('artifacts/d/v1/a', 'archive/2026/03/d/warm', { expectedDigest: a.digest });
    glacier.corruptCopies(true);
    try {
      await assert.rejects(
        store.copy('artifacts/d/v1/a', 'archive/2026/03/d/bad', { expectedDigest: a.digest, storageClass: 'GLACIER' }),
        IntegrityError,
      );
    } finally {
      glacier.corruptCopies(false);
    }
    assert.equal(await store.head('archive/2026/03/d/bad'), undefined);
    await s3.corrupt(`${store.prefix}artifacts/d/v1/a`, Buffer.from('dDd'));
    await assert.rejects(
      store.copy('artifacts/d/v1/a', 'archive/2026/03/d/bad2', { expectedDigest: a.digest, storageClass: 'GLACIER' }),
      IntegrityError,
    );
    assert.equal(await store.head('archive/2026/03/d/bad2'), undefined);
  });

  it('refuses a source above 5 GiB with TOO_LARGE before sending any copy (no UploadPartCopy)', async () => {
    let sent = 0;
    const host = {
      client: { send: async () => sent++ },
      bucket: 'b',
      copyChecksums: true,
      fullKey: (k: string) => k,
      head: async (k: string) => ({ key: k, size: MAX_COPY_OBJECT_BYTES + 1, storageClass: 'STANDARD' as const }),
      verify: async () => {},
      deleteQuietly: async () => {},
      mapError: (e: unknown) => e as Error,
    } as unknown as CopyHost;
    await assert.rejects(serverSideCopy(host, 'artifacts/e/v1/big', 'archive/2026/03/e/big', { expectedDigest: sha256('x') }), TooLarge);
    assert.equal(sent, 0);
  });

  it('spells digests as S3 ChecksumSHA256 and back; composite (multipart) checksums are not digests', () => {
    const d = sha256('abc');
    assert.equal(checksumOfDigest(d), 'ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=');
    assert.equal(digestOfChecksum(checksumOfDigest(d)), d);
    assert.equal(digestOfChecksum('ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=-3'), undefined);
    assert.equal(digestOfChecksum(undefined), undefined);
  });
});
