/**
 * The reference scan on its working set, reading the reference index (issue 17 items A1 read side, A2,
 * A4), on both profiles (SQLite + directory, DynamoDB Local + s3rver):
 * - an indexed object is not read; one without an entry, or with a malformed, size-mismatched,
 *   overflow or wrong-digest entry, is read and its entry (re)written; a second scan reads 0 bytes;
 * - refreshReferences sees references committed after the scan's mark: by key, by a digest inside a
 *   new object, by an in-flight version reservation.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { sha256 } from '../../src/core/digest.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { refreshReferences, scanReferences } from '../../src/retention/references.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { allRefIndexEntries, contentRootId, deleteRefIndexEntry, getRefIndexEntries, refIndexItem } from '../../src/system/ref-index.ts';
import { stopDistributedServers } from '../helpers/distributed.ts';
import { distributed, type Engine, embedded, installationsOf } from '../helpers/retention-harness.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

after(stopDistributedServers);

const root = (ctx: ServiceContext) => contentRootId(ctx.content.location);

/** Drops every entry: the installation as it was before the index (the backfill's starting point). */
async function dropEntries(ctx: ServiceContext): Promise<void> {
  const keys: string[] = [];
  for await (const e of allRefIndexEntries(ctx.items, root(ctx), ctx.layout.index_shards)) keys.push(e.key);
  for (const k of keys) await deleteRefIndexEntry(ctx.items, root(ctx), ctx.layout.index_shards, k);
}

async function entryOf(ctx: ServiceContext, key: string) {
  return (await getRefIndexEntries(ctx.items, root(ctx), ctx.layout.index_shards, [key])).get(key);
}

/** A small installation: an orphan, an object referenced only by a digest inside referenced content. */
async function world(ctx: ServiceContext) {
  const inner = await ctx.content.put('artifacts/INNER/v1/f', bytesOf('inner bytes'));
  const orphan = await ctx.content.put('artifacts/ORPHAN/v1/f', bytesOf('orphan bytes'));
  const { version } = await createArtifact(ctx, agent, { name: 'r', filename: 'r.txt', body: bytesOf(`depends on ${inner.digest}\n`) });
  return { inner, orphan, version };
}

for (const engine of [embedded, distributed] as Engine[]) {
  describe(`reference scan with the reference index (${engine.name})`, () => {
    const fresh = installationsOf(engine);

    it('reads and indexes every unindexed object once; a second scan reads 0 bytes and finds the same', async () => {
      const { ctx } = await fresh();
      const { inner, version } = await world(ctx);
      await dropEntries(ctx);
      const first = await scanReferences(ctx);
      try {
        assert.equal(first.stats.objectsRead, first.stats.objects, 'every object read once');
        assert.equal(first.stats.indexedNow, first.stats.objects, 'and its entry written');
        assert.equal(first.stats.indexed, 0);
        assert.match(first.referencedWhy('artifacts/INNER/v1/f') ?? '', /found inside/);
        assert.deepEqual(
          [...first.candidates()].map((c) => c.key),
          ['artifacts/ORPHAN/v1/f'],
        );
        assert.equal(first.object('artifacts/INNER/v1/f')?.digest, inner.digest);
        assert.deepEqual(first.keysWithDigest(inner.digest), ['artifacts/INNER/v1/f']);
      } finally {
        first.close();
      }
      const entry = await entryOf(ctx, version.content_key);
      assert.deepEqual(entry?.digests, [inner.digest]);
      assert.equal(entry?.digest, version.content_hash);
      const second = await scanReferences(ctx);
      try {
        assert.equal(second.stats.bytesRead, 0, 'nothing read the second time');
        assert.equal(second.stats.objectsRead, 0);
        assert.equal(second.stats.indexed, second.stats.objects);
        assert.match(second.referencedWhy('artifacts/INNER/v1/f') ?? '', /found inside/);
        assert.deepEqual(
          [...second.candidates()].map((c) => c.key),
          ['artifacts/ORPHAN/v1/f'],
        );
        assert.equal(second.referencedCount(), first.stats.objects - 1);
      } finally {
        second.close();
      }
    });

    it('an entry that is missing, malformed, of another size, overflow or of another digest is not trusted: read, rewritten', async () => {
      const { ctx } = await fresh();
      const { inner, version } = await world(ctx);
      const key = version.content_key;
      const warm = await scanReferences(ctx);
      warm.close();
      const good = await entryOf(ctx, key);
      assert.ok(good);
      const shards = ctx.layout.index_shards;
      const damage: Array<[string, () => Promise<void>]> = [
        ['missing', () => deleteRefIndexEntry(ctx.items, root(ctx), shards, key)],
        ['malformed', () => ctx.items.put({ ...refIndexItem(root(ctx), shards, good), digest: 'not a digest', digests: [] })],
        ['size mismatch', () => ctx.items.put(refIndexItem(root(ctx), shards, { ...good, size: good.size + 1, digests: [] }))],
        ['overflow', () => ctx.items.put(refIndexItem(root(ctx), shards, { ...good, digests: [], overflow: true }))],
        ['other digest', () => ctx.items.put(refIndexItem(root(ctx), shards, { ...good, digest: sha256('other'), digests: [] }))],
      ];
      for (const [what, harm] of damage) {
        await harm();
        const scan = await scanReferences(ctx);
        try {
          assert.equal(scan.stats.objectsRead, 1, `${what}: the one object is read`);
          assert.equal(scan.stats.indexedNow, 1, `${what}: its entry rewritten`);
          assert.match(scan.referencedWhy('artifacts/INNER/v1/f') ?? '', /found inside/, `${what}: its references still found`);
        } finally {
          scan.close();
        }
        const now = await entryOf(ctx, key);
        assert.deepEqual({ ...now, indexed_at: '' }, { ...good, indexed_at: '' }, `${what}: the entry is right again`);
        assert.deepEqual(now?.digests, [inner.digest]);
      }
    });

    it('refreshReferences folds in references committed after the mark: by key, by digest inside a new object, by reservation', async (t) => {
      const { ctx } = await fresh();
      const { version } = await world(ctx);
      await ctx.content.put('artifacts/BYKEY/v1/f', bytesOf('named by key later'));
      const byDigest = await ctx.content.put('artifacts/BYDIGEST/v1/f', bytesOf('named inside a new object later'));
      const reservedKey = `artifacts/${version.artifact_id}/v2/upload.bin`;
      await ctx.content.put(reservedKey, bytesOf('an upload in flight'));
      // Items that do not change after the mark: what an O(changes) refresh does not read again.
      await ctx.items.batchPut(Array.from({ length: 100 }, (_, n) => ({ PK: `TEST#still${n}`, SK: 'x', type: 'note' })));
      const scan = await scanReferences(ctx);
      try {
        for (const k of ['artifacts/BYKEY/v1/f', 'artifacts/BYDIGEST/v1/f', reservedKey]) assert.equal(scan.referencedWhy(k), undefined, k);
        assert.equal(scan.digestWhy(byDigest.digest), undefined);
        // After the mark: a key named by an item, a new artifact whose bytes name a digest, a reservation.
        await ctx.items.put({ PK: 'TEST#refresh', SK: 'note', type: 'note', text: 'artifacts/BYKEY/v1/f' });
        await createArtifact(ctx, agent, { name: 'later', filename: 'l.txt', body: bytesOf(`uses ${byDigest.digest}`) });
        await ctx.items.update(
          { PK: version.PK as string, SK: 'HEAD' },
          { set: { latest_version: 2, version_reserved_at: ctx.clock.now().toISOString() } },
        );
        const r = await refreshReferences(ctx, scan);
        t.diagnostic(`refresh: ${r.changed} changed items of ${scan.stats.items} scanned, ${r.ms} ms`);
        assert.ok(r.changed >= 3, `${r.changed} changed items`);
        // SQLite reads only the rows written since the mark (DynamoDB: every item, for now).
        if (engine === embedded) assert.ok(r.changed < 20 && scan.stats.items > 100, `O(changes): ${r.changed} of ${scan.stats.items}`);
        assert.match(scan.referencedWhy('artifacts/BYKEY/v1/f') ?? '', /TEST#refresh/);
        assert.match(scan.referencedWhy('artifacts/BYDIGEST/v1/f') ?? '', /its digest is found inside artifacts\//);
        assert.match(scan.digestWhy(byDigest.digest) ?? '', /found inside/);
        assert.match(scan.referencedWhy(reservedKey) ?? '', /in-flight upload of version 2/);
        assert.deepEqual(
          [...scan.candidates()].map((c) => c.key),
          ['artifacts/ORPHAN/v1/f'],
        );
      } finally {
        scan.close();
      }
    });
  });
}
