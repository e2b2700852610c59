/**
 * Reading the transparency log (issue 20 item 1): its signed checkpoint, RFC 9162 inclusion and
 * consistency proofs computed from the stored tiles, and where an audit entry is in it (its marker:
 * markers.ts). What `GET /v1/log/*` and `alp audit prove` answer. Hashes are base64, as in checkpoints.
 */
import { InvalidInput, NotFound } from '../../core/errors.ts';
import type { ServiceContext } from '../../system/context.ts';
import { chainRef } from './chains.ts';
import { headQueue, type Marker, markersOf } from './markers.ts';
import { auditLeafHash } from './merkle.ts';
import { contentTileReader, readLeafEntries } from './objects.ts';
import { readLogState } from './state.ts';
import { TiledTree } from './tiles.ts';

const b64 = (h: Uint8Array) => Buffer.from(h).toString('base64');

/** The signed checkpoint of the committed tree. NOT_FOUND (NO_CHECKPOINT) before the first signed round. */
export async function logCheckpoint(ctx: ServiceContext): Promise<{ checkpoint: string; size: number }> {
  const state = await readLogState(ctx);
  if (!state.checkpoint)
    throw new NotFound('the transparency log has no signed checkpoint yet (no round has run with a signing key)', {
      reason: 'NO_CHECKPOINT',
    });
  return { checkpoint: state.checkpoint, size: state.size };
}

function sizeWithin(what: string, size: number | undefined, committed: number): number {
  const n = size ?? committed;
  if (!Number.isSafeInteger(n) || n < 1 || n > committed)
    throw new InvalidInput(`${what} must be 1 … ${committed} (the log's committed size), got ${String(size)}`, { log_size: committed });
  return n;
}

export interface InclusionAnswer {
  leaf_index: number;
  tree_size: number;
  /** The tree's root at tree_size (base64). */
  root: string;
  leaf_hash: string;
  proof: string[];
  entry: { artifact_id: string; seq: number; hash: string };
}

/** The inclusion proof of `leaf` in the tree of `size` leaves (default: the committed size). */
export async function inclusionAt(ctx: ServiceContext, leaf: number, size?: number): Promise<InclusionAnswer> {
  const state = await readLogState(ctx);
  const n = sizeWithin('size', size, state.size);
  if (!Number.isSafeInteger(leaf) || leaf < 0 || leaf >= n) throw new InvalidInput(`leaf must be 0 … ${n - 1}, got ${String(leaf)}`);
  const tree = new TiledTree(state.size, contentTileReader(ctx.content));
  const [entry] = await readLeafEntries(ctx.content, leaf, leaf + 1);
  if (!entry) throw new NotFound(`leaf ${leaf} is not in the entry bundles`);
  const [proof, root] = await Promise.all([tree.inclusionProof(leaf, n), tree.root(n)]);
  return {
    leaf_index: leaf,
    tree_size: n,
    root: b64(root),
    leaf_hash: b64(auditLeafHash(entry.hash as `sha256:${string}`)),
    proof: proof.map(b64),
    entry,
  };
}

/** The consistency proof from the tree of `from` leaves to the tree of `to` (default: the committed size). */
export async function consistencyBetween(
  ctx: ServiceContext,
  from: number,
  to?: number,
): Promise<{ from: number; to: number; from_root: string; to_root: string; proof: string[] }> {
  const state = await readLogState(ctx);
  const n = sizeWithin('to', to, state.size);
  if (!Number.isSafeInteger(from) || from < 1 || from > n) throw new InvalidInput(`from must be 1 … ${n}, got ${String(from)}`);
  const tree = new TiledTree(state.size, contentTileReader(ctx.content));
  const [proof, fromRoot, toRoot] = await Promise.all([tree.consistencyProof(from, n), tree.root(from), tree.root(n)]);
  return { from, to: n, from_root: b64(fromRoot), to_root: b64(toRoot), proof: proof.map(b64) };
}

/**
 * Where entry `seq` of a chain (an artifact's, or an installation log's: chains.ts) is in the log: its leaf (its locator's, once the tree that
 * holds it is committed), or `pending` while it waits for a round (a pending marker or the HEAD's
 * queue holds it, or its locator is ahead of the committed tree). NOT_FOUND when nothing records it
 * (no such entry, or one written before the log).
 */
export async function locateEntry(
  ctx: ServiceContext,
  artifactId: string,
  seq: number,
): Promise<{ artifact_id: string; seq: number; hash: string; leaf_index: number | null; pending: boolean }> {
  const [markers, head, state] = await Promise.all([
    markersOf(ctx, artifactId),
    ctx.items.get({ PK: chainRef(artifactId).pk, SK: chainRef(artifactId).headSk }, { consistent: true }),
    readLogState(ctx),
  ]);
  const pending = (hash: string) => ({ artifact_id: artifactId, seq, hash, leaf_index: null, pending: true });
  const covers = (m: Marker) => m.first_seq <= seq && seq <= m.last_seq;
  const locator = markers.find((m) => m.leaf_index !== undefined && covers(m));
  if (locator) {
    const hash = locator.hashes[seq - locator.first_seq] as string;
    const leaf = (locator.leaf_index as number) + (seq - locator.first_seq);
    return leaf < state.size ? { artifact_id: artifactId, seq, hash, leaf_index: leaf, pending: false } : pending(hash);
  }
  const marker = markers.find(covers);
  if (marker) return pending(marker.hashes[seq - marker.first_seq] as string);
  const q = headQueue(head);
  if (seq >= q.first && seq < q.first + q.hashes.length) return pending(q.hashes[seq - q.first] as string);
  throw new NotFound(`entry ${seq} of ${artifactId} is not in the transparency log (no such entry, or written before the log existed)`);
}
