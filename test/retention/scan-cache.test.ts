/**
 * The retention plan's reference cache (src/retention/scan-cache.ts) against a whole scan: for random
 * histories (objects written, removed and written again with other bytes, keys and digests named by
 * items, index entries dropped, naming items deleted, references written before the objects they name, pins added and removed), a scan started
 * from the cache finds exactly the candidates a whole scan finds — or, once a naming item was deleted
 * (deletes are not in the change log), a subset of them (more kept, never fewer) until the cache is
 * rebuilt. Plus the cases that must rebuild it: age, a releasing change, another identity, a damaged
 * file, a store that cannot answer changes from a log.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { sha256 } from '../../src/core/digest.ts';
import { addPin, removePin } from '../../src/retention/pins.ts';
import { type ReferenceScan, scanReferences } from '../../src/retention/references.ts';
import { CACHE_MAX_AGE_MS, type ScanCacheOptions, scanCacheFile } from '../../src/retention/scan-cache.ts';
import { contentRootId, deleteRefIndexEntry } from '../../src/system/ref-index.ts';
import { embeddedContext, type TestContext } from '../helpers/context.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';

const human = { id: 'os:tester', kind: 'human' as const };
const keyOf = (i: number) => `artifacts/C${i}/v1/f`;

type Step =
  | { op: 'object'; i: number; names: number[] }
  | { op: 'nameKey'; i: number }
  | { op: 'nameDigest'; i: number }
  | { op: 'unindex'; i: number }
  | { op: 'remove'; i: number }
  | { op: 'rewrite'; i: number; names: number[] }
  | { op: 'unname'; i: number }
  | { op: 'pin'; i: number }
  | { op: 'unpin'; i: number };

const N = 8;
const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({ op: fc.constant('object' as const), i: fc.nat(N - 1), names: fc.uniqueArray(fc.nat(N - 1), { maxLength: 2 }) }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('nameKey' as const), i: fc.nat(N - 1) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('nameDigest' as const), i: fc.nat(N - 1) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('unindex' as const), i: fc.nat(N - 1) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('remove' as const), i: fc.nat(N - 1) }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('rewrite' as const), i: fc.nat(N - 1), names: fc.uniqueArray(fc.nat(N - 1), { maxLength: 2 }) }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('unname' as const), i: fc.nat(N - 1) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('pin' as const), i: fc.nat(N - 1) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('unpin' as const), i: fc.nat(N - 1) }) },
);

/** Object i's bytes: they name the digests of the objects in `names` (fixed per i: its first write decides). */
function bodyOf(i: number, names: number[]): string {
  return `object ${i} names ${names.map((j) => sha256(`leaf ${j}`)).join(' ')} and ${sha256(`leaf ${i}`)}\n`;
}

async function apply(ctx: TestContext, s: Step, written: Map<number, string>): Promise<boolean> {
  const root = contentRootId(ctx.content.location);
  switch (s.op) {
    case 'object':
      if (written.has(s.i)) return false;
      written.set(s.i, bodyOf(s.i, s.names));
      await ctx.content.put(keyOf(s.i), bytesOf(written.get(s.i) as string));
      // A leaf whose digest the bytes above name (so a referenced object keeps it).
      await ctx.content.put(`artifacts/L${s.i}/v1/f`, bytesOf(`leaf ${s.i}`)).catch(() => {});
      return false;
    case 'nameKey':
      // Possibly before the object exists: an old reference to a new object.
      await ctx.items.put({ PK: `TEST#key${s.i}`, SK: 'x', type: 'note', names: keyOf(s.i) });
      return false;
    case 'nameDigest':
      await ctx.items.put({ PK: `TEST#digest${s.i}`, SK: 'x', type: 'note', names: `uses ${sha256(`leaf ${s.i}`)}` });
      return false;
    case 'remove':
      // The object goes (a purge); a later write of i puts other bytes (other names) at the same key.
      written.delete(s.i);
      return ctx.content.delete(keyOf(s.i)).then(() => true);
    case 'rewrite':
      // Other bytes at the same key between two scans (often of the same size: the listing alone cannot tell).
      if (!written.has(s.i)) return false;
      await ctx.content.delete(keyOf(s.i));
      written.set(s.i, bodyOf(s.i, s.names));
      await ctx.content.put(keyOf(s.i), bytesOf(written.get(s.i) as string));
      return true;
    case 'unindex':
      await deleteRefIndexEntry(ctx.items, root, ctx.layout.index_shards, keyOf(s.i));
      return false;
    case 'unname':
      return ctx.items.delete({ PK: `TEST#key${s.i}`, SK: 'x' }).then(() => true);
    case 'pin':
      await addPin(ctx, sha256(`leaf ${s.i}`), human, 'test').catch(() => {});
      return false;
    case 'unpin':
      await removePin(ctx, sha256(`leaf ${s.i}`), human, 'test').catch(() => {});
      return false;
  }
}

const candidatesOf = (scan: ReferenceScan) => [...scan.candidates()].map((c) => c.key);

function cacheOf(ctx: TestContext, dir: string): ScanCacheOptions {
  return { file: path.join(dir, 'refs.db'), identity: `test ${contentRootId(ctx.content.location)}` };
}

describe('retention reference cache', () => {
  it('a scan from the cache finds what a whole scan finds (a subset of its candidates once a naming item was deleted)', async () => {
    let cachedScans = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 2, maxLength: 10 }), async (steps) => {
        const ctx = await embeddedContext();
        const cache = cacheOf(ctx, tempDir('alp-scan-cache'));
        const written = new Map<number, string>();
        let deletedSinceBuild = false;
        try {
          for (const s of steps) {
            deletedSinceBuild = (await apply(ctx, s, written)) || deletedSinceBuild;
            const cached = await scanReferences(ctx, { cache });
            const whole = await scanReferences(ctx, {});
            try {
              if (cached.stats.fromCache) cachedScans++;
              else deletedSinceBuild = false;
              const fromCache = candidatesOf(cached);
              const expected = candidatesOf(whole);
              if (cached.stats.fromCache && deletedSinceBuild) {
                for (const k of fromCache)
                  assert.ok(expected.includes(k), `${k} is a candidate only from the cache: ${JSON.stringify(steps)}`);
              } else assert.deepEqual(fromCache, expected, JSON.stringify(steps));
            } finally {
              cached.close();
              whole.close();
            }
          }
        } finally {
          await ctx.items.close();
        }
      }),
      {
        numRuns: 15,
        // Other bytes of the same size at a referenced key, between two scans: only its new entry tells.
        examples: [
          [
            [
              { op: 'object', i: 0, names: [1] },
              { op: 'object', i: 2, names: [] },
              { op: 'nameKey', i: 0 },
              { op: 'rewrite', i: 0, names: [2] },
            ],
          ],
        ],
      },
    );
    assert.ok(cachedScans > 15, `the cache was used (${cachedScans} scans)`);
  });

  it('is rebuilt when it is too old, belongs to another installation, is damaged, or a change releases references', async () => {
    const ctx = await embeddedContext();
    const dir = tempDir('alp-scan-cache');
    const cache = cacheOf(ctx, dir);
    const scan = async (c: ScanCacheOptions = cache) => {
      const s = await scanReferences(ctx, { cache: c });
      s.close();
      return s.stats;
    };
    try {
      await ctx.content.put(keyOf(1), bytesOf('one'));
      assert.equal((await scan()).fromCache, undefined, 'no cache yet: a whole scan');
      assert.ok(fs.existsSync(cache.file));
      const second = await scan();
      assert.equal(second.fromCache, true);
      await ctx.items.put({ PK: 'TEST#a', SK: 'x', type: 'note', names: keyOf(1) });
      assert.equal((await scan()).fromCache, true, 'an ordinary change is folded in');
      ctx.clock.advance(CACHE_MAX_AGE_MS + 1);
      assert.equal((await scan()).fromCache, undefined, 'older than CACHE_MAX_AGE_MS: rebuilt');
      assert.equal((await scan()).fromCache, true);
      assert.equal((await scan({ ...cache, identity: 'another installation' })).fromCache, undefined, 'another identity');
      await addPin(ctx, sha256('one'), human, 'keep');
      assert.equal((await scan()).fromCache, undefined, 'a pin changed: rebuilt');
      fs.writeFileSync(cache.file, 'not a database');
      assert.equal((await scan()).fromCache, undefined, 'a damaged file: a whole scan');
      assert.equal((await scan()).fromCache, true, 'and a good cache again after it');
      const noLog = Object.assign(Object.create(ctx), {
        items: Object.assign(Object.create(ctx.items), { changesAnswerable: async () => false }),
      });
      const s = await scanReferences(noLog, { cache });
      s.close();
      assert.equal(s.stats.fromCache, undefined, 'a store that cannot answer changes from a log: a whole scan');
    } finally {
      await ctx.items.close();
    }
  });

  it('is never used or written where others could write it (a planted cache could drop references)', async () => {
    const ctx = await embeddedContext();
    const open = path.join(tempDir('alp-scan-cache'), 'shared');
    fs.mkdirSync(open, { mode: 0o777 });
    fs.chmodSync(open, 0o777);
    const cache = { file: path.join(open, 'refs.db'), identity: 'test' };
    try {
      await ctx.content.put(keyOf(1), bytesOf('one'));
      for (let i = 0; i < 2; i++) {
        const s = await scanReferences(ctx, { cache });
        s.close();
        assert.equal(s.stats.fromCache, undefined);
      }
      assert.equal(fs.existsSync(cache.file), false, 'nothing written into a directory others can write');
      const own = cacheOf(ctx, tempDir('alp-scan-cache'));
      (await scanReferences(ctx, { cache: own })).close();
      assert.equal(fs.statSync(own.file).mode & 0o777, 0o600);
      fs.chmodSync(own.file, 0o666);
      const s = await scanReferences(ctx, { cache: own });
      s.close();
      assert.equal(s.stats.fromCache, undefined, 'a cache file others can write is not used');
    } finally {
      await ctx.items.close();
    }
  });

  it('lives in ALP_SCAN_CACHE_DIR, per installation and content root; off turns it off', () => {
    const before = process.env.ALP_SCAN_CACHE_DIR;
    try {
      process.env.ALP_SCAN_CACHE_DIR = '/var/tmp/x';
      const a = scanCacheFile('INST1', 'root-a');
      assert.ok(a?.startsWith('/var/tmp/x/INST1-'));
      assert.notEqual(a, scanCacheFile('INST1', 'root-b'));
      process.env.ALP_SCAN_CACHE_DIR = 'off';
      assert.equal(scanCacheFile('INST1', 'root-a'), undefined);
    } finally {
      if (before === undefined) delete process.env.ALP_SCAN_CACHE_DIR;
      else process.env.ALP_SCAN_CACHE_DIR = before;
    }
  });
});
