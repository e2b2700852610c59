/**
 * Multipart part sizes (issue 16 item 5): uploads up to S3's 5 TiB fit its 10,000 parts of 5 MiB–5 GiB.
 * The arithmetic is checked with fast-check at full scale; the upload loop runs on s3rver at a SMALL
 * SCALE (S3Options.partPlan: 64 KiB parts, 20 parts an upload; real S3 refuses parts under 5 MiB,
 * s3rver does not), where a streamed body crosses part-size steps and a declared size fixes the parts.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import {
  DEFAULT_PART_PLAN,
  growingPartSize,
  MiB,
  type PartPlan,
  partSizeFor,
  S3_MAX_OBJECT_BYTES,
  S3_MAX_PART_BYTES,
  S3_MAX_PARTS,
} from '../../src/content/s3/multipart.ts';
import { S3ContentStore } from '../../src/content/s3/s3-content-store.ts';
import { sha256 } from '../../src/core/digest.ts';
import { TooLarge } from '../../src/core/errors.ts';
import { type S3rverHandle, startS3rver } from '../helpers/s3rver.ts';
import { bytesOf, collect } from '../helpers/tmp.ts';

const TiB = 1024 * 1024 * MiB;
const GiB = 1024 * MiB;

describe('multipart part sizes (fast-check, full scale)', () => {
  it('a declared size gets max(8 MiB, ceil(size / 10,000) rounded up to 1 MiB): it fits, within S3 limits, and is the smallest such', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: S3_MAX_OBJECT_BYTES }), (size) => {
        const part = partSizeFor(size);
        assert.ok(part >= 8 * MiB && part <= S3_MAX_PART_BYTES, `${part}`);
        assert.equal(part % MiB, 0);
        assert.ok(Math.ceil(size / part) <= S3_MAX_PARTS);
        const smaller = part - MiB;
        assert.ok(smaller < 8 * MiB || Math.ceil(size / smaller) > S3_MAX_PARTS, 'no smaller aligned part fits');
      }),
      { numRuns: 2000 },
    );
    assert.equal(partSizeFor(78 * GiB), 8 * MiB);
    assert.equal(partSizeFor(TiB), 105 * MiB);
    assert.equal(partSizeFor(S3_MAX_OBJECT_BYTES), 525 * MiB);
  });

  it('an unknown size grows the part (doubling every 1,000 parts): 10,000 parts hold more than 5 TiB, each within 5 GiB', () => {
    let total = 0;
    let previous = 0;
    for (let i = 0; i < S3_MAX_PARTS; i++) {
      const p = growingPartSize(i);
      assert.ok(p >= previous && p >= DEFAULT_PART_PLAN.base && p <= S3_MAX_PART_BYTES);
      previous = p;
      total += p;
    }
    assert.ok(total >= S3_MAX_OBJECT_BYTES, `${total / TiB} TiB`);
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 0, max: 100_000 }),
        (base, maxParts, i) => {
          const plan: PartPlan = { base: base * 1024, maxParts, align: 1024 };
          const p = growingPartSize(i, plan);
          assert.ok(p >= plan.base && p >= growingPartSize(Math.max(0, i - 1), plan));
        },
      ),
    );
  });
});

let s3: S3rverHandle;
const opened: S3ContentStore[] = [];
before(async () => {
  s3 = await startS3rver();
});
after(async () => {
  for (const s of opened) await s.close();
  await s3?.stop();
});

async function smallScaleStore(plan: Partial<PartPlan>): Promise<S3ContentStore> {
  const store = await S3ContentStore.open(
    { engine: 's3', bucket: s3.bucket, prefix: `mp-${randomUUID().slice(0, 8)}/`, region: s3.region, endpoint: s3.endpoint },
    { credentials: s3.credentials, partPlan: plan },
  );
  opened.push(store);
  return store;
}

function streamed(data: Buffer, chunk = 16 * 1024) {
  const parts: Buffer[] = [];
  for (let i = 0; i < data.length; i += chunk) parts.push(data.subarray(i, i + chunk));
  return bytesOf(...parts);
}

describe('the upload loop on s3rver at a small scale (64 KiB base part, 20 parts an upload)', () => {
  const plan = { base: 64 * 1024, maxParts: 20, align: 64 * 1024 };

  it('a stream of unknown size crosses part-size steps and fits where fixed 64 KiB parts could not', async () => {
    const store = await smallScaleStore(plan);
    const data = randomBytes(3 * MiB);
    assert.ok(Math.ceil(data.length / plan.base) > plan.maxParts, 'fixed parts would need more than 20');
    store.resetStats();
    const result = await store.put('artifacts/x/v1/big', streamed(data), { expectedDigest: sha256(data) });
    assert.deepEqual(result, { digest: sha256(data), size: data.length });
    // 64K 64K 128K 128K 256K 256K 512K 512K 1M 1M (the last one short): 10 parts.
    const stats = store.stats();
    assert.equal(stats.UploadPart, 10, JSON.stringify(stats));
    assert.equal(stats.CompleteMultipartUpload, 1);
    assert.deepEqual(await collect(await store.get('artifacts/x/v1/big', result.digest)), data);
  });

  it('a declared size fixes the parts at partSizeFor(size)', async () => {
    const store = await smallScaleStore(plan);
    const data = randomBytes(3 * MiB);
    store.resetStats();
    await store.put('artifacts/x/v1/declared', streamed(data), { expectedDigest: sha256(data), sizeHint: data.length });
    const part = partSizeFor(data.length, plan);
    assert.equal(part, 192 * 1024);
    assert.equal(store.stats().UploadPart, Math.ceil(data.length / part));
    assert.deepEqual(await collect(await store.get('artifacts/x/v1/declared', sha256(data))), data);
  });

  it('a body past what the parts can hold fails TOO_LARGE and leaves nothing; a wrong digest completes nothing', async () => {
    const store = await smallScaleStore({ base: 64 * 1024, maxParts: 4, align: 64 * 1024 });
    const data = randomBytes(2 * MiB);
    await assert.rejects(store.put('artifacts/x/v1/huge', streamed(data)), TooLarge);
    assert.equal(await store.head('artifacts/x/v1/huge'), undefined);
    const fits = randomBytes(700 * 1024);
    await assert.rejects(store.put('artifacts/x/v1/wrong', streamed(fits), { expectedDigest: sha256('other') }), /does not match/);
    assert.equal(await store.head('artifacts/x/v1/wrong'), undefined);
    await assert.rejects(store.put('artifacts/x/v1/over', bytesOf('x'), { sizeHint: S3_MAX_OBJECT_BYTES + 1 }), TooLarge);
  });
});
