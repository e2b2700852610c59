/**
 * History compaction (`alp history compact --before DATE`): packs the audit entries of each chain that
 * are older than both DATE and the 90-day hot window into immutable, digest-addressed segments:
 * `history/segments/{artifact_id}/{sha256 hex}.jsonl.gz` (JSON Lines of the full items, gzip), each
 * recorded by a `history_segment` item ART#{id} / SEG#{first_seq:10}. Seed 004's retention figures
 * (history 90 days hot, archival through one year, ...) are minimums: compaction never packs inside the
 * hot window and nothing here (or anywhere in ALP) deletes history, segments, logs or backups on a timer.
 *
 * Order, so that a crash at any point loses nothing:
 *   1. write the segment object (content store, digest checked on write);
 *   2. read it back through the content store (digest verified), gunzip, and compare every line with
 *      the hot item it replaces, re-read from the table;
 *   3. commit the segment item (fence-checked);
 *   4. only then remove the packed entries that no rule reads from the hot set, in transactions of at
 *      most 99 deletes, each conditioned on the item's hash.
 * A crash between 3 and 4 leaves entries both hot and packed: loadChain de-duplicates them by seq and
 * the next compaction finishes the removal after comparing the two copies again. A crash before 3
 * leaves an unnamed segment object and nothing else; the next run writes the same bytes again.
 *
 * Packed entries stay hot as well when something reads them directly: executions and compensations
 * (live views), provenance steps (the provenance document is regenerated from them) and approvals
 * (quorum counting and approval listings). Transitions, execution outputs and execution finishes (read
 * only through loadChain) leave the hot set. GSI1 listings (`alp query transitions`) cover the hot set.
 */
import { gzipSync } from 'node:zlib';
import { canonicalJson } from '../core/canonical-json.ts';
import { DAY_MS } from '../core/clock.ts';
import { digestHex, sha256 } from '../core/digest.ts';
import { ConditionFailed, Conflict, IntegrityError, InvalidInput, MaintenanceInProgress } from '../core/errors.ts';
import { segmentSk } from '../core/keys.ts';
import { historySegmentKey } from '../core/object-keys.ts';
import { cond, type Item, MAX_TRANSACT_OPS, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertNotFenced, fenceCheck } from '../system/fence.ts';
import { allHeads, auditHash } from './chain.ts';
import { isSegmentItem, loadChain, readSegmentObject, SEGMENT_TYPE, type SegmentItem, segmentLines } from './history.ts';

/** History stays hot (unpacked) for at least this long (seed 004: 90 days hot). */
export const HOT_HISTORY_MS = 90 * DAY_MS;
export const SEGMENT_MAX_ENTRIES = 2000;
/** A segment's JSON Lines stay under this many bytes (readers refuse more than twice it: history.ts). */
export const SEGMENT_MAX_RAW_BYTES = 32 * 1024 * 1024;

export interface CompactOptions {
  /** Pack entries recorded before this instant; it must lie at least HOT_HISTORY_MS in the past. */
  before: Date | string;
  /** Only this artifact (default: every artifact, found by scanning the base table). */
  artifactId?: string;
  /** Report what would be packed; write nothing. */
  dryRun?: boolean;
}

export interface SegmentWritten {
  artifact_id: string;
  key: string;
  digest: string;
  first_seq: number;
  last_seq: number;
  entries: number;
  size: number;
}

export interface CompactionReport {
  before: string;
  dry_run: boolean;
  artifacts: number;
  segments: SegmentWritten[];
  entries_packed: number;
  /** Hot items removed after their segment was verified (including those of interrupted runs). */
  items_removed: number;
  /** Packed entries a rule still reads, kept hot too. */
  items_kept_hot: number;
  skipped: Array<{ artifact_id: string; reason: string }>;
}

/** Whether a packed entry may leave the hot set: no rule reads it other than through loadChain. */
export function leavesHotSet(item: Item): boolean {
  switch (item.type) {
    case 'transition':
    case 'execution_output':
    case 'execution_finish':
      return true;
    default:
      return false;
  }
}

export function parseBefore(before: Date | string): Date {
  const at = before instanceof Date ? before : new Date(/^\d{4}-\d{2}-\d{2}$/.test(before) ? `${before}T00:00:00.000Z` : before);
  if (Number.isNaN(at.getTime()))
    throw new InvalidInput(`--before must be a date (YYYY-MM-DD) or an ISO-8601 time, got ${JSON.stringify(String(before))}`);
  return at;
}

export async function compactHistory(ctx: ServiceContext, opts: CompactOptions): Promise<CompactionReport> {
  const before = parseBefore(opts.before);
  const now = ctx.clock.now();
  const latest = new Date(now.getTime() - HOT_HISTORY_MS);
  if (before.getTime() > latest.getTime())
    throw new InvalidInput(
      `history stays hot for 90 days: --before must be ${latest.toISOString()} or earlier (got ${before.toISOString()})`,
      { before: before.toISOString(), latest: latest.toISOString() },
    );
  const report: CompactionReport = {
    before: before.toISOString(),
    dry_run: opts.dryRun === true,
    artifacts: 0,
    segments: [],
    entries_packed: 0,
    items_removed: 0,
    items_kept_hot: 0,
    skipped: [],
  };
  if (!report.dry_run) await assertNotFenced(ctx);
  const ids: string[] = [];
  if (opts.artifactId) ids.push(opts.artifactId);
  else for await (const h of allHeads(ctx)) ids.push(h.artifact_id);
  for (const id of ids) {
    report.artifacts++;
    await compactArtifact(ctx, id, before, now, report);
  }
  return report;
}

async function compactArtifact(ctx: ServiceContext, artifactId: string, before: Date, now: Date, report: CompactionReport): Promise<void> {
  const chain = await loadChain(ctx, artifactId);
  if (!chain.head) {
    report.skipped.push({ artifact_id: artifactId, reason: 'no HEAD item' });
    return;
  }
  if (chain.conflicts.length > 0) {
    report.skipped.push({
      artifact_id: artifactId,
      reason: `entry ${chain.conflicts[0]?.seq} differs from its packed copy: run alp audit verify`,
    });
    return;
  }
  const hotBySeq = new Map<number, Item>();
  for (const i of chain.live) if (i.seq !== undefined && !isSegmentItem(i) && i.hash !== undefined) hotBySeq.set(i.seq as number, i);
  let packedMax = 0;
  for (const s of chain.segments) packedMax = Math.max(packedMax, s.item.last_seq);

  // Finish interrupted runs: packed entries still hot that may leave, after comparing both copies.
  const leftovers: Item[] = [];
  for (const s of chain.segments) {
    for (const packed of s.entries) {
      const hot = hotBySeq.get(packed.seq as number);
      if (hot && leavesHotSet(hot)) {
        if (canonicalJson(hot) !== canonicalJson(packed)) {
          report.skipped.push({ artifact_id: artifactId, reason: `hot entry ${String(hot.seq)} differs from its packed copy` });
          return;
        }
        leftovers.push(hot);
      }
    }
  }
  if (!report.dry_run) report.items_removed += await removeHot(ctx, leftovers);

  // The prefix of the unpacked chain recorded before the cut-off, checked before it is packed.
  const candidates: Item[] = [];
  let prevHash = chain.entries.find((e) => e.seq === packedMax)?.hash ?? null;
  for (const e of chain.entries) {
    if ((e.seq as number) <= packedMax) continue;
    if (Date.parse(e.timestamp as string) >= before.getTime()) break;
    if (e.seq !== packedMax + candidates.length + 1 || auditHash(e) !== e.hash || (e.prev_hash ?? null) !== prevHash) {
      report.skipped.push({ artifact_id: artifactId, reason: `the chain is broken at entry ${String(e.seq)}: run alp audit verify` });
      return;
    }
    prevHash = e.hash as string;
    candidates.push(e);
  }
  for (const part of segmentParts(candidates)) {
    const kept = part.filter((e) => !leavesHotSet(e)).length;
    report.entries_packed += part.length;
    report.items_kept_hot += kept;
    if (report.dry_run) continue;
    const written = await packSegment(ctx, artifactId, part, before, now);
    report.segments.push(written);
    report.items_removed += await removeHot(
      ctx,
      part.filter((e) => leavesHotSet(e)),
    );
  }
}

/** Cuts the entries to pack into segments of at most SEGMENT_MAX_ENTRIES entries and SEGMENT_MAX_RAW_BYTES. */
export function segmentParts(entries: Item[]): Item[][] {
  const parts: Item[][] = [];
  let part: Item[] = [];
  let bytes = 0;
  for (const e of entries) {
    const size = Buffer.byteLength(canonicalJson(e)) + 1;
    if (part.length > 0 && (part.length >= SEGMENT_MAX_ENTRIES || bytes + size > SEGMENT_MAX_RAW_BYTES)) {
      parts.push(part);
      part = [];
      bytes = 0;
    }
    part.push(e);
    bytes += size;
  }
  if (part.length > 0) parts.push(part);
  return parts;
}

/** Steps 1–3: write, read back and compare, then record the segment. */
async function packSegment(ctx: ServiceContext, artifactId: string, part: Item[], before: Date, now: Date): Promise<SegmentWritten> {
  const raw = segmentLines(part);
  const gz = gzipSync(raw, { level: 9 });
  const digest = sha256(gz);
  const key = historySegmentKey(artifactId, digestHex(digest));
  // The key is named by the digest: bytes there that do not hash to it are damage, replaced (repair).
  const put = await ctx.content.put(key, [gz], { expectedDigest: digest, repair: true });
  // Verification before anything leaves the hot set: the stored object, read back through the
  // content store, holds exactly the items it replaces as the table holds them now.
  const back = await readSegmentObject(ctx, key, digest, put.size, raw.length);
  const current = await ctx.items.batchGet(part.map((e) => ({ PK: e.PK, SK: e.SK })));
  if (back.length !== part.length || current.length !== part.length)
    throw new IntegrityError(
      `segment ${key} holds ${back.length} entries, the hot set ${current.length}, expected ${part.length}; nothing removed`,
    );
  for (let i = 0; i < part.length; i++) {
    const want = canonicalJson(part[i]);
    if (canonicalJson(back[i]) !== want || canonicalJson(current[i]) !== want)
      throw new IntegrityError(`segment ${key} line ${i + 1} differs from ${part[i]?.SK}; nothing removed`);
  }
  const first = part[0] as Item;
  const last = part[part.length - 1] as Item;
  const seg: SegmentItem = {
    PK: first.PK,
    SK: segmentSk(first.seq as number),
    type: SEGMENT_TYPE,
    artifact_id: artifactId,
    first_seq: first.seq as number,
    last_seq: last.seq as number,
    entries: part.length,
    key,
    digest,
    size: put.size,
    raw_bytes: raw.length,
    first_prev_hash: (first.prev_hash as string | null | undefined) ?? null,
    last_hash: last.hash as string,
    before: before.toISOString(),
    created_at: now.toISOString(),
  };
  await fenced(ctx, [{ op: 'put', item: seg, condition: cond.notExists() }]);
  return { artifact_id: artifactId, key, digest, first_seq: seg.first_seq, last_seq: seg.last_seq, entries: seg.entries, size: seg.size };
}

/** Step 4: removes packed entries from the hot set, each only if it is still exactly what was packed. */
async function removeHot(ctx: ServiceContext, items: Item[]): Promise<number> {
  const per = MAX_TRANSACT_OPS - 1;
  for (let i = 0; i < items.length; i += per) {
    const ops: TransactOp[] = items
      .slice(i, i + per)
      .map((e) => ({ op: 'delete', key: { PK: e.PK, SK: e.SK }, condition: cond.eq('hash', e.hash as string) }));
    await fenced(ctx, ops);
  }
  return items.length;
}

/** A transaction that also checks the maintenance fence (compaction is a writer like any other). */
async function fenced(ctx: ServiceContext, ops: TransactOp[]): Promise<void> {
  try {
    await ctx.items.transactWrite([...ops, fenceCheck(ctx)]);
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    if (e.failedIndex === ops.length) throw new MaintenanceInProgress();
    throw new Conflict(
      'history changed while it was being compacted (a segment was recorded or an entry changed concurrently); run it again',
      {
        failedIndex: e.failedIndex,
      },
    );
  }
}
