/**
 * An installation-level change log, hash-chained like an artifact's audit chain (canonical JSON and
 * sha256 as docs/audit-format.md §1): the token log (token-log.ts) and the webhook endpoint log
 * (webhook-log.ts) are two instances. In the log's partition:
 *
 *   {pk} / {entry sk of seq}  type `{entryType}`: `seq` (1, 2, …), `timestamp`, the draft's fields,
 *                             `prev_hash` (null at seq 1), `hash` = sha256 of the canonical JSON of the
 *                             item without `hash`.
 *   {pk} / {headSk}           type `{headType}`: `seq` and `head_hash` of the last entry.
 *
 * A change commits in one transaction: its own writes, its entries, the head (conditioned on the seq it
 * read, so concurrent writers serialise; retried on a moved head) and the maintenance-fence check. The
 * entries are leaves of the transparency log like an artifact chain's (chain id = the log's partition,
 * tlog/chains.ts): their hashes are queued on the head, which is flagged pending, or moved with the
 * queue into a pending marker when it is full (tlog/markers.ts queueAppend).
 */
import { canonicalDigest } from '../core/canonical-json.ts';
import type { Digest } from '../core/digest.ts';
import { ConditionFailed, Conflict, InternalError, MaintenanceInProgress } from '../core/errors.ts';
import { cond, type Item, MAX_PAGE_LIMIT, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { fenceCheck } from '../system/fence.ts';
import { chainRef } from './tlog/chains.ts';
import { markerProblems, markersOf, queueAppend } from './tlog/markers.ts';
import type { ChainFinding, ChainReport } from './verify.ts';

export interface ChainedLog {
  /** The name `alp audit verify` reports it under, and errors use. */
  id: string;
  pk: string;
  entryPrefix: string;
  entrySk(seq: number): string;
  headSk: string;
  entryType: string;
  headType: string;
}

export type LogDraft = Record<string, unknown>;
export type LogEntry = { seq: number; timestamp: string; prev_hash: Digest | null; hash: Digest } & Record<string, unknown>;

const MAX_HEAD_RETRIES = 10;

function withoutUndefined(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

function headKey(log: ChainedLog) {
  return { PK: log.pk, SK: log.headSk };
}

function entryItems(log: ChainedLog, drafts: LogDraft[], seq0: number, prev0: Digest | null, timestamp: string): Item[] {
  let prev = prev0;
  return drafts.map((d, i) => {
    const seq = seq0 + i + 1;
    const item: Item = { PK: log.pk, SK: log.entrySk(seq), type: log.entryType, seq, timestamp, ...withoutUndefined(d), prev_hash: prev };
    item.hash = canonicalDigest(item);
    prev = item.hash as Digest;
    return item;
  });
}

/**
 * Commits `ops` with the log entries of `drafts`, the head update and the fence check (`fenceKey`
 * picks the fence shard). MAINTENANCE when the fence is held; a failed condition of `ops[i]` is
 * rethrown as it came (failedIndex i) for the caller to name. Returns the entries written.
 */
export async function commitLogged(
  ctx: ServiceContext,
  log: ChainedLog,
  ops: TransactOp[],
  drafts: LogDraft[],
  fenceKey: string,
): Promise<LogEntry[]> {
  const key = headKey(log);
  if (!chainRef(log.pk).installation) throw new InternalError(`the ${log.id} is not a chain of the transparency log (tlog/chains.ts)`);
  for (let attempt = 0; ; attempt++) {
    const head = await ctx.items.get(key, { consistent: true });
    const seq0 = typeof head?.seq === 'number' ? head.seq : 0;
    const entries = entryItems(log, drafts, seq0, (head?.head_hash as Digest | undefined) ?? null, ctx.clock.now().toISOString());
    const last = entries[entries.length - 1] as Item;
    const logged =
      ctx.tlogMarkers === false
        ? { set: {}, markers: [] }
        : queueAppend(
            log.pk,
            head,
            seq0 + 1,
            entries.map((e) => e.hash as string),
            last.timestamp as string,
            ctx.layout.telemetry_shards,
          );
    const set = { seq: last.seq, head_hash: last.hash, ...logged.set };
    const headOp: TransactOp = head
      ? { op: 'update', key, update: { set }, condition: cond.eq('seq', seq0) }
      : { op: 'put', item: { ...key, type: log.headType, ...set }, condition: cond.notExists() };
    const all: TransactOp[] = [
      ...ops,
      ...entries.map((item): TransactOp => ({ op: 'put', item, condition: cond.notExists() })),
      ...logged.markers.map((item): TransactOp => ({ op: 'put', item })),
      headOp,
      fenceCheck(ctx, { kind: 'installation', key: fenceKey }),
    ];
    try {
      await ctx.items.transactWrite(all);
      return entries as unknown as LogEntry[];
    } catch (e) {
      if (!(e instanceof ConditionFailed) || e.failedIndex === undefined || e.failedIndex < ops.length) throw e;
      if (e.failedIndex === all.length - 1) throw new MaintenanceInProgress();
      if (attempt < MAX_HEAD_RETRIES) continue;
      throw new Conflict(`the ${log.id} is busy: too many concurrent changes, retry`);
    }
  }
}

/** The log's entries, oldest first, a page at a time. */
export async function* readLog(ctx: Pick<ServiceContext, 'items'>, log: ChainedLog, pageSize = MAX_PAGE_LIMIT): AsyncGenerator<LogEntry> {
  let cursor: string | undefined;
  do {
    const page = await ctx.items.query({
      pk: log.pk,
      sk: { beginsWith: log.entryPrefix },
      limit: pageSize,
      consistent: true,
      ...(cursor ? { cursor } : {}),
    });
    for (const item of page.items) yield item as unknown as LogEntry;
    cursor = page.cursor;
  } while (cursor);
}

/** Recomputes every entry's hash, the links and the head (as verifyArtifactAudit does for a chain). */
export async function verifyLog(ctx: Pick<ServiceContext, 'items'>, log: ChainedLog): Promise<ChainReport> {
  const findings: ChainFinding[] = [];
  const add = (row: string, problem: string) => findings.push({ artifact_id: log.id, row, problem });
  let expected = 1;
  let prev: Digest | null = null;
  const entries: Item[] = [];
  for await (const e of readLog(ctx, log)) {
    entries.push(e as unknown as Item);
    const row = `${log.pk} ${log.entrySk(e.seq)}`;
    const { hash, ...rest } = e as unknown as Item;
    if (e.seq !== expected) add(row, `entry ${e.seq} where ${expected} was expected (a gap or a moved entry)`);
    if (canonicalDigest(rest) !== hash) add(row, `entry ${e.seq}: its hash does not match its content (edited)`);
    if (e.prev_hash !== prev) add(row, `entry ${e.seq}: prev_hash does not link to the previous entry`);
    prev = hash as Digest;
    expected = e.seq + 1;
  }
  const head = await ctx.items.get(headKey(log), { consistent: true });
  const headSeq = typeof head?.seq === 'number' ? head.seq : 0;
  if (headSeq !== expected - 1 || (head?.head_hash ?? null) !== prev)
    add(`${log.pk} ${log.headSk}`, `the head says seq ${headSeq}, the log ends at ${expected - 1} (truncated or edited)`);
  // Its record in the transparency log (queue, pending markers, locators) agrees with it.
  for (const p of markerProblems(entries, await markersOf(ctx, log.pk), head)) add(p.row, p.problem);
  return { artifact_id: log.id, entries: expected - 1, ok: findings.length === 0, findings };
}
