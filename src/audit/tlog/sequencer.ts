/**
 * One sequencer round of the transparency log (issue 20 item 1; docs/design.md §10 "Sequencing"),
 * under the lease (lease.ts):
 *
 *   0.   once per installation, markers for entries written before markers existed, and the first
 *        format's markers converted (backfill.ts);
 *   i.   read STATE (and rebuild the objects of a restored installation: rebuild.ts);
 *   ii.  reuse the manifest at `size` if a crashed round left one, else list the HEADs flagged pending
 *        (GSI1 `TLOGH#{s}` of every shard, then a consistent batch-get), read each one's pending markers
 *        (a consistent query of its partition), take them chain by chain up to the batch's size and write
 *        the manifest (create-only: of two racing rounds one manifest wins, and the loser uses it);
 *   iii. append the leaves: write the tiles and entry bundles (create-only, deterministic);
 *   iv.  replace each run's pending markers by locators (`leaf_index`; markers.ts), idempotently;
 *   v.   sign the checkpoint of the new size (when the installation has a key) and commit STATE,
 *        conditioned on the size read and on the lease token;
 *   vi.  clear the pending flag of HEADs whose every entry is now in the batch (best effort: a flag left
 *        set costs a later round one query).
 *
 * Locators are written before STATE: a crash between iv and v leaves locators of leaves the committed
 * tree does not have yet (proofs.ts answers them as pending), and the next round finds the manifest at
 * `size`, writes the same locators (already there) and commits. So every leaf of the committed tree has
 * its locator, which is what a restored installation rebuilds the tree from; the manifest of a batch
 * marked but not committed is rebuilt from its locators (rebuild.ts).
 */

import type { Digest } from '../../core/digest.ts';
import { ConditionFailed, Conflict, IntegrityError } from '../../core/errors.ts';
import { forEachLimited } from '../../core/limit.ts';
import { type Condition, cond, type Item, type ItemKey, MAX_TRANSACT_OPS, type TransactOp } from '../../store/item-store.ts';
import type { ServiceContext } from '../../system/context.ts';
import { installationSigner } from '../../system/installation-key.ts';
import { ensureBackfilled } from './backfill.ts';
import { type ChainRef, chainOfHead, chainRef } from './chains.ts';
import { signCheckpoint } from './checkpoint.ts';
import { type Lease, leaseCheck, STATE_KEY } from './lease.ts';
import {
  headQueue,
  isMarker,
  MARKER_SK_PREFIX,
  MARKER_TYPE,
  type Marker,
  markerKey,
  pendingHeadsGsiPk,
  pendingKey,
  pendingMarkersOf,
} from './markers.ts';
import { auditLeafHash } from './merkle.ts';
import { bundlesAfter, contentTileReader, manifestKey, readObject, tileKey, writeObject, writeObjects } from './objects.ts';
import { notePresent, rebuildIfMissing } from './rebuild.ts';
import { type BatchManifest, type BatchRun, type LogState, MANIFEST_FORMAT, manifestLeaves, parseManifest, readLogState } from './state.ts';
import { appendLeaves, TiledTree } from './tiles.ts';

export const DEFAULT_BATCH_LEAVES = 4096;
/** A locator holds at most this many entries (an item stays far below DynamoDB's 400 KB). */
const LOCATOR_ENTRIES = 1000;

/** The steps of a round, for a test that interrupts one (a crash between steps). */
export type RoundStep = 'manifest' | 'objects' | 'marked' | 'committed';

export interface RoundOptions {
  maxLeaves?: number;
  /** Called after each step; throwing there is a crash at that point (tests). */
  afterStep?: (step: RoundStep) => void | Promise<void>;
}

export interface RoundResult {
  size: number;
  appended: number;
  checkpoint?: string;
}

/** Runs one round; the lease must be held. */
export async function runRound(ctx: ServiceContext, lease: Lease, opts: RoundOptions = {}): Promise<RoundResult> {
  const step = opts.afterStep ?? (() => undefined);
  const state = await readLogState(ctx);
  await rebuildIfMissing(ctx, state); // a restored installation: STATE and locators without the objects
  await ensureBackfilled(ctx, state);
  const { batch, idle } = await nextBatch(ctx, state, opts.maxLeaves ?? DEFAULT_BATCH_LEAVES);
  if (!batch) {
    await clearFlags(ctx, idle);
    return ensureSigned(ctx, lease, state);
  }
  await step('manifest');
  const leaves = manifestLeaves(batch);
  const reader = contentTileReader(ctx.content);
  const { size, tiles } = await appendLeaves(
    state.size,
    leaves.map((l) => auditLeafHash(l.hash)),
    reader,
  );
  const bundles = await bundlesAfter(ctx.content, state.size, leaves);
  await writeObjects(ctx.content, [...tiles.map((t) => ({ key: tileKey(t), bytes: t.data })), ...bundles]);
  await step('objects');
  await writeLocators(ctx, batch);
  await step('marked');
  const root = await new TiledTree(size, reader).root();
  const checkpoint = await signedNote(ctx, size, root);
  await commitState(ctx, lease, state, { size, root, batchStart: batch.start, checkpoint });
  notePresent(ctx.content, size);
  await step('committed');
  await clearFlags(ctx, [...idle, ...batch.markers.map((r) => ({ chain: r.artifact_id, seq: r.last_seq }))]);
  return { size, appended: leaves.length, ...(checkpoint ? { checkpoint } : {}) };
}

async function readManifest(ctx: ServiceContext, start: number): Promise<BatchManifest | undefined> {
  const bytes = await readObject(ctx.content, manifestKey(start));
  return bytes ? parseManifest(bytes, start) : undefined;
}

/** A chain whose head's pending flag may be cleared if the chain is still at `seq`. */
interface FlagClear {
  chain: string;
  seq: number;
}

/** A flagged head as read: its chain, the chain's last seq and the item (its queue). */
interface FlaggedHead {
  ref: ChainRef;
  seq: number;
  item: Item;
}

/**
 * The batch at `state.size`: a crashed round's manifest, else a new one from the pending markers; and
 * the flagged HEADs found with nothing pending (their flags to clear).
 */
async function nextBatch(ctx: ServiceContext, state: LogState, maxLeaves: number): Promise<{ batch?: BatchManifest; idle: FlagClear[] }> {
  const existing = await readManifest(ctx, state.size);
  if (existing) return { batch: existing, idle: [] };
  const { runs, idle } = await pendingRuns(ctx, state.size, maxLeaves);
  if (runs.length === 0) return { idle };
  let at = state.size;
  for (const r of runs) {
    r.leaf_start = at;
    at += r.hashes.length;
  }
  const manifest: BatchManifest = { format: MANIFEST_FORMAT, start: state.size, markers: runs };
  try {
    await writeObject(ctx.content, manifestKey(state.size), Buffer.from(JSON.stringify(manifest)));
  } catch (e) {
    if (!(e instanceof Conflict)) throw e;
    // Another round's manifest won the key: the batch is that one.
    return { batch: (await readManifest(ctx, state.size)) as BatchManifest, idle };
  }
  return { batch: manifest, idle };
}

/** The HEADs flagged pending, read consistently (the index may be behind: a flag cleared since is skipped later). */
async function flaggedHeads(ctx: ServiceContext): Promise<FlaggedHead[]> {
  const keys: ItemKey[] = [];
  for (let s = 0; s < ctx.layout.telemetry_shards; s++) {
    let cursor: string | undefined;
    do {
      const page = await ctx.items.query({ index: 'GSI1', pk: pendingHeadsGsiPk(s), limit: 1000, ...(cursor ? { cursor } : {}) });
      for (const i of page.items) keys.push({ PK: i.PK, SK: i.SK });
      cursor = page.cursor;
    } while (cursor);
  }
  const heads: FlaggedHead[] = [];
  for (const item of await ctx.items.batchGet(keys)) {
    const chain = chainOfHead(item);
    if (chain) heads.push({ ...chain, item });
  }
  return heads.sort((a, b) => (a.ref.id < b.ref.id ? -1 : a.ref.id > b.ref.id ? 1 : 0));
}

/** How far a chain is in the log: its last locator's last_seq (0 before its first). */
async function locatedUpTo(ctx: ServiceContext, chainId: string): Promise<number> {
  const page = await ctx.items.query({
    pk: chainRef(chainId).pk,
    sk: { beginsWith: MARKER_SK_PREFIX },
    descending: true,
    limit: 1,
    consistent: true,
  });
  const last = page.items[0];
  return isMarker(last) ? last.last_seq : 0;
}

/**
 * A chain's entries not yet in the log, from its pending markers and its HEAD's queue: from the first
 * recorded one after its last locator, as far as they follow on without a gap, up to `room` entries (at
 * least one); and the pending markers the run's locators replace.
 */
async function chainRun(ctx: ServiceContext, head: FlaggedHead, room: number): Promise<BatchRun | undefined> {
  const id = head.ref.id;
  const [done, markers] = await Promise.all([locatedUpTo(ctx, id), pendingMarkersOf(ctx, id)]);
  const hashOf = new Map<number, string>();
  const q = headQueue(head.item);
  for (const { first_seq, hashes } of [...markers, { first_seq: q.first, hashes: q.hashes }])
    hashes.forEach((h, i) => {
      hashOf.set(first_seq + i, h);
    });
  // Entries without a record (written with the log off) are skipped, not waited for: audit verify names them.
  const start = Math.min(...[...hashOf.keys()].filter((seq) => seq > done));
  if (!Number.isFinite(start)) return undefined;
  const hashes: Digest[] = [];
  for (let seq = start; hashOf.has(seq) && hashes.length < Math.max(1, room); seq++) hashes.push(hashOf.get(seq) as Digest);
  const last = start + hashes.length - 1;
  return {
    artifact_id: id,
    first_seq: start,
    last_seq: last,
    leaf_start: 0,
    hashes,
    pending: markers.filter((m) => m.last_seq <= last).map((m) => [m.first_seq, m.last_seq]),
    timestamp: markers[0]?.timestamp ?? ctx.clock.now().toISOString(),
  };
}

/**
 * Runs of the pending chains up to about `maxLeaves` leaves (at least one entry). The chains are
 * taken from a point that moves with the log's size, so a backlog longer than one batch does not
 * always leave the same chains for later.
 */
async function pendingRuns(ctx: ServiceContext, size: number, maxLeaves: number): Promise<{ runs: BatchRun[]; idle: FlagClear[] }> {
  const heads = await flaggedHeads(ctx);
  const runs: BatchRun[] = [];
  const idle: FlagClear[] = [];
  let leaves = 0;
  for (let k = 0; k < heads.length && leaves < maxLeaves; k++) {
    const head = heads[(size + k) % heads.length] as FlaggedHead;
    const run = await chainRun(ctx, head, maxLeaves - leaves);
    if (!run) idle.push({ chain: head.ref.id, seq: head.seq });
    else {
      runs.push(run);
      leaves += run.hashes.length;
    }
  }
  return { runs, idle };
}

/** A locator and the pending markers it replaces ([first_seq, last_seq] each). */
interface LocatorPiece {
  locator: Marker;
  pending: Array<[number, number]>;
}

/**
 * The locators of a run: pieces of at most LOCATOR_ENTRIES entries, each with the pending markers it
 * replaces (a marker goes with the piece that holds its last entry; one wholly before the run, stale,
 * with the first), few enough that a piece's transaction fits.
 */
function locatorPieces(run: BatchRun): LocatorPiece[] {
  const out: LocatorPiece[] = [];
  const pending = [...(run.pending ?? [])].sort((a, b) => a[1] - b[1]);
  let p = 0;
  for (let from = run.first_seq; from <= run.last_seq; ) {
    let to = Math.min(run.last_seq, from + LOCATOR_ENTRIES - 1);
    const mine: Array<[number, number]> = [];
    while (p < pending.length && (pending[p] as [number, number])[1] <= to) {
      if (mine.length === MAX_TRANSACT_OPS - 1) {
        to = Math.max(from, (pending[p - 1] as [number, number])[1]);
        break;
      }
      mine.push(pending[p] as [number, number]);
      p++;
    }
    out.push({
      locator: {
        ...markerKey(run.artifact_id, from),
        type: MARKER_TYPE,
        artifact_id: run.artifact_id,
        first_seq: from,
        last_seq: to,
        hashes: run.hashes.slice(from - run.first_seq, to - run.first_seq + 1),
        timestamp: run.timestamp ?? '',
        leaf_index: run.leaf_start + (from - run.first_seq),
      },
      pending: mine,
    });
    from = to + 1;
  }
  return out;
}

/** The delete of a pending marker the batch saw: only that one (a marker of the same first seq but another extent is not it). */
const deleteOp = (artifactId: string, [first, last]: [number, number]): TransactOp => ({
  op: 'delete',
  key: pendingKey(artifactId, first),
  condition: cond.eq('last_seq', last),
});

const pieceOps = (p: LocatorPiece): TransactOp[] => [
  { op: 'put', item: p.locator, condition: cond.notExists() },
  ...p.pending.map((m) => deleteOp(p.locator.artifact_id, m)),
];

/**
 * Step iv: each piece's locator put (create-only) and its pending markers deleted, in one transaction;
 * pieces packed into transactions of up to MAX_TRANSACT_OPS. A locator already there (a round redone
 * after a crash, or a former holder's) must be the same one: then the piece is done.
 */
async function writeLocators(ctx: ServiceContext, batch: BatchManifest): Promise<void> {
  const pieces = batch.markers.flatMap(locatorPieces);
  const groups: LocatorPiece[][] = [];
  let ops = MAX_TRANSACT_OPS;
  for (const p of pieces) {
    const n = 1 + p.pending.length;
    if (ops + n > MAX_TRANSACT_OPS) {
      groups.push([]);
      ops = 0;
    }
    (groups[groups.length - 1] as LocatorPiece[]).push(p);
    ops += n;
  }
  for (const group of groups) {
    try {
      await ctx.items.transactWrite(group.flatMap(pieceOps));
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
      await forEachLimited(group, 16, (p) => writePiece(ctx, p));
    }
  }
}

async function writePiece(ctx: ServiceContext, p: LocatorPiece): Promise<void> {
  try {
    await ctx.items.transactWrite(pieceOps(p));
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    const there = await ctx.items.get(markerKey(p.locator.artifact_id, p.locator.first_seq), { consistent: true });
    if (there?.leaf_index !== p.locator.leaf_index || there?.last_seq !== p.locator.last_seq)
      throw new IntegrityError(`the transparency log's locator of ${p.locator.artifact_id} at ${p.locator.first_seq} is not this batch's`, {
        key: markerKey(p.locator.artifact_id, p.locator.first_seq),
      });
    // The same locator: this piece was written before. Its pending markers go too (gone already: fine).
    for (const m of p.pending) {
      const op = deleteOp(p.locator.artifact_id, m) as Extract<TransactOp, { op: 'delete' }>;
      await ctx.items.delete(op.key, { condition: op.condition as Condition }).catch((err: unknown) => {
        if (!(err instanceof ConditionFailed)) throw err;
      });
    }
  }
}

/**
 * Step vi: clears the pending flag of each chain's head still at the given seq (nothing written since, so
 * nothing pending); a HEAD that moved on keeps it. Best effort: a flag left set is cleared later.
 */
async function clearFlags(ctx: ServiceContext, heads: FlagClear[]): Promise<void> {
  const last = new Map<string, number>();
  for (const h of heads) last.set(h.chain, Math.max(last.get(h.chain) ?? 0, h.seq));
  await forEachLimited([...last], 16, async ([chainId, seq]) => {
    const ref = chainRef(chainId);
    await ctx.items
      .update(
        { PK: ref.pk, SK: ref.headSk },
        { remove: ['GSI1PK', 'GSI1SK'] },
        { condition: cond.and(cond.exists(), cond.eq(ref.seqAttr, seq)) },
      )
      .catch((err: unknown) => {
        if (!(err instanceof ConditionFailed)) throw err;
      });
  });
}

async function signedNote(ctx: ServiceContext, size: number, root: Uint8Array): Promise<string | undefined> {
  const signer = await installationSigner(ctx).catch(() => undefined);
  if (!signer) return undefined;
  return signCheckpoint({ origin: signer.name, size, root }, signer);
}

/** STATE moves to `next` only from the size read, and only while the lease is this round's. */
async function commitState(
  ctx: ServiceContext,
  lease: Lease,
  read: LogState,
  next: { size: number; root: Uint8Array; batchStart?: number; checkpoint?: string | undefined },
): Promise<void> {
  const item: Item = {
    ...STATE_KEY,
    type: 'tlog_state',
    size: next.size,
    root: Buffer.from(next.root).toString('base64'),
    ...(next.batchStart !== undefined ? { batch_start: next.batchStart } : {}),
    ...(next.checkpoint ? { checkpoint: next.checkpoint } : {}),
    updated_at: ctx.clock.now().toISOString(),
  };
  try {
    await ctx.items.transactWrite([
      leaseCheck(lease),
      { op: 'put', item, condition: read.exists ? cond.eq('size', read.size) : cond.notExists() },
    ]);
  } catch (e) {
    if (e instanceof ConditionFailed)
      throw new Conflict(
        e.failedIndex === 0
          ? 'the transparency log lease was taken over; this round did not commit'
          : 'the transparency log moved under this round',
      );
    throw e;
  }
}

/** With nothing to append: the state as it is, its checkpoint signed if it is not yet (a key configured since). */
async function ensureSigned(ctx: ServiceContext, lease: Lease, state: LogState): Promise<RoundResult> {
  if (state.checkpoint) return { size: state.size, appended: 0, checkpoint: state.checkpoint };
  const checkpoint = await signedNote(ctx, state.size, state.root);
  if (!checkpoint) return { size: state.size, appended: 0 };
  await commitState(ctx, lease, state, {
    size: state.size,
    root: state.root,
    ...(state.batchStart !== undefined ? { batchStart: state.batchStart } : {}),
    checkpoint,
  });
  return { size: state.size, appended: 0, checkpoint };
}
