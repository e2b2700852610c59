/**
 * The tiled tree (src/audit/tlog/tiles.ts) against the reference of merkle.ts: built by appending
 * random batches, its roots and proofs of every size equal the recursive definition's, for tile heights
 * small enough to make many tile levels from a few hundred leaves; an append never rewrites a stored
 * hash; and a tree of a million leaves answers a root, an inclusion and a consistency proof from a
 * handful of tile reads (O(log n) stored items: about two tiles per tile level).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  consistencyProof,
  type Hash,
  inclusionProof,
  inclusionRanges,
  leafHash,
  rootOf,
  verifyConsistency,
  verifyInclusion,
} from '../../../src/audit/tlog/merkle.ts';
import { appendLeaves, rightEdge, TiledTree, tilePath, tilesOf } from '../../../src/audit/tlog/tiles.ts';
import { MemoryTiles } from './memory-tiles.ts';

const hex = (hs: Hash[]): string[] => hs.map((h) => Buffer.from(h).toString('hex'));

function leavesOf(n: number, seed = 0): Hash[] {
  return Array.from({ length: n }, (_, i) => leafHash(createHash('sha256').update(`${seed}:${i}`).digest()));
}

async function build(
  leaves: readonly Hash[],
  batches: readonly number[],
  height: number,
): Promise<{ store: MemoryTiles; sizes: number[] }> {
  const store = new MemoryTiles();
  const sizes = [0];
  let size = 0;
  for (const b of batches) {
    const next = leaves.slice(size, size + b);
    const out = await appendLeaves(size, next, store, height);
    store.write(out.tiles);
    size = out.size;
    sizes.push(size);
  }
  return { store, sizes };
}

describe('tiled tree', () => {
  const leaves = leavesOf(700);

  it('roots and proofs equal the reference for random batches and tile heights 1, 2, 3 and 8', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(1, 2, 3, 8),
        fc.array(fc.integer({ min: 0, max: 90 }), { minLength: 1, maxLength: 8 }),
        fc.nat(),
        async (height, batches, pick) => {
          const { store, sizes } = await build(leaves, batches, height);
          const size = sizes[sizes.length - 1] as number;
          const tree = new TiledTree(size, store, height);
          for (const s of sizes) assert.deepEqual(hex([await tree.root(s)]), hex([rootOf(leaves.slice(0, s))]), `root of ${s}`);
          if (size === 0) return;
          const n = 1 + (pick % size);
          const i = pick % n;
          const m = 1 + ((pick >> 3) % n);
          assert.deepEqual(hex(await tree.inclusionProof(i, n)), hex(inclusionProof(i, leaves, n)), `inclusion ${i} in ${n}`);
          assert.deepEqual(hex(await tree.consistencyProof(m, n)), hex(consistencyProof(m, leaves, n)), `consistency ${m} → ${n}`);
          assert.deepEqual(hex([await tree.leaf(i)]), hex([leaves[i] as Hash]));
          // What is stored is exactly the tiles of the final size, at their widths.
          assert.deepEqual(
            [...store.tiles.values()].map((t) => `${t.level}/${t.index}/${t.width}`).sort(),
            tilesOf(size, height)
              .map((t) => `${t.level}/${t.index}/${t.width}`)
              .sort(),
          );
        },
      ),
      { numRuns: 120 },
    );
  });

  it('an append reads only the right edge: one partial tile per level', async () => {
    const { store } = await build(leaves, [37, 200], 2);
    store.resetCounts();
    await appendLeaves(237, leaves.slice(237, 240), store, 2);
    assert.equal(store.batches, 1);
    assert.equal(store.tilesRead, rightEdge(237, 2).length);
    assert.deepEqual(
      rightEdge(237, 2).map((t) => `${t.level}/${t.index}/${t.width}`),
      ['0/59/1', '1/14/3', '2/3/2', '3/0/3'],
    );
  });

  it('refuses sizes it does not cover and leaf hashes of the wrong length', async () => {
    const { store } = await build(leaves, [10], 8);
    const tree = new TiledTree(10, store);
    await assert.rejects(tree.root(11), /beyond this tree's 10 leaves/);
    await assert.rejects(tree.inclusionProof(10, 10), /not in a tree of 10 leaves/);
    await assert.rejects(appendLeaves(10, [Buffer.alloc(31)], store), /31 bytes/);
  });

  it('tile paths are C2SP tlog-tiles paths', () => {
    assert.equal(tilePath({ level: 0, index: 1234067, width: 256 }), 'tile/0/x001/x234/067');
    assert.equal(tilePath({ level: 0, index: 1234067, width: 8 }), 'tile/0/x001/x234/067.p/8');
    assert.equal(tilePath({ level: 2, index: 5, width: 256 }), 'tile/2/005');
    assert.equal(tilePath({ level: 1, index: 1000, width: 3 }), 'tile/1/x001/000.p/3');
  });
});

describe('a tree of a million leaves', () => {
  it('proves inclusion and consistency reading O(log n) tiles', async () => {
    const size = 1_000_003;
    const store = new MemoryTiles();
    const batch = 50_000;
    // Any 32 bytes serve as leaf hashes here: the cost to build is the tree's own node hashes.
    const leafAt = (i: number): Hash => {
      const h = Buffer.alloc(32, 0x5a);
      h.writeUInt32BE(i, 0);
      return h;
    };
    for (let at = 0; at < size; at += batch) {
      const leaves = Array.from({ length: Math.min(batch, size - at) }, (_, i) => leafAt(at + i));
      const out = await appendLeaves(at, leaves, store);
      store.write(out.tiles);
    }
    const tree = new TiledTree(size, store);
    // ⌈log256 n⌉ = 3 tile levels; a proof's nodes lie on two leaf-to-root paths: ≤ 2 tiles per level.
    const bound = 2 * 3;

    store.resetCounts();
    const root = await tree.root();
    assert.ok(store.tilesRead <= bound, `root: ${store.tilesRead} tiles`);

    store.resetCounts();
    const proof = await tree.inclusionProof(999_999);
    assert.equal(store.batches, 1);
    assert.ok(store.tilesRead <= bound, `inclusion: ${store.tilesRead} tiles`);
    assert.equal(proof.length, inclusionRanges(999_999, size).length);
    assert.equal(verifyInclusion(999_999, size, leafAt(999_999), proof, root), true);

    store.resetCounts();
    const oldRoot = await tree.root(123_457);
    const consistency = await tree.consistencyProof(123_457);
    assert.ok(store.tilesRead <= 2 * bound, `old root and consistency: ${store.tilesRead} tiles`);
    assert.equal(verifyConsistency(123_457, size, oldRoot, root, consistency), true);
    assert.equal(verifyInclusion(123_456, 123_457, leafAt(123_456), await tree.inclusionProof(123_456, 123_457), oldRoot), true);
  });
});
