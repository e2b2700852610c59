/**
 * The ContentStore contract as tests, run unchanged against every engine (test/content/*.test.ts pass
 * a harness). Each test writes under its own prefix.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { ContentStore, StagedObject } from '../../src/content/content-store.ts';
import { type Digest, sha256 } from '../../src/core/digest.ts';
import { Conflict, IntegrityError, InvalidInput, NotFound, StorageFailure, Throttled, TooLarge } from '../../src/core/errors.ts';
import { bytesOf, collect } from '../helpers/tmp.ts';

export interface ContentStoreHarness {
  name: string;
  open(): Promise<ContentStore>;
  /** Overwrites the stored bytes of `key` behind the engine's back (bit rot, tampering). */
  corrupt(store: ContentStore, key: string, bytes: Buffer): Promise<void>;
  runs: number;
  /** A store whose disk fails every fsync with EIO (fs: the engine's fault seam). */
  failingDisk?(): Promise<ContentStore>;
  /** A store whose storage cannot be reached (S3: a loopback port nobody listens on). */
  unreachable?(): Promise<ContentStore>;
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

// Long by nature: a suite registers one short, independent test per clause of the contract.
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

    describe('declared errors (content-store.ts, ERRORS)', () => {
      it('a range outside the object or a negative offset is InvalidInput; a range past the end says it is not satisfiable', async () => {
        const n = ns();
        const { digest } = await store.put(`${n}/r`, bytesOf('0123456789'));
        for (const bad of [{ start: 10 }, { start: 5, end: 4 }, { start: 10, end: 12 }]) {
          await assert.rejects(
            store.get(`${n}/r`, digest, bad),
            (e: unknown) => e instanceof InvalidInput && e.details?.rangeNotSatisfiable === true && e.details.size === 10,
          );
        }
        for (const bad of [{ start: -1 }, { end: 1.5 }, { expectedSize: -3 }]) {
          await assert.rejects(store.get(`${n}/r`, digest, bad), InvalidInput);
        }
        assert.equal((await collect(await store.get(`${n}/r`, digest, { start: 8 }))).toString(), '89');
      });

      it('a list cursor is valid only for the prefix it came from; a fractional limit is rounded down', async () => {
        const n = ns();
        for (const k of ['a', 'b', 'c']) await store.put(`${n}/p/${k}`, bytesOf(k));
        await store.put(`${n}/q/a`, bytesOf('q'));
        const page = await store.listPage(`${n}/p/`, { limit: 1.5 });
        assert.deepEqual(
          page.objects.map((o) => o.key),
          [`${n}/p/a`],
        );
        assert.ok(page.cursor);
        await assert.rejects(store.listPage(`${n}/q/`, { cursor: page.cursor }), InvalidInput);
        await assert.rejects(store.listPage(`${n}/p/`, { cursor: '' }), InvalidInput);
        await assert.rejects(store.listPage(`${n}/p/`, { cursor: 'x'.repeat(5000) }), InvalidInput);
        assert.deepEqual(
          (await store.listPage(`${n}/p/`, { cursor: page.cursor })).objects.map((o) => o.key),
          [`${n}/p/b`, `${n}/p/c`],
        );
      });

      it('an absent key is NotFound for get, readRaw and copy; head answers undefined; delete answers false', async () => {
        const n = ns();
        await assert.rejects(store.get(`${n}/none`, sha256('x')), NotFound);
        await assert.rejects(store.readRaw(`${n}/none`), NotFound);
        await assert.rejects(store.copy(`${n}/none`, `${n}/copy`, { expectedDigest: sha256('x') }), NotFound);
        assert.equal(await store.head(`${n}/none`), undefined);
        assert.equal(await store.delete(`${n}/none`), false);
      });

      const { failingDisk, unreachable } = h;
      // Engines name the failures they can induce; each one named is checked.
      if (failingDisk)
        it('a failing disk fails the put with StorageFailure naming the errno, and nothing is left at the key', async () => {
          const bad = await failingDisk();
          try {
            const n = ns();
            await assert.rejects(
              bad.put(`${n}/x`, bytesOf('hello')),
              (e: unknown) => e instanceof StorageFailure && e.code === 'STORAGE' && /\bEIO\b/.test(e.message),
            );
            assert.equal(await bad.head(`${n}/x`), undefined);
          } finally {
            await bad.close();
          }
        });
      if (unreachable)
        it('unreachable storage fails with Throttled (the request did not reach it), never an engine error', async () => {
          const down = await unreachable();
          try {
            const n = ns();
            const throttled = (e: unknown) => e instanceof Throttled && e.code === 'THROTTLED';
            await assert.rejects(down.get(`${n}/x`, sha256('x')), throttled);
            await assert.rejects(down.head(`${n}/x`), throttled);
            await assert.rejects(down.listPage(`${n}/`), throttled);
            await assert.rejects(down.put(`${n}/x`, bytesOf('x')), throttled);
          } finally {
            await down.close();
          }
        });
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
      // (Astral keys: fs.test.ts. s3rver compares StartAfter in UTF-16 code units, where U+1F600 sorts
      // below U+FF5E; S3 and the fs engine order by UTF-8 bytes.)
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
      const whole: Array<{ key: string; size: number }> = [];
      for await (const o of store.list(`${n}/`)) whole.push({ key: o.key, size: o.size });
      assert.deepEqual(
        whole,
        expected.map((k) => ({ key: k, size: Buffer.byteLength(k) })),
        'list() is the pages, in order',
      );
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

/**
 * Issue 14 item 1 as the contract: a committed immutable key is never rewritten. Run on both engines;
 * the S3 engine runs it through the conditional-write proxy (test/helpers/s3-conditional-proxy.ts),
 * since s3rver itself ignores If-None-Match.
 */
// Long by nature: a suite registers one short, independent test per clause of the contract.
export function immutableKeyConformance(h: Pick<ContentStoreHarness, 'name' | 'open' | 'corrupt'>): void {
  describe(`ContentStore conformance, immutable keys: ${h.name}`, () => {
    let store: ContentStore;
    const ns = () => `t${randomUUID().slice(0, 8)}`;
    before(async () => {
      store = await h.open();
    });
    after(async () => {
      await store.close();
    });

    it('issue 14 item 1: a put over a committed immutable key fails with CONFLICT and the committed bytes stay', async () => {
      for (const key of [`artifacts/${ns()}/v1/f.bin`, `executions/${ns()}/output.json`, `archive/2026/03/${ns()}/v1/f.bin`]) {
        const first = await store.put(key, bytesOf('committed'));
        await assert.rejects(store.put(key, bytesOf('late writer')), (e: unknown) => e instanceof Conflict && e.code === 'CONFLICT', key);
        assert.equal((await collect(await store.get(key, first.digest))).toString(), 'committed', key);
        // The same bytes again (a retry) are success and change nothing.
        assert.deepEqual(await store.put(key, bytesOf('committed'), { expectedDigest: first.digest }), first);
        assert.deepEqual(
          (await store.listPage(key)).objects.map((o) => o.key),
          [key],
        );
      }
    });

    it('issue 14 item 1: of two concurrent writers of one immutable key exactly one wins, the other gets CONFLICT', async () => {
      const key = `executions/${ns()}/stdout.log`;
      const bodies = ['writer one', 'writer two', 'writer three'];
      const results = await Promise.allSettled(bodies.map((b) => store.put(key, bytesOf(b))));
      const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
      assert.equal(won.length, 1, JSON.stringify(results.map((r) => r.status)));
      for (const r of results) if (r.status === 'rejected') assert.ok(r.reason instanceof Conflict, String(r.reason));
      const winner = bodies[won[0] as number] as string;
      assert.equal((await collect(await store.get(key, sha256(winner)))).toString(), winner);
    });

    it('issue 14 item 1: a multipart-sized put over a committed key is refused and leaves the key as it was', async () => {
      const key = `artifacts/${ns()}/v1/big.bin`;
      const first = await store.put(key, bytesOf('small'));
      const big = randomBytes(9 * 1024 * 1024 + 3);
      await assert.rejects(store.put(key, bytesOf(big)), Conflict);
      assert.equal((await collect(await store.get(key, first.digest))).toString(), 'small');
      const other = `artifacts/${ns()}/v1/big.bin`;
      const put = await store.put(other, bytesOf(big));
      assert.deepEqual(await store.put(other, bytesOf(big)), put, 'identical multipart bytes are success');
    });

    it('issue 14 item 1: a staged object loses to bytes published meanwhile; nothing of it stays', async () => {
      const n = ns();
      const key = `artifacts/${n}/v1/f`;
      const late = await store.stage(key, bytesOf('staged first, published last')).catch((e: unknown) => e);
      const winner = await store.put(key, bytesOf('published first')).catch((e: unknown) => e);
      // fs: the stage is invisible, the put wins and the publish loses. S3: the stage is already the
      // publication, so the put loses. Either way exactly one is at the key and the loser is CONFLICT.
      if (winner instanceof Conflict) {
        assert.equal((await collect(await store.get(key, (late as { digest: Digest }).digest))).toString(), 'staged first, published last');
        await store.publish([late as StagedObject]);
      } else {
        await assert.rejects(store.publish([late as StagedObject]), Conflict);
        assert.equal((await collect(await store.get(key, sha256('published first')))).toString(), 'published first');
      }
      assert.deepEqual(
        (await store.listPage(`artifacts/${n}/`)).objects.map((o) => o.key),
        [key],
      );
    });

    it('issue 18 item 1: fresh keys (written in place on fs) publish whole bytes; refused, failed and discarded ones leave nothing', async () => {
      const n = ns();
      const [a, m] = [`artifacts/${n}/v1/f.txt`, `artifacts/${n}/v1/metadata.json`];
      const content = await store.stage(a, [Buffer.from('fresh content')], { fresh: true });
      const meta = await store.stage(m, [Buffer.from('{"m":1}\n')], { fresh: true });
      await store.publish([content, meta]);
      assert.equal((await collect(await store.get(a, sha256('fresh content')))).toString(), 'fresh content');
      assert.equal((await collect(await store.get(m, meta.digest))).toString(), '{"m":1}\n');
      await assert.rejects(
        store.stage(`artifacts/${n}/v2/bad`, [Buffer.from('x')], { fresh: true, expectedDigest: sha256('y') }),
        IntegrityError,
      );
      await assert.rejects(store.stage(`artifacts/${n}/v2/big`, [Buffer.from('too many bytes')], { fresh: true, maxBytes: 4 }), TooLarge);
      const dropped = await store.stage(`artifacts/${n}/v2/dropped`, [Buffer.from('never')], { fresh: true });
      await store.discard([dropped]);
      assert.deepEqual(
        (await store.listPage(`artifacts/${n}/`)).objects.map((o) => o.key),
        [a, m],
      );
      // Still create-only when something is at the key: the same bytes are a retry, others CONFLICT.
      await store.publish([await store.stage(a, [Buffer.from('fresh content')], { fresh: true })]);
      await assert.rejects(
        store.stage(a, [Buffer.from('other bytes')], { fresh: true }).then((s) => store.publish([s])),
        Conflict,
      );
      assert.equal((await collect(await store.get(a, sha256('fresh content')))).toString(), 'fresh content');
    });

    it('issue 14 item 1: discarding a staged object never deletes bytes another writer put at the key', async () => {
      const key = `executions/${ns()}/stderr.log`;
      const first = await store.put(key, bytesOf('theirs'));
      const mine = await store.stage(key, bytesOf('theirs'));
      await store.discard([mine]);
      assert.equal((await collect(await store.get(key, first.digest))).toString(), 'theirs');
    });

    it('issue 14 item 1: copy onto an existing archive key: the same bytes are success, others CONFLICT', async () => {
      const n = ns();
      const a = await store.put(`artifacts/${n}/v1/a`, bytesOf('aaa'));
      const b = await store.put(`artifacts/${n}/v1/b`, bytesOf('bbb'));
      const target = `archive/2026/03/${n}/v1/a`;
      await store.copy(`artifacts/${n}/v1/a`, target, { expectedDigest: a.digest, storageClass: 'GLACIER' });
      assert.deepEqual(await store.copy(`artifacts/${n}/v1/a`, target, { expectedDigest: a.digest, storageClass: 'GLACIER' }), a);
      await assert.rejects(store.copy(`artifacts/${n}/v1/b`, target, { expectedDigest: b.digest }), Conflict);
      assert.equal((await collect(await store.get(target, a.digest))).toString(), 'aaa');
    });

    it('issue 14 item 1: provenance documents stay replaceable; repair replaces only damaged immutable bytes', async () => {
      const n = ns();
      await store.put(`provenance/${n}.json`, bytesOf('{"v":1}'));
      const v2 = await store.put(`provenance/${n}.json`, bytesOf('{"v":2}'));
      assert.equal((await collect(await store.get(`provenance/${n}.json`, v2.digest))).toString(), '{"v":2}');
      const key = `artifacts/${n}/v1/r`;
      const good = await store.put(key, bytesOf('good bytes'));
      await h.corrupt(store, key, Buffer.from('rotten'));
      await assert.rejects(store.put(key, bytesOf('good bytes'), { expectedDigest: good.digest }), Conflict);
      await store.put(key, bytesOf('good bytes'), { expectedDigest: good.digest, repair: true });
      assert.equal((await collect(await store.get(key, good.digest))).toString(), 'good bytes');
    });
  });
}
