/**
 * What the transparency log keeps in the item store per chain (issue 20 item 1, docs/design.md §10
 * "Sequencing"), all in the artifact's own partition:
 * - the **HEAD queue**: every audit transaction appends its entries' hashes to its HEAD, which it
 *   rewrites anyway (`tlog_q_first`, `tlog_q`: entries tlog_q_first … in order), and flags the HEAD as
 *   pending (GSI1 `TLOGH#{s}` / artifact id, s = the artifact's telemetry shard; constant values, so a
 *   HEAD already flagged keeps its index entry). No item per transaction: a transaction costs the log
 *   a few dozen bytes in a row it writes anyway;
 * - a **pending marker**, `HEAD#Q#{inverted first_seq}`: when the queue would pass HEAD_QUEUE_MAX
 *   entries, the transaction moves it, with its own entries, into one new pending marker and empties
 *   it (a HEAD stays small whatever the sequencer's pace; a busy chain writes a marker every few
 *   transactions, not one each);
 * - a **locator**, `TLOGQ#{first_seq}` with `leaf_index`: written by the sequencer (sequencer.ts) in
 *   the transaction that deletes the pending markers it covers; entry first_seq is leaf leaf_index, the
 *   others follow. The entry → leaf map (`alp audit prove`), what a restored installation rebuilds the
 *   tree from (rebuild.ts), and how far the chain is in the log (its last locator's last_seq): queue
 *   entries and pending markers at or below it are stale (left by a transaction that raced a round).
 * The queue and the pending markers exist exactly when their entries do (same transaction). The
 * sequencer lists flagged HEADs, not entries: no index entry per transaction, one per pending chain.
 *
 * commitAudited (audit/chain.ts) adds the queue and any pending marker to the transaction's own
 * operations, not as an audit sink: a sink may fall back to dropping what it adds, the log's record
 * must never be dropped; the marker's put is counted in AUDIT_RESERVED_OPS. Its key is new by
 * construction (first_seq follows the HEAD the transaction is conditioned on, or is the start of the
 * queue that HEAD holds), so the put needs no condition of its own.
 *
 * Installations of the first format (a pending marker per transaction at `TLOGQ#…` listed by GSI1
 * `TLOGQ#{s}`, marked in place) are converted once by backfill.ts.
 */
import { pad, SEQ_DIGITS } from '../../core/keys.ts';
import { shardOf } from '../../core/shard.ts';
import { type Item, type ItemKey, queryAll } from '../../store/item-store.ts';
import type { ServiceContext } from '../../system/context.ts';
import { chainOfHead, chainRef } from './chains.ts';

export const MARKER_SK_PREFIX = 'TLOGQ#';
export const MARKER_TYPE = 'tlog_marker';
/** The environment variable that turns markers off (a benchmark's reference run only). */
export const NO_MARKERS_ENV = 'ALP_TLOG_MARKERS';

/** A locator's sort key (and a first-format marker's). */
export const markerSk = (firstSeq: number) => `${MARKER_SK_PREFIX}${pad(firstSeq, SEQ_DIGITS)}`;
/** The locator of the run that starts at entry `firstSeq`. */
export const markerKey = (chainId: string, firstSeq: number): ItemKey => ({ PK: chainRef(chainId).pk, SK: markerSk(firstSeq) });

export const PENDING_SK_PREFIX = 'HEAD#Q#';
const MAX_SEQ = 10 ** SEQ_DIGITS - 1;
/** A pending marker's sort key: right after `HEAD`, newest first. */
export const pendingSk = (firstSeq: number) => `${PENDING_SK_PREFIX}${pad(MAX_SEQ - firstSeq, SEQ_DIGITS)}`;
export const pendingKey = (chainId: string, firstSeq: number): ItemKey => ({ PK: chainRef(chainId).pk, SK: pendingSk(firstSeq) });
/** The GSI1 partition of shard `s` where HEADs with pending markers are listed. */
export const pendingHeadsGsiPk = (s: number) => `TLOGH#${s}`;
/** The GSI1 keys of a chain's head with entries waiting for the log (what every audit transaction sets). */
export function pendingHeadKeys(chainId: string, shards: number): { GSI1PK: string; GSI1SK: string } {
  return { GSI1PK: pendingHeadsGsiPk(shardOf(chainId, shards)), GSI1SK: chainId };
}

export interface Marker extends Item {
  type: typeof MARKER_TYPE;
  /** The chain: an artifact id, or an installation log's partition (chains.ts). */
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

/** The most entries a HEAD's queue holds; more go to a pending marker (a HEAD row stays under ~1 KB). */
export const HEAD_QUEUE_MAX = 6;

/** A HEAD's queue: the hashes of entries `first` … `first + hashes.length − 1` (empty: first 0). */
export interface HeadQueue {
  first: number;
  hashes: string[];
}

export function headQueue(head: Item | undefined): HeadQueue {
  const first = head?.tlog_q_first;
  const hashes = head?.tlog_q;
  if (typeof first !== 'number' || !Array.isArray(hashes)) return { first: 0, hashes: [] };
  return { first, hashes: hashes as string[] };
}

/**
 * What one transaction adds to a chain's log record: the HEAD's new queue (attributes to set, with
 * the pending flag) and, when the queue would pass HEAD_QUEUE_MAX, the pending marker it moves to.
 * `base` is the HEAD the transaction is conditioned on (undefined for a new chain), `firstSeq` and
 * `hashes` its own entries. A queue that does not end at base's audit_seq (entries written with the
 * log off) is moved to its own marker first: its entries are not lost, the gap is named by audit verify.
 */
export function queueAppend(
  chainId: string,
  base: object | undefined,
  firstSeq: number,
  hashes: string[],
  timestamp: string,
  shards: number,
): { set: Record<string, unknown>; markers: Marker[] } {
  const q = headQueue(base as Item | undefined);
  const markers: Marker[] = [];
  let queue = q;
  if (q.hashes.length > 0 && q.first + q.hashes.length !== firstSeq) {
    markers.push(newMarker(chainId, q.first, q.hashes, timestamp));
    queue = { first: 0, hashes: [] };
  }
  const joined = queue.hashes.length > 0 ? { first: queue.first, hashes: [...queue.hashes, ...hashes] } : { first: firstSeq, hashes };
  const flag = pendingHeadKeys(chainId, shards);
  if (joined.hashes.length <= HEAD_QUEUE_MAX) return { set: { ...flag, tlog_q_first: joined.first, tlog_q: joined.hashes }, markers };
  markers.push(newMarker(chainId, joined.first, joined.hashes, timestamp));
  return { set: { ...flag, tlog_q_first: undefined, tlog_q: undefined }, markers };
}

/** A pending marker: entries first_seq … first_seq + hashes.length − 1 of one chain. */
export function newMarker(chainId: string, firstSeq: number, hashes: string[], timestamp: string): Marker {
  return {
    ...pendingKey(chainId, firstSeq),
    type: MARKER_TYPE,
    artifact_id: chainId,
    first_seq: firstSeq,
    last_seq: firstSeq + hashes.length - 1,
    hashes,
    timestamp,
  };
}

/** A chain's pending markers, oldest first (strongly consistent). */
export async function pendingMarkersOf(ctx: Pick<ServiceContext, 'items'>, chainId: string): Promise<Marker[]> {
  const items = await queryAll(ctx.items, { pk: chainRef(chainId).pk, sk: { beginsWith: PENDING_SK_PREFIX }, consistent: true });
  return items.filter(isMarker).sort((a, b) => a.first_seq - b.first_seq);
}

/** Every marker of one chain, locators and pending (strongly consistent). */
export async function markersOf(ctx: Pick<ServiceContext, 'items'>, chainId: string): Promise<Marker[]> {
  const locators = await queryAll(ctx.items, { pk: chainRef(chainId).pk, sk: { beginsWith: MARKER_SK_PREFIX }, consistent: true });
  return [...locators.filter(isMarker), ...(await pendingMarkersOf(ctx, chainId))];
}

/** Whether an item of a partition is a marker row of either kind (by its key). */
export const isMarkerRow = (i: Item) => i.SK.startsWith(MARKER_SK_PREFIX) || i.SK.startsWith(PENDING_SK_PREFIX);

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The order the first format's rounds took pending markers in (commit timestamp, artifact, first seq):
 * the rebuild of such an installation, restored with its last batch unmarked, takes them in this order.
 */
export function markerOrder(a: Marker, b: Marker): number {
  return cmp(a.timestamp, b.timestamp) || cmp(a.artifact_id, b.artifact_id) || a.first_seq - b.first_seq;
}

/** Whether markers are written (on unless ALP_TLOG_MARKERS=off: a benchmark's reference run). */
export function markersEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[NO_MARKERS_ENV] !== 'off';
}

/**
 * What `alp audit verify` finds wrong with a chain's log record (`live`: the partition's other items,
 * `head` its HEAD): a malformed marker, a marker or queue entry whose hash is not the chain's, locators
 * that overlap, an entry after the first recorded one that neither a locator nor a pending record (a
 * pending marker or the HEAD queue) holds (an entry not written by an audit transaction), and entries
 * beyond the last locator under a HEAD that is not flagged (the sequencer would never find them).
 * Pending records at or below the last locator are stale (a transaction raced a round): not a problem.
 * Entries before the first record predate the log (the first round's backfill, backfill.ts, covers them).
 */
export function markerProblems(entries: readonly Item[], live: readonly Item[], head?: Item): Array<{ row: string; problem: string }> {
  const out: Array<{ row: string; problem: string }> = [];
  const hashOf = new Map(entries.map((e) => [e.seq as number, e.hash]));
  const located = new Set<number>();
  const pending = new Set<number>();
  let first = Number.POSITIVE_INFINITY;
  const record = (row: string, firstSeq: number, hashes: readonly string[], into: Set<number> | undefined) => {
    first = Math.min(first, firstSeq);
    hashes.forEach((h, i) => {
      const seq = firstSeq + i;
      if (into === located && located.has(seq)) out.push({ row, problem: `entry ${seq} is covered by two transparency-log locators` });
      into?.add(seq);
      if (hashOf.get(seq) !== h)
        out.push({ row, problem: `the log records entry ${seq} with another hash than the chain's (the entry or the record was edited)` });
    });
  };
  for (const item of live.filter(isMarkerRow)) {
    const row = `${item.PK} ${item.SK}`;
    const isPending = item.SK.startsWith(PENDING_SK_PREFIX);
    if (
      !isMarker(item) ||
      item.SK !== (isPending ? pendingSk(item.first_seq) : markerSk(item.first_seq)) ||
      (isPending && item.leaf_index !== undefined) ||
      item.PK !== chainRef(item.artifact_id).pk ||
      item.last_seq !== item.first_seq + item.hashes.length - 1
    ) {
      out.push({ row, problem: 'malformed transparency-log marker (the row was edited)' });
      continue;
    }
    if (item.leaf_index !== undefined && !(Number.isSafeInteger(item.leaf_index) && item.leaf_index >= 0))
      out.push({ row, problem: 'malformed leaf_index (the row was edited)' });
    // A first-format marker not yet marked is pending too (backfill.ts converts it).
    record(row, item.first_seq, item.hashes, item.leaf_index !== undefined ? located : pending);
  }
  const q = headQueue(head);
  if (head && q.hashes.length > 0) record(`${head.PK} ${head.SK}`, q.first, q.hashes, pending);
  const upTo = Math.max(0, ...located);
  for (const e of entries) {
    const seq = e.seq as number;
    if (seq > first && !located.has(seq) && !pending.has(seq))
      out.push({ row: `${e.PK} ${e.SK}`, problem: `entry ${seq} has no transparency-log record (not written by an audit transaction)` });
  }
  const waiting = entries.some((e) => (e.seq as number) > upTo && pending.has(e.seq as number));
  const chainId = head ? chainOfHead(head)?.ref.id : undefined;
  if (head && waiting && !(typeof head.GSI1PK === 'string' && head.GSI1PK.startsWith('TLOGH#') && head.GSI1SK === chainId))
    out.push({
      row: `${head.PK} ${head.SK}`,
      problem: 'entries wait for the transparency log but the HEAD is not flagged pending (the sequencer will not find them)',
    });
  return out;
}
