/**
 * Existing installations (issue 20 item 1, docs/design.md §10 point 6): entries written before audit
 * transactions wrote markers have none, so the sequencer would never see them. Once per installation,
 * under the lease, the backfill reads every HEAD and then the artifact's markers, and puts markers for
 * the seqs 1 … (its first marker's first_seq − 1), or 1 … audit_seq when it has none — the entries
 * written before markers, packed segments included (loadChain) — in pieces of at most 1,000 entries
 * (an item stays far below 400 KB), each conditioned on not existing. A transaction that commits after
 * the HEAD was read writes its own marker above audit_seq, so no seq is covered twice. The normal rounds
 * then sequence them. `TLOG` / `BACKFILL` {done_at} records that it ran.
 *
 * Not built: the installation schema bump that would make every node of a distributed installation
 * write markers before the backfill runs (a node of an older version writing entries after the
 * backfill leaves them unmarked; `alp audit verify` then names them).
 */

import { ConditionFailed } from '../../core/errors.ts';
import { cond, type ItemKey } from '../../store/item-store.ts';
import type { ServiceContext } from '../../system/context.ts';
import { allHeads } from '../chain.ts';
import { loadChain } from '../history.ts';
import { TLOG_PK } from './lease.ts';
import { markersOf, newMarker } from './markers.ts';

export const BACKFILL_KEY: ItemKey = { PK: TLOG_PK, SK: 'BACKFILL' };
const PIECE = 1000;
const done = new WeakMap<object, true>();

/** Runs the backfill unless it ran already (remembered per item store once seen done). Returns the markers written. */
export async function ensureBackfilled(ctx: ServiceContext): Promise<number> {
  if (done.has(ctx.items)) return 0;
  if (await ctx.items.get(BACKFILL_KEY, { consistent: true })) {
    done.set(ctx.items, true);
    return 0;
  }
  let written = 0;
  for await (const head of allHeads(ctx)) written += await backfillArtifact(ctx, head.artifact_id, head.audit_seq);
  await ctx.items.put({ ...BACKFILL_KEY, type: 'tlog_backfill', done_at: ctx.clock.now().toISOString(), markers: written });
  done.set(ctx.items, true);
  return written;
}

async function backfillArtifact(ctx: ServiceContext, artifactId: string, auditSeq: number): Promise<number> {
  const markers = await markersOf(ctx, artifactId);
  const upTo = Math.min(auditSeq, ...markers.map((m) => m.first_seq - 1));
  if (upTo < 1) return 0;
  const { entries } = await loadChain(ctx, artifactId);
  let written = 0;
  for (let first = 1; first <= upTo; first += PIECE) {
    const last = Math.min(upTo, first + PIECE - 1);
    const piece = entries.filter((e) => (e.seq as number) >= first && (e.seq as number) <= last);
    if (piece.length !== last - first + 1) continue; // a broken chain: audit verify names it; nothing to sequence reliably
    const hashes = piece.map((e) => e.hash as string);
    const marker = {
      ...newMarker(artifactId, first, hashes, piece[0]?.timestamp as string, ctx.layout.telemetry_shards),
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
