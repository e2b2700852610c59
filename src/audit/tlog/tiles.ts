/**
 * The stored form of the transparency log's tree (issue 20 item 1): C2SP tlog-tiles. Only complete
 * subtree hashes are stored, grouped in tiles of 2^height hashes (height 8: 256). Tile level T holds
 * the hashes of the tree's level T·height nodes (each the root of 2^(T·height) leaves), tile N of that
 * level the ones with indexes [N·2^height, (N+1)·2^height); the right-most tile of a level is partial
 * (width < 2^height) until it fills. The levels between two tile levels are recomputed from the tile
 * below (at most 2^height − 1 hashes per node read), so no interior node is ever stored.
 *
 * A tile, once full, never changes; a partial tile is only ever extended (the log is append-only),
 * so a tile of width W read where width V ≤ W was asked serves: its first V hashes are the same.
 *
 * `appendLeaves` turns a batch of leaf hashes into the tiles to write (reading the right edge: one
 * partial tile per level); `TiledTree` computes roots and RFC 9162 proofs of any size it covers,
 * reading O(log n) tiles (the nodes of a proof lie on two root-to-leaf paths).
 */
import { InvalidInput } from '../../core/errors.ts';
import { consistencyRanges, EMPTY_ROOT, HASH_SIZE, type Hash, inclusionRanges, type LeafRange, nodeHash } from './merkle.ts';

/** C2SP tlog-tiles: 256 hashes per tile. */
export const TILE_HEIGHT = 8;

export interface TileAddress {
  /** Tile level T: its hashes are of the tree's level T·height nodes. */
  level: number;
  index: number;
  /** Hashes in the tile, 1 … 2^height. */
  width: number;
}

export interface Tile extends TileAddress {
  /** The tile's hashes, concatenated: width × 32 bytes. */
  data: Uint8Array;
}

/**
 * Where tiles come from (a table, an object store). Answers each address with the tile's data: at
 * least `width` hashes (more when the store holds a wider version of that partial tile). Throws when
 * a tile is missing: a tree whose tiles are not all there cannot prove anything.
 */
export interface TileReader {
  readTiles(tiles: readonly TileAddress[]): Promise<Uint8Array[]>;
}

/** A complete subtree: the root of leaves [index·2^level, (index+1)·2^level). */
export interface NodeAddress {
  level: number;
  index: number;
}

function checkHeight(height: number): number {
  if (!Number.isInteger(height) || height < 1 || height > 30) throw new InvalidInput(`tile height must be 1–30, got ${String(height)}`);
  return height;
}

/** How many level-`level` nodes a tree of `size` leaves has complete. */
export function completeNodes(size: number, level: number): number {
  return Math.floor(size / 2 ** level);
}

/** The width tile (level, index) has in a tree of `size` leaves (0: the tile does not exist yet). */
export function tileWidth(size: number, level: number, index: number, height = TILE_HEIGHT): number {
  const width = 2 ** checkHeight(height);
  const stored = completeNodes(size, level * height) - index * width;
  return Math.max(0, Math.min(width, stored));
}

/** The tiles a tree of `size` leaves consists of, level by level (for a full copy or a check). */
export function tilesOf(size: number, height = TILE_HEIGHT): TileAddress[] {
  const width = 2 ** checkHeight(height);
  const out: TileAddress[] = [];
  for (let level = 0; completeNodes(size, level * height) > 0; level++) {
    const count = completeNodes(size, level * height);
    for (let index = 0; index * width < count; index++) out.push({ level, index, width: Math.min(width, count - index * width) });
  }
  return out;
}

/**
 * The C2SP tlog-tiles path of a tile: `tile/<L>/<N>[.p/<W>]`, N written in groups of three digits,
 * every group but the last prefixed `x` (tile 1234067 → `x001/x234/067`).
 */
export function tilePath(tile: TileAddress, height = TILE_HEIGHT): string {
  let n = tile.index;
  let groups = `${String(n % 1000).padStart(3, '0')}`;
  for (n = Math.floor(n / 1000); n > 0; n = Math.floor(n / 1000)) groups = `x${String(n % 1000).padStart(3, '0')}/${groups}`;
  const partial = tile.width < 2 ** checkHeight(height) ? `.p/${tile.width}` : '';
  return `tile/${tile.level}/${groups}${partial}`;
}

/**
 * A leaf range of an RFC 9162 proof as the complete subtrees it is made of, left to right (the largest
 * power of two first, as MTH splits). Proof ranges always start on a multiple of their largest part.
 */
export function rangeNodes(range: LeafRange): NodeAddress[] {
  const out: NodeAddress[] = [];
  for (let lo = range.lo; lo < range.hi; ) {
    let level = 0;
    while (2 ** (level + 1) <= range.hi - lo) level++;
    const span = 2 ** level;
    if (lo % span !== 0) throw new RangeError(`leaf range [${range.lo}, ${range.hi}) is not a tree range`);
    out.push({ level, index: lo / span });
    lo += span;
  }
  return out;
}

/** MTH of a range from its complete subtrees' hashes: combined right to left. */
export function foldRange(parts: readonly Hash[]): Hash {
  if (parts.length === 0) return EMPTY_ROOT;
  let h = parts[parts.length - 1] as Hash;
  for (let i = parts.length - 2; i >= 0; i--) h = nodeHash(parts[i] as Hash, h);
  return h;
}

/** The root of 2^r consecutive complete nodes of one level (r levels up). */
function perfectRoot(hashes: readonly Hash[]): Hash {
  let row = hashes;
  while (row.length > 1) {
    const up: Hash[] = [];
    for (let i = 0; i < row.length; i += 2) up.push(nodeHash(row[i] as Hash, row[i + 1] as Hash));
    row = up;
  }
  const root = row[0];
  if (!root) throw new RangeError('no hashes to combine');
  return root;
}

function hashesOf(data: Uint8Array, from: number, count: number): Hash[] {
  if (data.length < (from + count) * HASH_SIZE)
    throw new RangeError(`tile holds ${data.length / HASH_SIZE} hashes, ${from + count} needed`);
  return Array.from({ length: count }, (_, i) => data.subarray((from + i) * HASH_SIZE, (from + i + 1) * HASH_SIZE));
}

const tileKey = (t: { level: number; index: number }): string => `${t.level}/${t.index}`;

/**
 * A tree of `size` leaves whose hashes are in tiles: roots and proofs of this size or any smaller one,
 * each from one batched tile read.
 */
export class TiledTree {
  readonly size: number;
  readonly height: number;
  private readonly reader: TileReader;

  constructor(size: number, reader: TileReader, height = TILE_HEIGHT) {
    if (!Number.isSafeInteger(size) || size < 0) throw new InvalidInput(`tree size must be a whole number ≥ 0, got ${String(size)}`);
    this.size = size;
    this.reader = reader;
    this.height = checkHeight(height);
  }

  async root(size = this.size): Promise<Hash> {
    this.checkCovered(size);
    if (size === 0) return EMPTY_ROOT;
    const [root] = await this.rangeHashes([{ lo: 0, hi: size }]);
    return root as Hash;
  }

  /** The RFC 9162 inclusion proof of leaf `index` in the tree of `size` leaves. */
  async inclusionProof(index: number, size = this.size): Promise<Hash[]> {
    this.checkCovered(size);
    return this.rangeHashes(inclusionRanges(index, size));
  }

  /** The RFC 9162 consistency proof from the tree of `m` leaves to the tree of `n`. */
  async consistencyProof(m: number, n = this.size): Promise<Hash[]> {
    this.checkCovered(n);
    return this.rangeHashes(consistencyRanges(m, n));
  }

  /** The leaf hash at `index`. */
  async leaf(index: number): Promise<Hash> {
    const [h] = await this.readNodes([{ level: 0, index }]);
    return h as Hash;
  }

  /** MTH of each range, from one read of every tile they need. */
  async rangeHashes(ranges: readonly LeafRange[]): Promise<Hash[]> {
    const parts = ranges.map(rangeNodes);
    const hashes = await this.readNodes(parts.flat());
    let at = 0;
    return parts.map((p) => foldRange(hashes.slice(at, (at += p.length))));
  }

  private checkCovered(size: number): void {
    if (!Number.isSafeInteger(size) || size < 0 || size > this.size)
      throw new InvalidInput(`tree size ${String(size)} is beyond this tree's ${this.size} leaves`);
  }

  /** Each node from the tile of its nearest tile level at or below it. */
  private async readNodes(nodes: readonly NodeAddress[]): Promise<Hash[]> {
    const width = 2 ** this.height;
    const located = nodes.map((node) => {
      if ((node.index + 1) * 2 ** node.level > this.size)
        throw new RangeError(`node ${node.level}/${node.index} is not complete at size ${this.size}`);
      const level = Math.floor(node.level / this.height);
      const span = 2 ** (node.level - level * this.height);
      const first = node.index * span;
      const index = Math.floor(first / width);
      return { tile: { level, index, width: tileWidth(this.size, level, index, this.height) }, from: first - index * width, span };
    });
    const wanted = new Map<string, TileAddress>();
    for (const l of located) wanted.set(tileKey(l.tile), l.tile);
    const addresses = [...wanted.values()];
    const data = await this.reader.readTiles(addresses);
    const byKey = new Map(addresses.map((a, i) => [tileKey(a), data[i]]));
    return located.map((l) => {
      const tile = byKey.get(tileKey(l.tile));
      if (!tile) throw new RangeError(`tile ${tilePath(l.tile, this.height)} was not read`);
      return perfectRoot(hashesOf(tile, l.from, l.span));
    });
  }
}

/**
 * Appending `leaves` to a tree of `size` leaves: the tiles to write, each at its new width (the
 * changed right edge of every level plus every new tile), and the new size. Reads only the partial
 * tiles of the current right edge (one per level, in one batch). Writing them in any order is safe
 * for readers of the old size (a wider tile serves a narrower read); the new size may be published
 * (a checkpoint signed) only once all are written.
 */
export async function appendLeaves(
  size: number,
  leaves: readonly Hash[],
  reader: TileReader,
  height = TILE_HEIGHT,
): Promise<{ size: number; tiles: Tile[] }> {
  checkHeight(height);
  if (!Number.isSafeInteger(size) || size < 0) throw new InvalidInput(`tree size must be a whole number ≥ 0, got ${String(size)}`);
  for (const l of leaves) if (l.length !== HASH_SIZE) throw new InvalidInput(`a leaf hash has ${l.length} bytes, not ${HASH_SIZE}`);
  const width = 2 ** height;
  const edge = rightEdge(size, height);
  const edgeData = await reader.readTiles(edge);
  const tiles: Tile[] = [];
  let added: readonly Hash[] = leaves;
  for (let level = 0; added.length > 0; level++) {
    const first = Math.floor(completeNodes(size, level * height) / width);
    const partial = edge.findIndex((t) => t.level === level);
    const kept = partial < 0 ? [] : hashesOf(edgeData[partial] as Uint8Array, 0, (edge[partial] as TileAddress).width);
    const row = [...kept, ...added];
    const parents: Hash[] = [];
    for (let at = 0; at < row.length; at += width) {
      const hashes = row.slice(at, at + width);
      tiles.push({ level, index: first + at / width, width: hashes.length, data: Buffer.concat(hashes) });
      if (hashes.length === width) parents.push(perfectRoot(hashes));
    }
    added = parents;
  }
  return { size: size + leaves.length, tiles };
}

/** The partial tile of every level of a tree of `size` leaves (what an append extends). */
export function rightEdge(size: number, height = TILE_HEIGHT): TileAddress[] {
  const width = 2 ** checkHeight(height);
  const out: TileAddress[] = [];
  for (let level = 0; completeNodes(size, level * height) > 0; level++) {
    const count = completeNodes(size, level * height);
    if (count % width !== 0) out.push({ level, index: Math.floor(count / width), width: count % width });
  }
  return out;
}
