/**
 * The ContentStore contract as tests, run unchanged against every engine (test/content/*.test.ts pass
 * a harness). Each test writes under its own prefix.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { ContentStore } from '../../src/content/content-store.ts';
import { sha256 } from '../../src/core/digest.ts';
import { IntegrityError, InvalidInput, NotFound, TooLarge } from '../../src/core/errors.ts';
import { bytesOf, collect } from '../helpers/tmp.ts';

export interface ContentStoreHarness {
  name: string;
  open(): Promise<ContentStore>;
  /** Overwrites the stored bytes of `key` behind the engine's back (bit rot, tampering). */
  corrupt(store: ContentStore, key: string, bytes: Buffer): Promise<void>;
  runs: number;
}

export const REJECTED_KEYS: Array<[string, string]> = [
  ['', 'empty'],
  ['../escape', 'parent segment'],
  ['a/../../escape', 'parent segment inside'],
  ['/abs/path', 'absolute'],
  ['a//b', 'empty segment'],
  ['a/./b', 'dot segment'],
  ['a/', 'trailing slash'],
  ['a\\b', 'backslash'],
  ['..\\..\\win', 'backslash traversal'],
  ['a/b\u0000c', 'NUL'],
  ['a/\u0007bell', 'control character'],
  ['a/\u202eevil', 'RTL override'],
  [`a/${'x'.repeat(256)}`, 'segment over 255 bytes'],
  [`a/${'y/'.repeat(520)}z`, 'key over 1024 bytes'],
  ['a/.alp-tmp-1-x', 'reserved temp prefix'],
  ['a/\ud800', 'lone surrogate'],
];

export function contentStoreConformance(h: ContentStoreHarness): void {
  describe(`ContentStore conformance: ${h.name}`, () => {
    let store: ContentStore;
    const ns = () => `t${randomUUID().slice(0, 8)}`;
    before(async () => {
      store = await h.open();
    });
    after(async () => {
      await store.close();
    });

    it('put streams once and returns the digest and size; get returns the same bytes', async () => {
      const n = ns();
      const data = randomBytes(3 * 1024 * 1024 + 17);
      const result = await store.put(`${n}/obj.bin`, bytesOf(data.subarray(0, 1000), data.subarray(1000)));
      assert.deepEqual(result, { digest: sha256(data), size: data.length });
      assert.deepEqual(await collect(await store.get(`${n}/obj.bin`, result.digest)), data);
      assert.deepEqual(await store.head(`${n}/obj.bin`), { key: `${n}/obj.bin`, size: data.length, storageClass: 'STANDARD' });
    });

    it('stores an empty object', async () => {
      const n = ns();
      const result = await store.put(`${n}/empty`, bytesOf());
      assert.deepEqual(result, { digest: sha256(''), size: 0 });
      assert.equal((await collect(await store.get(`${n}/empty`, result.digest))).length, 0);
    });

    it('a put whose bytes do not match expectedDigest leaves nothing at the key', async () => {
      const n = ns();
      await assert.rejects(store.put(`${n}/x`, bytesOf('hello'), { expectedDigest: sha256('other') }), IntegrityError);
      assert.equal(await store.head(`${n}/x`), undefined);
      assert.deepEqual((await store.listPage(`${n}/`)).objects, []);
      const ok = await store.put(`${n}/x`, bytesOf('hello'), { expectedDigest: sha256('hello') });
      assert.equal(ok.digest, sha256('hello'));
    });

    it('a put past maxBytes fails with TooLarge and leaves nothing', async () => {
      const n = ns();
      await assert.rejects(store.put(`${n}/big`, bytesOf(Buffer.alloc(5000)), { maxBytes: 4096 }), TooLarge);
      assert.equal(await store.head(`${n}/big`), undefined);
      assert.deepEqual((await store.listPage(`${n}/`)).objects, []);
    });

    it('a failing body leaves nothing at the key', async () => {
      const n = ns();
      async function* broken() {
        yield Buffer.from('partial');
        throw new Error('client went away');
      }
      await assert.rejects(store.put(`${n}/broken`, broken()), /client went away/);
      assert.equal(await store.head(`${n}/broken`), undefined);
      assert.deepEqual((await store.listPage(`${n}/`)).objects, []);
    });

    it('get of a missing key rejects with NotFound', async () => {
      const n = ns();
      await assert.rejects(store.get(`${n}/missing`, sha256('')), NotFound);
      assert.equal(await store.head(`${n}/missing`), undefined);
    });

    it('get fails with IntegrityError before the end when the digest does not match, holding back the tail', async () => {
      const n = ns();
      const data = randomBytes(3 * 1024 * 1024);
      await store.put(`${n}/o`, bytesOf(data));
      const stream = await store.get(`${n}/o`, sha256('not these bytes'));
      const received: Buffer[] = [];
      await assert.rejects(
        (async () => {
          for await (const c of stream) received.push(c as Buffer);
        })(),
        IntegrityError,
      );
      assert.ok(Buffer.concat(received).length < data.length, 'the consumer must not receive every byte');
    });

    it('detects bytes corrupted behind its back, including a single flipped bit', async () => {
      const n = ns();
      const data = randomBytes(200_000);
      const { digest } = await store.put(`${n}/o`, bytesOf(data));
      const flipped = Buffer.from(data);
      flipped[123_456] = (flipped[123_456] as number) ^ 1;
      await h.corrupt(store, `${n}/o`, flipped);
      await assert.rejects(collect(await store.get(`${n}/o`, digest)), IntegrityError);
      await h.corrupt(store, `${n}/o`, data.subarray(0, 1000));
      await assert.rejects(collect(await store.get(`${n}/o`, digest, { expectedSize: data.length })), IntegrityError);
    });

    it('range reads return exactly the requested bytes and still verify the whole object', async () => {
      const n = ns();
      const data = randomBytes(2 * 1024 * 1024 + 5);
      const { digest } = await store.put(`${n}/r`, bytesOf(data));
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 0, max: data.length - 1 }), fc.integer({ min: 0, max: data.length - 1 }), async (a, b) => {
          const [start, end] = a <= b ? [a, b] : [b, a];
          const got = await collect(await store.get(`${n}/r`, digest, { start, end }));
          assert.deepEqual(got, data.subarray(start, end + 1));
        }),
        { numRuns: Math.max(5, Math.floor(h.runs / 4)) },
      );
      await assert.rejects(collect(await store.get(`${n}/r`, sha256('x'), { start: 0, end: 10 })), IntegrityError);
      await assert.rejects(store.get(`${n}/r`, digest, { start: data.length, end: data.length + 5 }), InvalidInput);
    });

    it('readRaw returns the stored bytes unverified (maintenance scans), NotFound when absent', async () => {
      const n = ns();
      await store.put(`${n}/raw`, bytesOf('original'));
      await h.corrupt(store, `${n}/raw`, Buffer.from('tampered!'));
      assert.equal((await collect(await store.readRaw(`${n}/raw`))).toString(), 'tampered!');
      await assert.rejects(store.readRaw(`${n}/none`), NotFound);
      await assert.rejects(store.readRaw('../escape'), InvalidInput);
    });

    it('staged objects are published together, durable and whole; discarded ones leave nothing', async () => {
      const n = ns();
      const a = await store.stage(`${n}/s/a`, bytesOf('first'));
      const b = await store.stage(`${n}/s/sub/b`, bytesOf('second'), { expectedDigest: sha256('second') });
      assert.deepEqual([a.digest, b.size], [sha256('first'), 6]);
      await store.publish([a, b]);
      assert.equal((await collect(await store.get(`${n}/s/a`, a.digest))).toString(), 'first');
      assert.equal((await collect(await store.get(`${n}/s/sub/b`, b.digest))).toString(), 'second');
      const dropped = await store.stage(`${n}/s/dropped`, bytesOf('never'));
      await store.discard([dropped]);
      assert.equal(await store.head(`${n}/s/dropped`), undefined);
      assert.deepEqual(
        (await store.listPage(`${n}/s/`)).objects.map((o) => o.key),
        [`${n}/s/a`, `${n}/s/sub/b`],
      );
      await assert.rejects(store.stage(`${n}/s/bad`, bytesOf('x'), { expectedDigest: sha256('y') }), IntegrityError);
      assert.equal(await store.head(`${n}/s/bad`), undefined);
    });

    it('a put over an existing key replaces it atomically', async () => {
      const n = ns();
      await store.put(`${n}/k`, bytesOf('one'));
      const second = await store.put(`${n}/k`, bytesOf('two!'));
      assert.equal((await collect(await store.get(`${n}/k`, second.digest))).toString(), 'two!');
    });

    it('lists keys under a prefix in UTF-8 byte order, paginated, each exactly once', async () => {
      const n = ns();
      const keys = [`${n}/a-c`, `${n}/a/b`, `${n}/a/b2/c`, `${n}/a0`, `${n}/b/é`, `${n}/b/z`, `${n}/ab`];
      for (const k of keys) await store.put(k, bytesOf(k));
      await store.put(`${n}x/outside`, bytesOf('no'));
      const expected = [...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
      for (const limit of [1, 2, 3, 1000]) {
        const seen: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await store.listPage(`${n}/`, cursor ? { cursor, limit } : { limit });
          seen.push(...page.objects.map((o) => o.key));
          cursor = page.cursor;
        } while (cursor);
        assert.deepEqual(seen, expected, `limit ${limit}`);
      }
      const viaIterator: string[] = [];
      for await (const o of store.list(`${n}/a/`)) viaIterator.push(o.key);
      assert.deepEqual(viaIterator, [`${n}/a/b`, `${n}/a/b2/c`]);
      const partial: string[] = [];
      for await (const o of store.list(`${n}/a`)) partial.push(o.key);
      assert.deepEqual(partial, [`${n}/a-c`, `${n}/a/b`, `${n}/a/b2/c`, `${n}/a0`, `${n}/ab`]);
      assert.deepEqual((await store.listPage(`${n}-none/`)).objects, []);
    });

    it('copy verifies the source and writes a verified copy; a corrupted source copies nothing', async () => {
      const n = ns();
      const { digest } = await store.put(`${n}/src`, bytesOf('copy me'));
      const copied = await store.copy(`${n}/src`, `${n}/archive/dst`, { expectedDigest: digest, storageClass: 'GLACIER' });
      assert.deepEqual(copied, { digest, size: 7 });
      assert.equal((await collect(await store.get(`${n}/archive/dst`, digest))).toString(), 'copy me');
      await h.corrupt(store, `${n}/src`, Buffer.from('copy mE'));
      await assert.rejects(store.copy(`${n}/src`, `${n}/archive/dst2`, { expectedDigest: digest }), IntegrityError);
      assert.equal(await store.head(`${n}/archive/dst2`), undefined);
    });

    it('delete removes durably and is idempotent', async () => {
      const n = ns();
      await store.put(`${n}/d`, bytesOf('bye'));
      assert.equal(await store.delete(`${n}/d`), true);
      assert.equal(await store.head(`${n}/d`), undefined);
      assert.equal(await store.delete(`${n}/d`), false);
      await assert.rejects(store.get(`${n}/d`, sha256('bye')), NotFound);
    });

    it('refuses every malformed or escaping key before touching storage', async () => {
      for (const [key, why] of REJECTED_KEYS) {
        await assert.rejects(store.put(key, bytesOf('x')), InvalidInput, `put ${why}`);
        await assert.rejects(store.get(key, sha256('x')), InvalidInput, `get ${why}`);
        await assert.rejects(store.delete(key), InvalidInput, `delete ${why}`);
      }
    });

    it('round-trips arbitrary contents and keys (property)', async () => {
      const n = ns();
      await fc.assert(
        fc.asyncProperty(
          fc.stringMatching(/^[A-Za-z0-9._ é-]{1,20}$/).filter((s) => s !== '.' && s !== '..' && !s.startsWith('.alp-')),
          fc.uint8Array({ maxLength: 5000 }),
          async (name, data) => {
            const key = `${n}/p/${name}`;
            const { digest, size } = await store.put(key, bytesOf(data));
            assert.equal(size, data.length);
            assert.deepEqual(await collect(await store.get(key, digest)), Buffer.from(data));
          },
        ),
        { numRuns: h.runs },
      );
    });
  });
}
