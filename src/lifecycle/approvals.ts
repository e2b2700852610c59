/**
 * Human approvals and rejections. An approval binds the content hash the human saw, carries an
 * evidence reference and an expiry, and counts toward the artifact's quorum only when it binds the
 * version's current hash, is unexpired, belongs to the current proposal round and is the first of its
 * principal. Reaching the quorum moves the version to APPROVED in the same transaction; any rejection
 * moves it to REJECTED.
 */
import { afterOps, readBackOr, readHead, runAudited } from '../audit/chain.ts';
import { DAY_MS, isoTimestamp } from '../core/clock.ts';
import { type Digest, parseDigest } from '../core/digest.ts';
import { IllegalTransition, InvalidInput } from '../core/errors.ts';
import { approvalSk, approverGsiPk, artifactPk, eventGsiSk, indexShard } from '../core/keys.ts';
import { queryAll } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertActor } from './access.ts';
import { compensationOutcome } from './compensation-outcome.ts';
import type { HeadItem, Principal, VersionItem } from './model.ts';
import { merge, type Planned, planMove } from './moves.ts';
import { principalKey } from './principal-key.ts';
import { combineCountOps } from './state-counts.ts';
import { validateText, validateVersionNumber } from './validation.ts';
import { readVersion } from './versions.ts';

export const DEFAULT_APPROVAL_TTL_MS = 7 * DAY_MS;
export const MAX_APPROVAL_TTL_MS = 365 * DAY_MS;

export type Decision = 'APPROVE' | 'REJECT';

export interface DecisionInput {
  decision: Decision;
  evidenceRef: string;
  /** The digest the human reviewed; defaults to the version's current content hash. */
  contentHash?: string | undefined;
  expiresAt?: string | undefined;
  expiresInMs?: number | undefined;
  comment?: string | undefined;
}

export interface ApprovalRecord {
  PK: string;
  SK: string;
  type: 'approval';
  artifact_id: string;
  version: number;
  decision: Decision;
  actor: Principal;
  evidence_ref: string;
  content_hash: Digest;
  expires_at: string;
  round: number;
  counted: boolean;
  not_counted_reason?: string;
  comment?: string;
  timestamp: string;
  seq: number;
}

export async function listApprovals(ctx: ServiceContext, artifactId: string): Promise<ApprovalRecord[]> {
  return (await queryAll(ctx.items, {
    pk: artifactPk(artifactId),
    sk: { beginsWith: 'APPROVAL#' },
    consistent: true,
  })) as unknown as ApprovalRecord[];
}

/** Approvals that count now for this version: current round, current hash, unexpired, one per principal. */
export function countingApprovals(approvals: ApprovalRecord[], v: VersionItem, now: Date): ApprovalRecord[] {
  const byPrincipal = new Map<string, ApprovalRecord>();
  for (const a of approvals) {
    if (a.version !== v.version || a.decision !== 'APPROVE' || !a.counted || a.round !== v.proposal_round) continue;
    if (a.content_hash !== v.content_hash || new Date(a.expires_at).getTime() <= now.getTime()) continue;
    // Distinct humans, not distinct spellings: `Ops-Lead` and `ops-lead` are one approver.
    const who = principalKey(a.actor.id);
    if (!byPrincipal.has(who)) byPrincipal.set(who, a);
  }
  return [...byPrincipal.values()];
}

function expiryOf(input: DecisionInput, now: Date): string {
  if (input.expiresAt !== undefined && input.expiresInMs !== undefined)
    throw new InvalidInput('give expires_at or an expiry duration, not both');
  if (input.expiresAt !== undefined) {
    const at = new Date(input.expiresAt);
    if (Number.isNaN(at.getTime())) throw new InvalidInput('expires_at must be an ISO-8601 time');
    if (at.getTime() - now.getTime() > MAX_APPROVAL_TTL_MS) throw new InvalidInput('an approval may last at most 365 days');
    return at.toISOString();
  }
  const ttl = input.expiresInMs ?? DEFAULT_APPROVAL_TTL_MS;
  if (!Number.isInteger(ttl) || ttl <= 0 || ttl > MAX_APPROVAL_TTL_MS)
    throw new InvalidInput('the approval lifetime must be between 1 ms and 365 days');
  return new Date(now.getTime() + ttl).toISOString();
}

export interface DecisionResult {
  approval: ApprovalRecord;
  version: VersionItem;
}

export async function decide(
  ctx: ServiceContext,
  actor: Principal,
  artifactId: string,
  version: number,
  input: DecisionInput,
): Promise<DecisionResult> {
  assertActor('decide', actor);
  if (input.decision !== 'APPROVE' && input.decision !== 'REJECT') throw new InvalidInput('decision must be APPROVE or REJECT');
  const evidence = validateText('evidence_ref', input.evidenceRef, { min: 1, max: 2000 });
  const comment = input.comment === undefined ? undefined : validateText('comment', input.comment, { min: 0, max: 4000 });
  const bound = input.contentHash === undefined ? undefined : parseDigest(input.contentHash);
  const n = validateVersionNumber(version);
  const ids = [artifactId];
  const first = await readHead(ctx, artifactId);
  if (first.compensates) ids.push(first.compensates.artifact_id);
  let committed: VersionItem | undefined;
  const result = await runAudited(ctx, ids, async (heads) => {
    const head = heads[artifactId] as HeadItem;
    const v = await readVersion(ctx.items, artifactId, n);
    committed = v;
    if (v.state !== 'PROPOSED') {
      throw new IllegalTransition(`version ${n} is ${v.state}; only PROPOSED versions take approvals`, { state: v.state });
    }
    const now = ctx.clock.now();
    const at = isoTimestamp(now);
    const expiresAt = expiryOf(input, now);
    const contentHash = bound ?? v.content_hash;
    let counted = true;
    let reason: string | undefined;
    if (input.decision === 'APPROVE') {
      const current = countingApprovals(await listApprovals(ctx, artifactId), v, now);
      if (contentHash !== v.content_hash) [counted, reason] = [false, `binds ${contentHash}, not the version's content ${v.content_hash}`];
      else if (new Date(expiresAt).getTime() <= now.getTime()) [counted, reason] = [false, 'expired when given'];
      else if (current.some((a) => principalKey(a.actor.id) === principalKey(actor.id)))
        [counted, reason] = [false, `${actor.id} already approved this proposal`];
      const quorumReached = counted && current.length + 1 >= head.quorum;
      const entry = approvalEntry(ctx, artifactId, {
        version: n,
        decision: 'APPROVE',
        actor,
        evidence_ref: evidence,
        content_hash: contentHash,
        expires_at: expiresAt,
        round: v.proposal_round,
        counted,
        ...(reason ? { not_counted_reason: reason } : {}),
        ...(comment ? { comment } : {}),
      });
      const parts: Planned[] = [{ ops: [], entries: [entry] }];
      if (quorumReached) parts.push(planMove(head, v, 'APPROVED', 'approval', actor, at, { reason: `quorum of ${head.quorum} reached` }));
      const plan = merge(...parts);
      committed = afterOps(v, plan.ops);
      return { chains: [{ artifactId, entries: plan.entries }], ops: plan.ops };
    }
    const entry = approvalEntry(ctx, artifactId, {
      version: n,
      decision: 'REJECT',
      actor,
      evidence_ref: evidence,
      content_hash: contentHash,
      expires_at: expiresAt,
      round: v.proposal_round,
      counted: true,
      ...(comment ? { comment } : {}),
    });
    const plan = merge({ ops: [], entries: [entry] }, planMove(head, v, 'REJECTED', 'rejection', actor, at, { reason: 'rejected' }));
    const chains = [{ artifactId, entries: plan.entries }];
    let ops = plan.ops;
    committed = afterOps(v, plan.ops);
    // A rejected compensation returns the compensated version to the state it was in.
    if (head.compensates) {
      const back = await compensationOutcome(ctx, heads, head, 'FAILED', actor, at);
      chains.push(back.chain);
      ops = combineCountOps([...ops, ...back.ops]);
    }
    return { chains, ops };
  });
  const approval = result.items.find((i) => i.type === 'approval') as unknown as ApprovalRecord;
  return {
    approval,
    version: await readBackOr(
      () => readVersion(ctx.items, artifactId, n),
      () => committed as VersionItem,
    ),
  };
}

/** An Approval entry, in APPROVER#{actor} of the artifact's index shard. */
function approvalEntry(ctx: ServiceContext, artifactId: string, fields: Record<string, unknown> & { actor: Principal }) {
  const shard = indexShard(artifactId, ctx.layout.index_shards);
  return {
    type: 'approval' as const,
    keys: (seq: number, ts: string) => ({
      SK: approvalSk(ts, seq),
      GSI1PK: approverGsiPk(fields.actor.id, shard),
      GSI1SK: eventGsiSk(ts, artifactId),
    }),
    fields,
  };
}
