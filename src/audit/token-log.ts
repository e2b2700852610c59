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
 * check (chained-log.ts, shared with the webhook endpoint log). Installation-level changes do not enter the telemetry outbox through the audit sinks: the
 * outbox's append counter (counter.ts) counts artifact chain entries, and `alp audit verify` checks
 * this log on its own (verifyTokenLog, from verify-all.ts). Never holds a secret or its hash.
 */
import type { Digest } from '../core/digest.ts';
import { TOKEN_LOG_HEAD_SK, TOKEN_LOG_SK_PREFIX, TOKENS_PK, tokenLogSk } from '../core/keys.ts';
import { MAX_PAGE_LIMIT, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { type ChainedLog, commitLogged, readLog, verifyLog } from './chained-log.ts';
import type { ChainReport } from './verify.ts';

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

const TOKEN_LOG: ChainedLog = {
  id: TOKEN_LOG_ID,
  pk: TOKENS_PK,
  entryPrefix: TOKEN_LOG_SK_PREFIX,
  entrySk: tokenLogSk,
  headSk: TOKEN_LOG_HEAD_SK,
  entryType: 'token_event',
  headType: 'token_log_head',
};

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
  return (await commitLogged(
    ctx,
    TOKEN_LOG,
    ops,
    events as unknown as Array<Record<string, unknown>>,
    fenceKey,
  )) as unknown as TokenEvent[];
}

/** The log's entries, oldest first, a page at a time. */
export async function* readTokenLog(ctx: Pick<ServiceContext, 'items'>, pageSize = MAX_PAGE_LIMIT): AsyncGenerator<TokenEvent> {
  for await (const e of readLog(ctx, TOKEN_LOG, pageSize)) yield e as unknown as TokenEvent;
}

/** Recomputes every entry's hash, the links and the head (as verifyArtifactAudit does for a chain). */
export function verifyTokenLog(ctx: Pick<ServiceContext, 'items'>): Promise<ChainReport> {
  return verifyLog(ctx, TOKEN_LOG);
}
