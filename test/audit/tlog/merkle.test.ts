/**
 * RFC 9162 §2.1 tree math (src/audit/tlog/merkle.ts): the published RFC 6962 test vectors of
 * Certificate Transparency, and properties over random trees — every honest proof verifies, and any
 * changed hash or index, or a proof one hash short or long, is refused. (A proof alone does not pin
 * the tree size: the proof of leaf 0 in 5 leaves is shaped as in 6. The size is bound to the root,
 * which is why a checkpoint signs the two together.)
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  auditLeafHash,
  consistencyProof,
  EMPTY_ROOT,
  type Hash,
  inclusionProof,
  leafHash,
  rootOf,
  verifyConsistency,
  verifyInclusion,
} from '../../../src/audit/tlog/merkle.ts';

const hex = (h: Hash): string => Buffer.from(h).toString('hex');
const unhex = (s: string): Hash => Buffer.from(s, 'hex');

// The eight leaves of the CT test vectors (certificate-transparency's merkle_tree_test, RFC 6962).
const CT_LEAVES = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'].map((d) =>
  leafHash(unhex(d)),
);
const CT_ROOTS = [
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
];

function flipBit(h: Hash, bit: number): Hash {
  const out = Buffer.from(h);
  const at = Math.floor(bit / 8) % out.length;
  out[at] = (out[at] as number) ^ (1 << (bit % 8));
  return out;
}

function randomLeaves(n: number, seed: number): Hash[] {
  return Array.from({ length: n }, (_, i) => leafHash(createHash('sha256').update(`${seed}:${i}`).digest()));
}

describe('RFC 6962 test vectors', () => {
  it('roots of the first 1..8 CT leaves, and of the empty tree', () => {
    assert.equal(hex(EMPTY_ROOT), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    for (let n = 1; n <= 8; n++) assert.equal(hex(rootOf(CT_LEAVES.slice(0, n))), CT_ROOTS[n - 1], `root of ${n}`);
  });

  it('inclusion and consistency proofs of the CT vectors', () => {
    assert.deepEqual(inclusionProof(0, CT_LEAVES).map(hex), [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ]);
    assert.deepEqual(consistencyProof(6, CT_LEAVES).map(hex), [
      '0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ]);
    assert.deepEqual(consistencyProof(2, CT_LEAVES, 5).map(hex), [
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
    ]);
    assert.deepEqual(consistencyProof(1, CT_LEAVES).map(hex), inclusionProof(0, CT_LEAVES).map(hex));
    assert.deepEqual(consistencyProof(8, CT_LEAVES), []);
  });

  it('an audit entry hash is the leaf data: SHA-256(0x00 || its 32 bytes)', () => {
    const entry = `sha256:${'ab'.repeat(32)}` as const;
    assert.equal(
      hex(auditLeafHash(entry)),
      hex(
        createHash('sha256')
          .update(Buffer.from(`00${'ab'.repeat(32)}`, 'hex'))
          .digest(),
      ),
    );
    assert.throws(() => auditLeafHash('sha256:xyz' as `sha256:${string}`), /not an audit entry hash/);
  });
});

describe('inclusion proofs (§2.1.3)', () => {
  const tree = randomLeaves(300, 1);

  it('verify for every leaf of random trees, and not for a changed leaf, index, size or root', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 300 }).chain((n) => fc.tuple(fc.constant(n), fc.nat(n - 1), fc.nat(255))),
        ([n, i, bit]) => {
          const leaves = tree.slice(0, n);
          const root = rootOf(leaves);
          const proof = inclusionProof(i, leaves);
          const leaf = leaves[i] as Hash;
          assert.equal(verifyInclusion(i, n, leaf, proof, root), true);
          assert.equal(verifyInclusion(i, n, flipBit(leaf, bit), proof, root), false);
          assert.equal(verifyInclusion(i, n, leaf, proof, flipBit(root, bit)), false);
          if (n > 1) assert.equal(verifyInclusion((i + 1) % n, n, leaf, proof, root), false);
          assert.equal(verifyInclusion(n, n, leaf, proof, root), false);
          for (let p = 0; p < proof.length; p++) {
            const bad = proof.map((h, j) => (j === p ? flipBit(h, bit) : h));
            assert.equal(verifyInclusion(i, n, leaf, bad, root), false);
          }
          assert.equal(verifyInclusion(i, n, leaf, [...proof, root], root), false);
          if (proof.length > 0) assert.equal(verifyInclusion(i, n, leaf, proof.slice(1), root), false);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('a tree of one leaf has an empty proof and its root is the leaf hash', () => {
    const [leaf] = tree as [Hash];
    assert.deepEqual(inclusionProof(0, [leaf]), []);
    assert.equal(verifyInclusion(0, 1, leaf, [], leaf), true);
    assert.throws(() => inclusionProof(1, [leaf]), /not in a tree of 1 leaves/);
  });
});

describe('consistency proofs (§2.1.4)', () => {
  const tree = randomLeaves(300, 2);

  it('verify for every prefix of random trees, and not for a changed root, size or proof hash', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 300 }).chain((n) => fc.tuple(fc.integer({ min: 1, max: n }), fc.constant(n), fc.nat(255))),
        ([m, n, bit]) => {
          const oldRoot = rootOf(tree.slice(0, m));
          const newRoot = rootOf(tree.slice(0, n));
          const proof = consistencyProof(m, tree, n);
          assert.equal(verifyConsistency(m, n, oldRoot, newRoot, proof), true);
          assert.equal(verifyConsistency(m, n, flipBit(oldRoot, bit), newRoot, proof), false);
          assert.equal(verifyConsistency(m, n, oldRoot, flipBit(newRoot, bit), proof), false);
          for (let p = 0; p < proof.length; p++) {
            const bad = proof.map((h, j) => (j === p ? flipBit(h, bit) : h));
            assert.equal(verifyConsistency(m, n, oldRoot, newRoot, bad), false);
          }
          if (m < n) {
            assert.equal(verifyConsistency(m, n, oldRoot, newRoot, [...proof, newRoot]), false);
            assert.equal(verifyConsistency(m, n, oldRoot, newRoot, proof.slice(1)), false);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('a tree that does not extend the old one is refused: a changed leaf before m', () => {
    const rewritten = [...tree];
    rewritten[3] = leafHash(Buffer.from('rewritten'));
    const oldRoot = rootOf(tree.slice(0, 10));
    const proof = consistencyProof(10, rewritten, 50);
    assert.equal(verifyConsistency(10, 50, oldRoot, rootOf(rewritten.slice(0, 50)), proof), false);
  });

  it('sizes out of order or zero are refused', () => {
    const root = rootOf(tree.slice(0, 5));
    assert.throws(() => consistencyProof(6, tree, 5), /cannot be a prefix/);
    assert.throws(() => consistencyProof(0, tree, 5), /old tree size must be/);
    assert.equal(verifyConsistency(0, 5, EMPTY_ROOT, root, []), false);
    assert.equal(verifyConsistency(6, 5, root, root, []), false);
    assert.equal(verifyConsistency(5, 5, root, root, []), true);
    assert.equal(verifyConsistency(5, 5, root, root, [root]), false);
  });
});
