/**
 * Installations from before the current marker format (issue 20 item 1, docs/design.md §10 point 6),
 * once per installation, under the lease, before the round lists anything:
 * - entries written before audit transactions wrote markers have none, so the sequencer would never
 *   see them: pending markers are put for seqs 1 … (the chain's first marker's first_seq − 1), or
 *   1 … audit_seq when it has none — packed segments included (loadChain) — in pieces of at most 1,000
 *   entries (an item stays far below 400 KB), each conditioned on not existing;
 * - the first format (pending markers at `TLOGQ#…` listed by GSI1 `TLOGQ#{s}`, marked in place after
 *   STATE committed): the last committed batch's markers still unmarked are marked (its manifest), and
 *   every other unmarked marker moves to a pending marker of the current format (one transaction each);
 * - every HEAD with pending markers is flagged (markers.ts pendingHeadKeys).
 * The entries "before markers" are those before the first the log records in any form: a locator, a
 * pending marker or the HEAD's queue.
 * The installation logs (chains.ts) are chains of the log since version 3: their entries until then
 * are backfilled the same way. A transaction that commits after the head was read writes its own
 * record above its seq and flags the head itself, so no seq is covered twice and none is missed.
 * `TLOG` / `BACKFILL` {version: 3} records that it ran (version 1: only the first point ran, under the
 * first format; version 2: before the installation logs were chains).
 *
 * Not built: the installation schema bump that would make every node of a distributed installation
 * write markers before the backfill runs (a node of an older version writing entries after the
 * backfill leaves them unmarked; `alp audit verify` then names them).
 */

import { ConditionFailed } from '../../core/errors.ts';
import { cond, type Item, type ItemKey } from '../../store/item-store.ts';
import type { ServiceContext } from '../../system/context.ts';
import { allHeads } from '../chain.ts';
import { chainEntries } from './chain-entries.ts';
import { chainOfHead, chainRef, installationLogIds } from './chains.ts';
import { TLOG_PK } from './lease.ts';
import { headQueue, MARKER_SK_PREFIX, type Marker, markerKey, markersOf, newMarker, pendingHeadKeys } from './markers.ts';
import { manifestKey, readObject } from './objects.ts';
import { LEGACY_MANIFEST_FORMAT, type LogState, parseManifest } from './state.ts';

export const BACKFILL_KEY: ItemKey = { PK: TLOG_PK, SK: 'BACKFILL' };
const BACKFILL_VERSION = 3;
const PIECE = 1000;
const done = new WeakMap<object, true>();

/** Runs the backfill unless it ran already (remembered per item store once seen done). Returns the markers written. */
export async function ensureBackfilled(ctx: ServiceContext, state: LogState): Promise<number> {
  if (done.has(ctx.items)) return 0;
  const record = await ctx.items.get(BACKFILL_KEY, { consistent: true });
  if (record?.version === BACKFILL_VERSION) {
    done.set(ctx.items, true);
    return 0;
  }
  await finishLegacyBatch(ctx, state);
  let written = 0;
  for await (const head of allHeads(ctx)) written += await backfillChain(ctx, head, record === undefined);
  // Version 3 made the installation logs chains of the log: their entries until then predate it.
  if (((record?.version as number | undefined) ?? 0) < 3)
    for (const id of installationLogIds()) {
      const ref = chainRef(id);
      const head = await ctx.items.get({ PK: ref.pk, SK: ref.headSk }, { consistent: true });
      if (head) written += await backfillChain(ctx, head, true);
    }
  await ctx.items.put({
    ...BACKFILL_KEY,
    type: 'tlog_backfill',
    version: BACKFILL_VERSION,
    done_at: ctx.clock.now().toISOString(),
    markers: written,
  });
  done.set(ctx.items, true);
  return written;
}

/** The first format's last committed batch: its markers still unmarked get their leaf (they are in the tree). */
async function finishLegacyBatch(ctx: ServiceContext, state: LogState): Promise<void> {
  if (state.batchStart === undefined) return;
  const bytes = await readObject(ctx.content, manifestKey(state.batchStart));
  const manifest = bytes ? parseManifest(bytes, state.batchStart) : undefined;
  if (manifest?.format !== LEGACY_MANIFEST_FORMAT) return;
  for (const run of manifest.markers)
    await ctx.items
      .update(
        markerKey(run.artifact_id, run.first_seq),
        { set: { leaf_index: run.leaf_start }, remove: ['GSI1PK', 'GSI1SK'] },
        { condition: cond.and(cond.exists(), cond.attrNotExists('leaf_index')) },
      )
      .catch((e: unknown) => {
        if (!(e instanceof ConditionFailed)) throw e;
      });
}

async function backfillChain(ctx: ServiceContext, head: Item, beforeMarkers: boolean): Promise<number> {
  const chain = chainOfHead(head);
  if (!chain) return 0;
  const id = chain.ref.id;
  const markers = await markersOf(ctx, id);
  let written = 0;
  for (const m of markers.filter((x) => x.leaf_index === undefined && x.SK.startsWith(MARKER_SK_PREFIX)))
    written += await moveLegacyMarker(ctx, m);
  // The first seq the log records (a marker, or the HEAD's queue): the entries before it predate the log.
  const queue = headQueue(head);
  const recorded = [...markers.map((m) => m.first_seq), ...(queue.hashes.length > 0 ? [queue.first] : [])];
  const upTo = beforeMarkers ? Math.min(chain.seq, ...recorded.map((first) => first - 1)) : 0;
  if (upTo >= 1) written += await markEarlyEntries(ctx, id, upTo);
  if (written > 0 || markers.some((m) => m.leaf_index === undefined))
    await ctx.items.update(
      { PK: chain.ref.pk, SK: chain.ref.headSk },
      { set: pendingHeadKeys(id, ctx.layout.telemetry_shards) },
      { condition: cond.exists() },
    );
  return written;
}

/** A first-format pending marker becomes a pending marker of the current format (same entries). */
async function moveLegacyMarker(ctx: ServiceContext, m: Marker): Promise<number> {
  const { GSI1PK: _g, GSI1SK: _s, PK: _p, SK: _k, ...rest } = m;
  const moved = { ...newMarker(m.artifact_id, m.first_seq, m.hashes, m.timestamp), ...rest, type: m.type };
  try {
    await ctx.items.transactWrite([
      { op: 'put', item: moved, condition: cond.notExists() },
      { op: 'delete', key: { PK: m.PK, SK: m.SK }, condition: cond.attrNotExists('leaf_index') },
    ]);
    return 1;
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    return 0;
  }
}

/** Pending markers for the entries 1 … upTo, written before markers existed. */
async function markEarlyEntries(ctx: ServiceContext, chainId: string, upTo: number): Promise<number> {
  const { bySeq } = await chainEntries(ctx, chainId);
  let written = 0;
  for (let first = 1; first <= upTo; first += PIECE) {
    const last = Math.min(upTo, first + PIECE - 1);
    const piece = [...bySeq.values()]
      .filter((e) => (e.seq as number) >= first && (e.seq as number) <= last)
      .sort((a, b) => (a.seq as number) - (b.seq as number));
    if (piece.length !== last - first + 1) continue; // a broken chain: audit verify names it; nothing to sequence reliably
    const marker = {
      ...newMarker(
        chainId,
        first,
        piece.map((e) => e.hash as string),
        piece[0]?.timestamp as string,
      ),
      backfilled: true,
    };
    try {
      await ctx.items.put(marker, { condition: cond.notExists() });
      written++;
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
    }
  }
  return written;
}
