/**
 * The approval policy log (issue 20 item 4): every change of the installation approval policy
 * (lifecycle/approval-policy.ts), with the policy before and after, hash-chained like the token and
 * webhook logs (chained-log.ts; layout in docs/data-model.md):
 *
 *   APPROVAL_POLICY / LOG#{seq:10}  type `approval_policy_event`: `seq`, `timestamp`, `version` (the
 *                                   policy version it made, = seq), `before` and `after` (the whole
 *                                   policy documents), `before_hash`, `after_hash`, `by` {id, kind},
 *                                   `reason`?; `prev_hash`, `hash`.
 *   APPROVAL_POLICY / LOG_HEAD      type `approval_policy_log_head`: `seq` and `head_hash`.
 *
 * The change and its entry commit in one transaction (commitLogged: fenced, head-conditioned).
 * `alp audit verify` checks it beside the token and webhook logs (verify-all.ts).
 */
import type { Digest } from '../core/digest.ts';
import { APPROVAL_POLICY_LOG_HEAD_SK, APPROVAL_POLICY_LOG_SK_PREFIX, APPROVAL_POLICY_PK, approvalPolicyLogSk } from '../core/keys.ts';
import type { TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { type ChainedLog, commitLogged, readLog, verifyLog } from './chained-log.ts';
import type { ChainReport } from './verify.ts';

/** The report name of the approval policy log among the chains `alp audit verify` lists. */
export const APPROVAL_POLICY_LOG_ID = 'approval-policy-log';

export interface ApprovalPolicyEventDraft {
  version: number;
  before: Record<string, unknown>;
  after: Record<string, unknown>;
  before_hash: Digest;
  after_hash: Digest;
  by: { id: string; kind: string };
  reason?: string | undefined;
}

export type ApprovalPolicyLogEvent = ApprovalPolicyEventDraft & { seq: number; timestamp: string; prev_hash: Digest | null; hash: Digest };

const APPROVAL_POLICY_LOG: ChainedLog = {
  id: APPROVAL_POLICY_LOG_ID,
  pk: APPROVAL_POLICY_PK,
  entryPrefix: APPROVAL_POLICY_LOG_SK_PREFIX,
  entrySk: approvalPolicyLogSk,
  headSk: APPROVAL_POLICY_LOG_HEAD_SK,
  entryType: 'approval_policy_event',
  headType: 'approval_policy_log_head',
};

/** Commits `ops` with the entry of `event` (fenced, head-conditioned; a failed `ops[i]` condition is rethrown). */
export async function commitApprovalPolicyChange(
  ctx: ServiceContext,
  ops: TransactOp[],
  event: ApprovalPolicyEventDraft,
): Promise<ApprovalPolicyLogEvent> {
  const [entry] = await commitLogged(ctx, APPROVAL_POLICY_LOG, ops, [event as unknown as Record<string, unknown>], 'approval-policy');
  return entry as unknown as ApprovalPolicyLogEvent;
}

export async function* readApprovalPolicyLog(ctx: Pick<ServiceContext, 'items'>): AsyncGenerator<ApprovalPolicyLogEvent> {
  for await (const e of readLog(ctx, APPROVAL_POLICY_LOG)) yield e as unknown as ApprovalPolicyLogEvent;
}

export function verifyApprovalPolicyLog(ctx: Pick<ServiceContext, 'items'>): Promise<ChainReport> {
  return verifyLog(ctx, APPROVAL_POLICY_LOG);
}
