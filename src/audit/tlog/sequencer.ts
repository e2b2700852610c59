/**
 * One sequencer round of the transparency log (issue 20 item 1; docs/design.md §10 "Sequencing"),
 * under the lease (lease.ts):
 *
 *   0.   once per installation, markers for entries written before markers existed (backfill.ts);
 *   i.   read STATE; finish marking the last committed batch's markers (an interrupted step vi);
 *   ii.  reuse the manifest at `size` if a crashed round left one, else list pending markers (GSI1
 *        `TLOGQ#{s}` of every shard, then a consistent batch-get: only markers without leaf_index),
 *        order them (timestamp, artifact, first_seq) and write the manifest (create-only: of two
 *        racing rounds one manifest wins, and the loser uses it);
 *   iii. append the leaves: write the tiles and entry bundles (create-only, deterministic);
 *   iv.  sign the checkpoint of the new size (when the installation has a key);
 *   v.   commit STATE conditioned on the size read and on the lease token;
 *   vi.  mark each marker of the batch (leaf_index, GSI1 keys removed).
 *
 * A crash before v leaves unreferenced objects and pending markers: the next round redoes the batch
 * from its manifest, writing the same bytes. A crash after v: the next round's step i marks them
 * before it lists anything, so no marker is listed pending once its leaves are committed.
 */

import type { Digest } from '../../core/digest.ts';
import { ConditionFailed, Conflict } from '../../core/errors.ts';
import { forEachLimited } from '../../core/limit.ts';
import { cond, type Item, type ItemKey, type TransactOp } from '../../store/item-store.ts';
import type { ServiceContext } from '../../system/context.ts';
import { installationSigner } from '../../system/installation-key.ts';
import { ensureBackfilled } from './backfill.ts';
import { signCheckpoint } from './checkpoint.ts';
import { type Lease, leaseCheck, STATE_KEY } from './lease.ts';
import { isMarker, type Marker, markerKey, markerOrder, pendingGsiPk } from './markers.ts';
import { auditLeafHash } from './merkle.ts';
import { bundlesAfter, contentTileReader, manifestKey, readObject, tileKey, writeObject, writeObjects } from './objects.ts';
import { notePresent, rebuildIfMissing } from './rebuild.ts';
import { type BatchManifest, type LogState, manifestLeaves, parseManifest, readLogState } from './state.ts';
import { appendLeaves, TiledTree } from './tiles.ts';

export const DEFAULT_BATCH_LEAVES = 4096;

/** The steps of a round, for a test that interrupts one (a crash between steps). */
export type RoundStep = 'marked-previous' | 'manifest' | 'objects' | 'committed' | 'marked';

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

/**
 * The batch this process last marked to the end, per store: a round starts by finishing the marking of
 * the last committed batch (an interrupted round's), which after a round of this process that marked
 * it is known done — marked markers never become unmarked — and is skipped instead of re-read.
 */
const markedHere = new WeakMap<object, number>();

/** Runs one round; the lease must be held. */
export async function runRound(ctx: ServiceContext, lease: Lease, opts: RoundOptions = {}): Promise<RoundResult> {
  const step = opts.afterStep ?? (() => undefined);
  await ensureBackfilled(ctx);
  const state = await readLogState(ctx);
  await rebuildIfMissing(ctx, state); // a restored installation: STATE and markers without the objects
  if (state.batchStart !== undefined && markedHere.get(ctx.items) !== state.batchStart)
    await markBatch(ctx, await readManifest(ctx, state.batchStart));
  await step('marked-previous');
  const batch = await nextBatch(ctx, state, opts.maxLeaves ?? DEFAULT_BATCH_LEAVES);
  if (!batch) return ensureSigned(ctx, lease, state);
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
  const root = await new TiledTree(size, reader).root();
  const checkpoint = await signedNote(ctx, size, root);
  await commitState(ctx, lease, state, { size, root, batchStart: batch.start, checkpoint });
  notePresent(ctx.content, size);
  await step('committed');
  await markBatch(ctx, batch, { fresh: true });
  markedHere.set(ctx.items, batch.start);
  await step('marked');
  return { size, appended: leaves.length, ...(checkpoint ? { checkpoint } : {}) };
}

/** The markers of `keys` not yet given a leaf (one batchGet: the engines split it as they need). */
async function unmarkedMarkers(ctx: ServiceContext, keys: ItemKey[]): Promise<Marker[]> {
  return (await ctx.items.batchGet(keys)).filter((item): item is Marker => isMarker(item) && item.leaf_index === undefined);
}

async function unmarkedOf(ctx: ServiceContext, batch: BatchManifest): Promise<BatchManifest['markers']> {
  const keys = batch.markers.map((m) => markerKey(m.artifact_id, m.first_seq));
  const unmarked = new Set((await unmarkedMarkers(ctx, keys)).map((item) => `${item.PK} ${item.SK}`));
  return batch.markers.filter((m) => {
    const k = markerKey(m.artifact_id, m.first_seq);
    return unmarked.has(`${k.PK} ${k.SK}`);
  });
}

async function readManifest(ctx: ServiceContext, start: number): Promise<BatchManifest> {
  const bytes = await readObject(ctx.content, manifestKey(start));
  if (!bytes) throw new Conflict(`the transparency log's batch manifest at ${start} is missing`, { key: manifestKey(start) });
  return parseManifest(bytes, start);
}

/** The batch at `state.size`: a crashed round's manifest, else a new one from the pending markers. */
async function nextBatch(ctx: ServiceContext, state: LogState, maxLeaves: number): Promise<BatchManifest | undefined> {
  const existing = await readObject(ctx.content, manifestKey(state.size));
  if (existing) return parseManifest(existing, state.size);
  const pending = await pendingMarkers(ctx, maxLeaves);
  if (pending.length === 0) return undefined;
  let at = state.size;
  const manifest: BatchManifest = {
    format: 'alp-tlog-batch/1',
    start: state.size,
    markers: pending.map((m) => {
      const leafStart = at;
      at += m.hashes.length;
      return {
        artifact_id: m.artifact_id,
        first_seq: m.first_seq,
        last_seq: m.last_seq,
        leaf_start: leafStart,
        hashes: m.hashes as Digest[],
      };
    }),
  };
  try {
    await writeObject(ctx.content, manifestKey(state.size), Buffer.from(JSON.stringify(manifest)));
  } catch (e) {
    if (!(e instanceof Conflict)) throw e;
    return readManifest(ctx, state.size); // another round's manifest won the key: the batch is that one
  }
  return manifest;
}

/** Pending markers of every shard, oldest first, up to about `maxLeaves` leaves (at least one marker). */
export async function pendingMarkers(ctx: ServiceContext, maxLeaves: number): Promise<Marker[]> {
  const keys: ItemKey[] = [];
  for (let s = 0; s < ctx.layout.telemetry_shards; s++) {
    let cursor: string | undefined;
    let n = 0;
    do {
      const page = await ctx.items.query({
        index: 'GSI1',
        pk: pendingGsiPk(s),
        limit: Math.min(1000, maxLeaves),
        ...(cursor ? { cursor } : {}),
      });
      for (const i of page.items) keys.push({ PK: i.PK, SK: i.SK });
      n += page.items.length;
      cursor = page.cursor;
    } while (cursor && n < maxLeaves);
  }
  const found = (await unmarkedMarkers(ctx, keys)).sort(markerOrder);
  const out: Marker[] = [];
  let leaves = 0;
  for (const m of found) {
    if (out.length > 0 && leaves + m.hashes.length > maxLeaves) break;
    out.push(m);
    leaves += m.hashes.length;
  }
  return out;
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

/**
 * Sets each marker's leaf_index: only those still unmarked (read first, unless `fresh`: a round
 * finishing an earlier batch re-checks it), in transactions of up to 100 (one commit each); a transaction whose condition
 * fails (another holder marked one meanwhile) falls back to one update per marker. Idempotent.
 */
async function markBatch(ctx: ServiceContext, batch: BatchManifest, opts: { fresh?: boolean } = {}): Promise<void> {
  // `fresh`: the batch this round just read unmarked — no re-read; the updates' condition still holds
  // against another holder having marked some meanwhile (then the per-marker fallback below).
  const todo = opts.fresh ? batch.markers : await unmarkedOf(ctx, batch);
  const markCondition = cond.and(cond.exists(), cond.attrNotExists('leaf_index'));
  const markUpdate = (m: BatchManifest['markers'][number]) => ({ set: { leaf_index: m.leaf_start }, remove: ['GSI1PK', 'GSI1SK'] });
  const op = (m: BatchManifest['markers'][number]): TransactOp => ({
    op: 'update',
    key: markerKey(m.artifact_id, m.first_seq),
    update: markUpdate(m),
    condition: markCondition,
  });
  for (let i = 0; i < todo.length; i += 100) {
    const part = todo.slice(i, i + 100);
    try {
      await ctx.items.transactWrite(part.map(op));
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
      await forEachLimited(part, 16, async (m) => {
        await ctx.items.update(markerKey(m.artifact_id, m.first_seq), markUpdate(m), { condition: markCondition }).catch((err: unknown) => {
          if (!(err instanceof ConditionFailed)) throw err;
        });
      });
    }
  }
}
