/**
 * The token log (issue 19 B8): every token creation, revocation and rotation, hash-chained like an
 * artifact's audit chain (canonical JSON and sha256 as docs/audit-format.md §1; layout in
 * docs/data-model.md "Tokens"), in the token index partition:
 *
 *   TOKENS / LOG#{seq:10}  type `token_event`: `seq` (1, 2, …), `timestamp`, `action` (created,
 *                          revoked, rotated), `token_id`, `principal_id`, `kind`, `by` {id, kind}, and
 *                          as given `label`, `expires_at`, `replaces` / `replaced_by` (a rotation's other
 *                          token id), `reason`; `prev_hash` (null at seq 1), `hash` = sha256 of the
 *                          canonical JSON of the item without `hash`.
 *   TOKENS / LOG_HEAD      type `token_log_head`: `seq` and `head_hash` of the last entry.
 *
 * A change commits in one transaction: its own writes, its entries, the head (conditioned on the seq it
 * read, so concurrent administrators serialise; retried on a moved head) and the maintenance-fence
 * check. Installation-level changes do not enter the telemetry outbox through the audit sinks: the
 * outbox's append counter (counter.ts) counts artifact chain entries, and `alp audit verify` checks
 * this log on its own (verifyTokenLog, from verify-all.ts). Never holds a secret or its hash.
 */
import { canonicalDigest } from '../core/canonical-json.ts';
import type { Digest } from '../core/digest.ts';
import { ConditionFailed, Conflict, MaintenanceInProgress } from '../core/errors.ts';
import { TOKEN_LOG_HEAD_SK, TOKEN_LOG_SK_PREFIX, TOKENS_PK, tokenLogSk } from '../core/keys.ts';
import { cond, type Item, MAX_PAGE_LIMIT, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { fenceCheck } from '../system/fence.ts';
import type { ChainFinding, ChainReport } from './verify.ts';

export const TOKEN_ACTIONS = ['created', 'revoked', 'rotated'] as const;
export type TokenAction = (typeof TOKEN_ACTIONS)[number];

/** The report name of the token log among the chains `alp audit verify` lists. */
export const TOKEN_LOG_ID = 'token-log';

export interface TokenEventDraft {
  action: TokenAction;
  token_id: string;
  principal_id: string;
  kind: string;
  by: { id: string; kind: string };
  label?: string | undefined;
  expires_at?: string | undefined;
  replaces?: string | undefined;
  replaced_by?: string | undefined;
  reason?: string | undefined;
}

export type TokenEvent = TokenEventDraft & { seq: number; timestamp: string; prev_hash: Digest | null; hash: Digest };

const HEAD_KEY = { PK: TOKENS_PK, SK: TOKEN_LOG_HEAD_SK };
const MAX_HEAD_RETRIES = 10;

function withoutUndefined(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

function entryItems(drafts: TokenEventDraft[], seq0: number, prev0: Digest | null, timestamp: string): Item[] {
  let prev = prev0;
  return drafts.map((d, i) => {
    const seq = seq0 + i + 1;
    const item: Item = {
      PK: TOKENS_PK,
      SK: tokenLogSk(seq),
      type: 'token_event',
      seq,
      timestamp,
      ...withoutUndefined({ ...d }),
      prev_hash: prev,
    };
    item.hash = canonicalDigest(item);
    prev = item.hash as Digest;
    return item;
  });
}

/**
 * Commits `ops` with the log entries of `events`, the head update and the fence check (`fenceKey`
 * picks the fence shard). MAINTENANCE when the fence is held; a failed condition of `ops[i]` is
 * rethrown as it came (failedIndex i) for the caller to name. Returns the entries written.
 */
export async function commitTokenChange(
  ctx: ServiceContext,
  ops: TransactOp[],
  events: TokenEventDraft[],
  fenceKey: string,
): Promise<TokenEvent[]> {
  for (let attempt = 0; ; attempt++) {
    const head = await ctx.items.get(HEAD_KEY, { consistent: true });
    const seq0 = typeof head?.seq === 'number' ? head.seq : 0;
    const entries = entryItems(events, seq0, (head?.head_hash as Digest | undefined) ?? null, ctx.clock.now().toISOString());
    const last = entries[entries.length - 1] as Item;
    const headOp: TransactOp = head
      ? { op: 'update', key: HEAD_KEY, update: { set: { seq: last.seq, head_hash: last.hash } }, condition: cond.eq('seq', seq0) }
      : { op: 'put', item: { ...HEAD_KEY, type: 'token_log_head', seq: last.seq, head_hash: last.hash }, condition: cond.notExists() };
    const all: TransactOp[] = [
      ...ops,
      ...entries.map((item): TransactOp => ({ op: 'put', item, condition: cond.notExists() })),
      headOp,
      fenceCheck(ctx, { kind: 'installation', key: fenceKey }),
    ];
    try {
      await ctx.items.transactWrite(all);
      return entries as unknown as TokenEvent[];
    } catch (e) {
      if (!(e instanceof ConditionFailed) || e.failedIndex === undefined || e.failedIndex < ops.length) throw e;
      if (e.failedIndex === all.length - 1) throw new MaintenanceInProgress();
      if (attempt < MAX_HEAD_RETRIES) continue;
      throw new Conflict('the token log is busy: too many concurrent token changes, retry');
    }
  }
}

/** The log's entries, oldest first, a page at a time. */
export async function* readTokenLog(ctx: Pick<ServiceContext, 'items'>, pageSize = MAX_PAGE_LIMIT): AsyncGenerator<TokenEvent> {
  let cursor: string | undefined;
  do {
    const page = await ctx.items.query({
      pk: TOKENS_PK,
      sk: { beginsWith: TOKEN_LOG_SK_PREFIX },
      limit: pageSize,
      consistent: true,
      ...(cursor ? { cursor } : {}),
    });
    for (const item of page.items) yield item as unknown as TokenEvent;
    cursor = page.cursor;
  } while (cursor);
}

/** Recomputes every entry's hash, the links and the head (as verifyArtifactAudit does for a chain). */
export async function verifyTokenLog(ctx: Pick<ServiceContext, 'items'>): Promise<ChainReport> {
  const findings: ChainFinding[] = [];
  const add = (row: string, problem: string) => findings.push({ artifact_id: TOKEN_LOG_ID, row, problem });
  let expected = 1;
  let prev: Digest | null = null;
  for await (const e of readTokenLog(ctx)) {
    const row = `${TOKENS_PK} ${tokenLogSk(e.seq)}`;
    const { hash, ...rest } = e as unknown as Item;
    if (e.seq !== expected) add(row, `entry ${e.seq} where ${expected} was expected (a gap or a moved entry)`);
    if (canonicalDigest(rest) !== hash) add(row, `entry ${e.seq}: its hash does not match its content (edited)`);
    if (e.prev_hash !== prev) add(row, `entry ${e.seq}: prev_hash does not link to the previous entry`);
    prev = hash as Digest;
    expected = e.seq + 1;
  }
  const head = await ctx.items.get(HEAD_KEY, { consistent: true });
  const headSeq = typeof head?.seq === 'number' ? head.seq : 0;
  if (headSeq !== expected - 1 || (head?.head_hash ?? null) !== prev)
    add(`${TOKENS_PK} ${TOKEN_LOG_HEAD_SK}`, `the head says seq ${headSeq}, the log ends at ${expected - 1} (truncated or edited)`);
  return { artifact_id: TOKEN_LOG_ID, entries: expected - 1, ok: findings.length === 0, findings };
}
