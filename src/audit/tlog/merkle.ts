/**
 * Merkle tree math of RFC 9162 §2.1 (the RFC 6962 tree, issue 20 item 1), as pure functions.
 *
 * A proof is described first as the list of leaf ranges [lo, hi) whose tree hashes it holds
 * (`inclusionRanges`, `consistencyRanges`: PATH and SUBPROOF of §2.1.3.1 and §2.1.4.1, on indexes
 * only), so one definition serves both the in-memory reference here (`inclusionProof`,
 * `consistencyProof` over an array of leaf hashes) and the tiled tree that reads stored hashes
 * (tiles.ts). The verifiers are the iterative algorithms of §2.1.3.2 and §2.1.4.2.
 */
import { createHash } from 'node:crypto';
import { type Digest, digestHex, isDigest } from '../../core/digest.ts';
import { InvalidInput } from '../../core/errors.ts';

/** A 32-byte SHA-256 value: a leaf hash, a node hash or a root. */
export type Hash = Uint8Array;

export const HASH_SIZE = 32;
const LEAF_PREFIX = Uint8Array.of(0x00);
const NODE_PREFIX = Uint8Array.of(0x01);

/** MTH({}) = SHA-256 of the empty string: the root of the empty tree. */
export const EMPTY_ROOT: Hash = createHash('sha256').digest();

/** SHA-256(0x00 || data): the hash of one leaf. */
export function leafHash(data: Uint8Array): Hash {
  return createHash('sha256').update(LEAF_PREFIX).update(data).digest();
}

/** SHA-256(0x01 || left || right): the hash of an interior node. */
export function nodeHash(left: Hash, right: Hash): Hash {
  return createHash('sha256').update(NODE_PREFIX).update(left).update(right).digest();
}

/** The 32 bytes of an audit entry's `sha256:` hash: the data of its leaf (issue 20: leaf = 0x00 || entry hash). */
export function entryHashBytes(entryHash: Digest): Uint8Array {
  if (!isDigest(entryHash)) throw new InvalidInput(`not an audit entry hash: ${String(entryHash)}`);
  return Buffer.from(digestHex(entryHash), 'hex');
}

/** The leaf hash of an audit entry. */
export function auditLeafHash(entryHash: Digest): Hash {
  return leafHash(entryHashBytes(entryHash));
}

export function hashesEqual(a: Hash, b: Hash): boolean {
  return a.length === b.length && Buffer.compare(a, b) === 0;
}

/** The largest power of two strictly less than n (n ≥ 2): RFC 9162's split point k. */
export function splitPoint(n: number): number {
  if (!Number.isSafeInteger(n) || n < 2) throw new RangeError(`no split point for a tree of ${n} leaves`);
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** A range of leaves [lo, hi), hi > lo: the proof holds its tree hash MTH(D[lo:hi]). */
export interface LeafRange {
  lo: number;
  hi: number;
}

function assertSize(name: string, n: number, min: number): void {
  if (!Number.isSafeInteger(n) || n < min) throw new InvalidInput(`${name} must be a whole number ≥ ${min}, got ${String(n)}`);
}

/** PATH(index, D[0:size]) (§2.1.3.1) as leaf ranges, in proof order (from the leaf up). */
export function inclusionRanges(index: number, size: number): LeafRange[] {
  assertSize('tree size', size, 1);
  assertSize('leaf index', index, 0);
  if (index >= size) throw new InvalidInput(`leaf index ${index} is not in a tree of ${size} leaves`);
  return pathRanges(index, 0, size);
}

function pathRanges(m: number, lo: number, hi: number): LeafRange[] {
  const n = hi - lo;
  if (n === 1) return [];
  const k = splitPoint(n);
  return m < k ? [...pathRanges(m, lo, lo + k), { lo: lo + k, hi }] : [...pathRanges(m - k, lo + k, hi), { lo, hi: lo + k }];
}

/** PROOF(m, D[0:n]) = SUBPROOF(m, D[0:n], true) (§2.1.4.1) as leaf ranges; 1 ≤ m ≤ n, empty when m = n. */
export function consistencyRanges(m: number, n: number): LeafRange[] {
  assertSize('old tree size', m, 1);
  assertSize('new tree size', n, 1);
  if (m > n) throw new InvalidInput(`a tree of ${m} leaves cannot be a prefix of one of ${n}`);
  return subproofRanges(m, 0, n, true);
}

function subproofRanges(m: number, lo: number, hi: number, wholeOldTree: boolean): LeafRange[] {
  const n = hi - lo;
  if (m === n) return wholeOldTree ? [] : [{ lo, hi }];
  const k = splitPoint(n);
  return m <= k
    ? [...subproofRanges(m, lo, lo + k, wholeOldTree), { lo: lo + k, hi }]
    : [...subproofRanges(m - k, lo + k, hi, false), { lo, hi: lo + k }];
}

/** MTH(D[lo:hi]) by the recursive definition of §2.1.1 (the reference; O(hi − lo) hashes). */
export function rangeHash(leaves: readonly Hash[], lo = 0, hi = leaves.length): Hash {
  const n = hi - lo;
  if (n === 0) return EMPTY_ROOT;
  if (n === 1) return leafAt(leaves, lo);
  const k = splitPoint(n);
  return nodeHash(rangeHash(leaves, lo, lo + k), rangeHash(leaves, lo + k, hi));
}

function leafAt(leaves: readonly Hash[], i: number): Hash {
  const h = leaves[i];
  if (!h) throw new RangeError(`no leaf ${i}`);
  return h;
}

/** The root of a tree whose leaf hashes are `leaves`. */
export function rootOf(leaves: readonly Hash[]): Hash {
  return rangeHash(leaves);
}

/** The inclusion proof of leaf `index` in the tree of the first `size` leaf hashes. */
export function inclusionProof(index: number, leaves: readonly Hash[], size = leaves.length): Hash[] {
  return inclusionRanges(index, size).map((r) => rangeHash(leaves, r.lo, r.hi));
}

/** The consistency proof from the tree of the first `m` leaf hashes to the first `n`. */
export function consistencyProof(m: number, leaves: readonly Hash[], n = leaves.length): Hash[] {
  return consistencyRanges(m, n).map((r) => rangeHash(leaves, r.lo, r.hi));
}

const isOdd = (x: bigint): boolean => (x & 1n) === 1n;

/**
 * §2.1.3.2: whether `proof` shows the leaf hash `leaf` at `index` in the tree of `size` leaves with
 * root `root`. Sizes are walked as bigints so the shifts stay exact past 2^31.
 */
export function verifyInclusion(index: number, size: number, leaf: Hash, proof: readonly Hash[], root: Hash): boolean {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return false;
  let fn = BigInt(index);
  let sn = BigInt(size - 1);
  let r = leaf;
  for (const p of proof) {
    if (sn === 0n) return false;
    if (isOdd(fn) || fn === sn) {
      r = nodeHash(p, r);
      while (!isOdd(fn) && fn !== 0n) [fn, sn] = [fn >> 1n, sn >> 1n];
    } else {
      r = nodeHash(r, p);
    }
    [fn, sn] = [fn >> 1n, sn >> 1n];
  }
  return sn === 0n && hashesEqual(r, root);
}

const isPowerOfTwo = (x: number): boolean => x > 0 && (x & (x - 1)) === 0;

/**
 * §2.1.4.2: whether `proof` shows that the tree of `m` leaves with root `oldRoot` is a prefix of the
 * tree of `n` leaves with root `newRoot`. For m = n the proof is empty and the roots must be equal
 * (as Go's tlog.CheckTree); m = 0 is refused (every tree extends the empty one: nothing to prove).
 */
export function verifyConsistency(m: number, n: number, oldRoot: Hash, newRoot: Hash, proof: readonly Hash[]): boolean {
  if (!Number.isSafeInteger(m) || !Number.isSafeInteger(n) || m < 1 || m > n) return false;
  if (m === n) return proof.length === 0 && hashesEqual(oldRoot, newRoot);
  if (proof.length === 0) return false;
  const path = isPowerOfTwo(m) ? [oldRoot, ...proof] : [...proof];
  let fn = BigInt(m - 1);
  let sn = BigInt(n - 1);
  while (isOdd(fn)) [fn, sn] = [fn >> 1n, sn >> 1n];
  let fr = path[0] as Hash;
  let sr = fr;
  for (const c of path.slice(1)) {
    if (sn === 0n) return false;
    if (isOdd(fn) || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while (!isOdd(fn) && fn !== 0n) [fn, sn] = [fn >> 1n, sn >> 1n];
    } else {
      sr = nodeHash(sr, c);
    }
    [fn, sn] = [fn >> 1n, sn >> 1n];
  }
  return hashesEqual(fr, oldRoot) && hashesEqual(sr, newRoot) && sn === 0n;
}
