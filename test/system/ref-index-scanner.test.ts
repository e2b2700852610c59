/**
 * The push scanner of the reference index (core/digest-scan.ts ReferenceScanner, issue 17 item 1):
 * bytes pushed as they stream through a write, in chunks of any size, give exactly the digests the
 * retention scan's `scanForDigests` finds in the whole buffer — straddling 64 KiB reads, inside gzip,
 * however the stream is cut (a gzip object whose first chunk is one byte included).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { ReferenceScanner, SCAN_CHUNK_BYTES, scanForDigests } from '../../src/core/digest-scan.ts';
import { IntegrityError, InvalidInput } from '../../src/core/errors.ts';

const digestOf = (s: string) => `sha256:${createHash('sha256').update(s).digest('hex')}`;

/** Pushes `data` cut at `cuts` (sorted offsets) and finishes. */
async function pushed(data: Buffer, cuts: number[], opts: ConstructorParameters<typeof ReferenceScanner>[0] = {}) {
  const s = new ReferenceScanner(opts);
  let at = 0;
  for (const c of [...cuts, data.length]) {
    await s.push(data.subarray(at, c));
    at = c;
  }
  return { found: await s.finish(), scanner: s };
}

/** Filler bytes rich in the pattern's own characters, so near-misses and overlaps are common. */
const filler = fc.uint8Array({ minLength: 0, maxLength: 3000 }).map((a) => {
  const alphabet = Buffer.from('sha256:0123456789abcdefABCDEF \n\u00ff');
  return Buffer.from(Array.from(a, (b) => alphabet[b % alphabet.length] as number));
});

/** A buffer of filler with digests planted at random offsets (some near 64 KiB boundaries). */
const planted = fc
  .record({
    base: filler,
    pad: fc.constantFrom(0, 0, SCAN_CHUNK_BYTES - 40, 2 * SCAN_CHUNK_BYTES - 70),
    plants: fc.array(fc.tuple(fc.string({ maxLength: 8 }), fc.nat()), { maxLength: 6 }),
    gzip: fc.boolean(),
  })
  .map(({ base, pad, plants, gzip }) => {
    let data = Buffer.concat([Buffer.alloc(pad, 0x61), base]);
    for (const [seed, at] of plants) {
      const d = digestOf(seed);
      const off = at % (data.length + 1);
      data = Buffer.concat([data.subarray(0, off), Buffer.from(d), data.subarray(off)]);
    }
    return { data: gzip ? gzipSync(data) : data, plain: data, gzip };
  });

const withCuts = planted.chain((p) =>
  fc
    .uniqueArray(fc.integer({ min: 0, max: Math.max(0, p.data.length) }), { maxLength: 12 })
    .map((cuts) => ({ ...p, cuts: [...cuts].sort((a, b) => a - b) })),
);

describe('reference scanner (push form)', () => {
  test('for random bytes with planted digests and random chunkings it finds exactly what scanForDigests finds on the whole buffer', async () => {
    await fc.assert(
      fc.asyncProperty(withCuts, async ({ data, plain, cuts }) => {
        const whole = await scanForDigests(Readable.from([data]));
        const { found } = await pushed(data, cuts);
        assert.deepEqual([...found].sort(), [...whole].sort());
        // Every digest in the (decompressed) bytes, by a plain regex over the whole of them.
        for (const m of plain.toString('latin1').matchAll(/sha256:[0-9a-f]{64}/g)) assert.ok(found.has(m[0]), `${m[0]} found`);
      }),
      { numRuns: 150 },
    );
  });

  test('scanForDigests itself gives the same answer however the stream is cut (a gzip head of one byte included)', async () => {
    const d = digestOf('inside');
    const gz = gzipSync(Buffer.from(`x ${d} y`));
    const oneByteHead = await scanForDigests(Readable.from([gz.subarray(0, 1), gz.subarray(1)]));
    assert.ok(oneByteHead.has(d));
  });

  test('a digest straddling a 64 KiB read is found', async () => {
    const d = digestOf('straddle');
    const data = Buffer.concat([Buffer.alloc(SCAN_CHUNK_BYTES - 30, 0x20), Buffer.from(d), Buffer.alloc(10, 0x20)]);
    const { found } = await pushed(data, []);
    assert.deepEqual([...found], [d]);
  });

  test('pushed one byte at a time, every digest is still found (the carry across reads shorter than a match)', async () => {
    const ds = [digestOf('one'), digestOf('two'), digestOf('three')];
    const data = Buffer.from(`x${ds[0]}${ds[1]}sha256:${'a'.repeat(63)} ${ds[2]}`);
    const s = new ReferenceScanner();
    for (let i = 0; i < data.length; i++) await s.push(data.subarray(i, i + 1));
    assert.deepEqual([...(await s.finish())].sort(), [...ds].sort());
  });

  test('past maxDigests the scan reports overflow (and stops collecting)', async () => {
    const many = Array.from({ length: 50 }, (_, i) => digestOf(`d${i}`)).join('\n');
    const { found, scanner } = await pushed(Buffer.from(many), [100, 2000], { maxDigests: 10 });
    assert.equal(scanner.overflow, true);
    assert.ok(found.size > 10 && found.size < 50);
    const gz = await pushed(gzipSync(Buffer.from(many)), [5], { maxDigests: 10 });
    assert.equal(gz.scanner.overflow, true);
    const under = await pushed(Buffer.from(many), [], { maxDigests: 50 });
    assert.equal(under.scanner.overflow, false);
    assert.equal(under.found.size, 50);
  });

  test('a decompression bomb fails the scan (INVALID) without push throwing; required gzip that is not fails with INTEGRITY', async () => {
    const bomb = gzipSync(Buffer.alloc(4 * 1024 * 1024));
    const s = new ReferenceScanner({ maxDecompressed: 1024 * 1024, what: 'object bomb' });
    for (let i = 0; i < bomb.length; i += 1000) await s.push(bomb.subarray(i, i + 1000));
    await assert.rejects(s.finish(), InvalidInput);
    assert.ok(s.failed instanceof InvalidInput);

    const notGz = new ReferenceScanner({ requireGzip: true });
    await notGz.push(Buffer.from('plain'));
    await assert.rejects(notGz.finish(), IntegrityError);
    const empty = new ReferenceScanner({ requireGzip: true });
    await assert.rejects(empty.finish(), IntegrityError);
    const truncated = new ReferenceScanner({ requireGzip: true });
    await truncated.push(gzipSync(Buffer.from('x'.repeat(1000))).subarray(0, 12));
    await assert.rejects(truncated.finish(), IntegrityError);
  });

  test('content that only starts like gzip keeps its raw digests (not required gzip)', async () => {
    const d = digestOf('raw');
    const data = Buffer.concat([Buffer.from([0x1f, 0x8b, 0x00]), Buffer.from(` ${d} `)]);
    const { found } = await pushed(data, [1, 2]);
    assert.deepEqual([...found], [d]);
  });

  test('an abandoned scan finishes with an error, never a result', async () => {
    const s = new ReferenceScanner();
    await s.push(Buffer.from(digestOf('a')));
    s.abort();
    await assert.rejects(s.finish());
  });
});
