/**
 * Pending markers of the transparency log (issue 20 item 1, docs/design.md §10 "Sequencing"): every
 * audit transaction that extends an artifact's chain also puts, per chain, one marker item in the
 * artifact's own partition, `ART#{id}` / `TLOGQ#{first_seq:10}`, holding the entries' seqs and hashes.
 * The marker exists exactly when the entries do (same transaction). Pending markers are listed by GSI1
 * `TLOGQ#{s}` (s = the artifact's telemetry shard); the sequencer (sequencer.ts) gives them leaf
 * positions and then marks them (`leaf_index`, GSI1 keys removed), after which a marker is the
 * entry → leaf locator.
 *
 * commitAudited (audit/chain.ts) adds them to the transaction's own operations, not as an audit sink:
 * a sink may fall back to dropping what it adds, a marker must never be dropped, and it is counted in
 * AUDIT_RESERVED_OPS like the HEAD update. Its key is new by construction (first_seq follows the HEAD
 * the transaction is conditioned on), so the put needs no condition of its own.
 */
import { artifactPk, pad, SEQ_DIGITS } from '../../core/keys.ts';
import { shardOf } from '../../core/shard.ts';
import { type Item, type ItemKey, queryAll } from '../../store/item-store.ts';
import type { AuditEvent, ServiceContext } from '../../system/context.ts';

export const MARKER_SK_PREFIX = 'TLOGQ#';
export const MARKER_TYPE = 'tlog_marker';
/** The environment variable that turns markers off (a benchmark's reference run only). */
export const NO_MARKERS_ENV = 'ALP_TLOG_MARKERS';

export const markerSk = (firstSeq: number) => `${MARKER_SK_PREFIX}${pad(firstSeq, SEQ_DIGITS)}`;
export const markerKey = (artifactId: string, firstSeq: number): ItemKey => ({ PK: artifactPk(artifactId), SK: markerSk(firstSeq) });
/** The GSI1 partition of shard `s`: where pending markers are listed. */
export const pendingGsiPk = (s: number) => `TLOGQ#${s}`;

export interface Marker extends Item {
  type: typeof MARKER_TYPE;
  artifact_id: string;
  first_seq: number;
  last_seq: number;
  /** The entries' hashes, seq first_seq … last_seq. */
  hashes: string[];
  timestamp: string;
  /** Set by the sequencer: the leaf of entry first_seq (the others follow). */
  leaf_index?: number;
}

export function isMarker(item: Item | undefined): item is Marker {
  return item?.type === MARKER_TYPE && typeof item.first_seq === 'number' && Array.isArray(item.hashes);
}

/** The markers of one transaction's events: one per chain, its entries in seq order. */
export function markersFor(events: readonly AuditEvent[], shards: number): Marker[] {
  const byChain = new Map<string, AuditEvent[]>();
  for (const e of events) {
    if (e.chained === false || e.seq === undefined || e.hash === undefined) continue;
    const list = byChain.get(e.aggregate_id) ?? [];
    list.push(e);
    byChain.set(e.aggregate_id, list);
  }
  const out: Marker[] = [];
  for (const [artifactId, list] of byChain) {
    list.sort((a, b) => (a.seq as number) - (b.seq as number));
    const first = list[0] as AuditEvent;
    out.push(
      newMarker(
        artifactId,
        first.seq as number,
        list.map((e) => e.hash as string),
        first.timestamp,
        shards,
      ),
    );
  }
  return out;
}

/** A pending marker: entries first_seq … first_seq + hashes.length − 1 of one chain, in its shard's GSI1 queue. */
export function newMarker(artifactId: string, firstSeq: number, hashes: string[], timestamp: string, shards: number): Marker {
  return {
    ...markerKey(artifactId, firstSeq),
    type: MARKER_TYPE,
    artifact_id: artifactId,
    first_seq: firstSeq,
    last_seq: firstSeq + hashes.length - 1,
    hashes,
    timestamp,
    GSI1PK: pendingGsiPk(shardOf(artifactId, shards)),
    GSI1SK: `${timestamp}#${artifactId}#${pad(firstSeq, SEQ_DIGITS)}`,
  };
}

/** Every marker of one chain (strongly consistent). */
export async function markersOf(ctx: Pick<ServiceContext, 'items'>, artifactId: string): Promise<Marker[]> {
  return (await queryAll(ctx.items, { pk: artifactPk(artifactId), sk: { beginsWith: MARKER_SK_PREFIX }, consistent: true })).filter(
    isMarker,
  );
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The order a round takes pending markers in (commit timestamp, artifact, first seq): the rebuild of a
 * restored installation must take them in exactly this order to reproduce STATE's root.
 */
export function markerOrder(a: Marker, b: Marker): number {
  return cmp(a.timestamp, b.timestamp) || cmp(a.artifact_id, b.artifact_id) || a.first_seq - b.first_seq;
}

/** Whether markers are written (on unless ALP_TLOG_MARKERS=off: a benchmark's reference run). */
export function markersEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[NO_MARKERS_ENV] !== 'off';
}

/**
 * What `alp audit verify` finds wrong with a chain's markers (`live`: the partition's other items):
 * a malformed marker, a marker whose hashes are not the chain's entries, markers that overlap, and an
 * entry after the first marker that no marker covers (an entry not written by an audit transaction).
 * Entries before the first marker predate markers (the first round's backfill, backfill.ts, covers them).
 */
export function markerProblems(entries: readonly Item[], live: readonly Item[]): Array<{ row: string; problem: string }> {
  const out: Array<{ row: string; problem: string }> = [];
  const hashOf = new Map(entries.map((e) => [e.seq as number, e.hash]));
  const covered = new Set<number>();
  let first = Number.POSITIVE_INFINITY;
  for (const item of live.filter((i) => i.SK.startsWith(MARKER_SK_PREFIX))) {
    const row = `${item.PK} ${item.SK}`;
    if (
      !isMarker(item) ||
      item.SK !== markerSk(item.first_seq) ||
      item.PK !== artifactPk(item.artifact_id) ||
      item.last_seq !== item.first_seq + item.hashes.length - 1
    ) {
      out.push({ row, problem: 'malformed transparency-log marker (the row was edited)' });
      continue;
    }
    if (item.leaf_index !== undefined && !(Number.isSafeInteger(item.leaf_index) && item.leaf_index >= 0))
      out.push({ row, problem: 'malformed leaf_index (the row was edited)' });
    first = Math.min(first, item.first_seq);
    item.hashes.forEach((h, i) => {
      const seq = item.first_seq + i;
      if (covered.has(seq)) out.push({ row, problem: `entry ${seq} is covered by two transparency-log markers` });
      covered.add(seq);
      if (hashOf.get(seq) !== h)
        out.push({
          row,
          problem: `the marker records entry ${seq} with another hash than the chain's (the entry or the marker was edited)`,
        });
    });
  }
  for (const e of entries) {
    const seq = e.seq as number;
    if (seq > first && !covered.has(seq))
      out.push({ row: `${e.PK} ${e.SK}`, problem: `entry ${seq} has no transparency-log marker (not written by an audit transaction)` });
  }
  return out;
}
