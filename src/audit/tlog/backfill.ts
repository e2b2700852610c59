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
 * A transaction that commits after the HEAD was read writes its own marker above audit_seq and flags
 * the HEAD itself, so no seq is covered twice and none is missed. `TLOG` / `BACKFILL` {version: 2}
 * records that it ran (version 1: only the first point ran, under the first format).
 *
 * Not built: the installation schema bump that would make every node of a distributed installation
 * write markers before the backfill runs (a node of an older version writing entries after the
 * backfill leaves them unmarked; `alp audit verify` then names them).
 */

import { ConditionFailed } from '../../core/errors.ts';
import { artifactPk, HEAD_SK } from '../../core/keys.ts';
import type { HeadItem } from '../../core/model.ts';
import { cond, type ItemKey } from '../../store/item-store.ts';
import type { ServiceContext } from '../../system/context.ts';
import { allHeads } from '../chain.ts';
import { loadChain } from '../history.ts';
import { TLOG_PK } from './lease.ts';
import { headQueue, MARKER_SK_PREFIX, type Marker, markerKey, markersOf, newMarker, pendingHeadKeys } from './markers.ts';
import { manifestKey, readObject } from './objects.ts';
import { LEGACY_MANIFEST_FORMAT, type LogState, parseManifest } from './state.ts';

export const BACKFILL_KEY: ItemKey = { PK: TLOG_PK, SK: 'BACKFILL' };
const BACKFILL_VERSION = 2;
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
  for await (const head of allHeads(ctx)) written += await backfillArtifact(ctx, head, record === undefined);
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

async function backfillArtifact(ctx: ServiceContext, head: HeadItem, beforeMarkers: boolean): Promise<number> {
  const artifactId = head.artifact_id;
  const markers = await markersOf(ctx, artifactId);
  let written = 0;
  for (const m of markers.filter((x) => x.leaf_index === undefined && x.SK.startsWith(MARKER_SK_PREFIX)))
    written += await moveLegacyMarker(ctx, m);
  // The first seq the log records (a marker, or the HEAD's queue): the entries before it predate the log.
  const queue = headQueue(head);
  const recorded = [...markers.map((m) => m.first_seq), ...(queue.hashes.length > 0 ? [queue.first] : [])];
  const upTo = beforeMarkers ? Math.min(head.audit_seq, ...recorded.map((first) => first - 1)) : 0;
  if (upTo >= 1) written += await markEarlyEntries(ctx, artifactId, upTo);
  if (written > 0 || markers.some((m) => m.leaf_index === undefined))
    await ctx.items.update(
      { PK: artifactPk(artifactId), SK: HEAD_SK },
      { set: pendingHeadKeys(artifactId, ctx.layout.telemetry_shards) },
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
async function markEarlyEntries(ctx: ServiceContext, artifactId: string, upTo: number): Promise<number> {
  const { entries } = await loadChain(ctx, artifactId);
  let written = 0;
  for (let first = 1; first <= upTo; first += PIECE) {
    const last = Math.min(upTo, first + PIECE - 1);
    const piece = entries.filter((e) => (e.seq as number) >= first && (e.seq as number) <= last);
    if (piece.length !== last - first + 1) continue; // a broken chain: audit verify names it; nothing to sequence reliably
    const marker = {
      ...newMarker(
        artifactId,
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
