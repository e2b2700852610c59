/**
 * Human approvals and rejections — the one rule set. An approval binds the content hash the human saw,
 * carries an evidence reference and an expiry, and counts toward the effective quorum (the larger of
 * the installation approval policy's minimum for the artifact and the artifact's own quorum;
 * approval-policy.ts) only when it binds the version's current hash, is unexpired, is younger than the
 * policy's maximum lifetime, belongs to the current proposal round, satisfies the policy's evidence
 * patterns, is not the proposer's own (unless the policy counts those) and is the first of its
 * principal. Reaching the quorum moves the version to APPROVED in the same transaction; any rejection
 * moves it to REJECTED. Every decision records the effective policy it was judged under
 * (`approval_policy`); execution start and reproposal re-count under the policy then in force.
 */
import { afterOps, readBackOr, readHead, runAudited } from '../audit/chain.ts';
import { isoTimestamp } from '../core/clock.ts';
import { type Digest, parseDigest } from '../core/digest.ts';
import { IllegalTransition, InvalidInput } from '../core/errors.ts';
import { approvalSk, approverGsiPk, artifactPk, eventGsiSk, indexShard } from '../core/keys.ts';
import { queryAll } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertActor } from './access.ts';
import {
  approvalPolicyInForce,
  DEFAULT_APPROVAL_TTL_MS,
  type EffectivePolicy,
  effectivePolicy,
  MAX_APPROVAL_TTL_MS,
  unmetEvidence,
} from './approval-policy.ts';
import { compensationOutcome } from './compensation-outcome.ts';
import type { HeadItem, Principal, VersionItem } from './model.ts';
import { merge, type Planned, planMove } from './moves.ts';
import { principalKey } from './principal-key.ts';
import { combineCountOps } from './state-counts.ts';
import { validateText, validateVersionNumber } from './validation.ts';
import { readVersion } from './versions.ts';

export { DEFAULT_APPROVAL_TTL_MS, MAX_APPROVAL_TTL_MS } from './approval-policy.ts';

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
  /** The effective policy the decision was judged under (absent on decisions made before issue 20 item 4). */
  approval_policy?: EffectivePolicy;
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

/** What the counting rule needs of a policy (an EffectivePolicy has it). */
export type CountPolicy = Pick<EffectivePolicy, 'self_approval' | 'max_approval_lifetime_ms' | 'evidence_patterns'>;

/**
 * Whether `approverId` proposed the current round of `v` and the policy does not count that. A version
 * proposed before proposers were recorded (no `proposed_by`) has no known proposer: not a self-approval.
 */
export function uncountedSelfApproval(policy: Pick<CountPolicy, 'self_approval'>, v: VersionItem, approverId: string): boolean {
  return (
    policy.self_approval === 'not-counted' && v.proposed_by !== undefined && principalKey(v.proposed_by.id) === principalKey(approverId)
  );
}

/**
 * Why approval `a` does not count now for version `v` under `policy`, or undefined when it does (the
 * "first of its principal" rule aside: countingApprovals applies it).
 */
export function notCountingReason(a: ApprovalRecord, v: VersionItem, now: Date, policy: CountPolicy): string | undefined {
  if (a.version !== v.version || a.decision !== 'APPROVE') return 'not an approval of this version';
  if (!a.counted) return a.not_counted_reason ?? 'not counted when given';
  if (a.round !== v.proposal_round) return `of proposal round ${a.round}, not the current ${v.proposal_round}`;
  if (a.content_hash !== v.content_hash) return `binds ${a.content_hash}, not the version's content`;
  if (new Date(a.expires_at).getTime() <= now.getTime()) return 'expired';
  if (new Date(a.timestamp).getTime() + policy.max_approval_lifetime_ms <= now.getTime())
    return `older than the policy's maximum approval lifetime (${policy.max_approval_lifetime_ms} ms)`;
  if (uncountedSelfApproval(policy, v, a.actor.id))
    return `${a.actor.id} proposed this round; the policy does not count a proposer's own approval`;
  if (unmetEvidence(policy.evidence_patterns, a.evidence_ref).length > 0)
    return "its evidence does not match the policy's evidence patterns";
  return undefined;
}

/** Approvals that count now for this version under `policy`: notCountingReason says none, one per principal. */
export function countingApprovals(approvals: ApprovalRecord[], v: VersionItem, now: Date, policy: CountPolicy): ApprovalRecord[] {
  const byPrincipal = new Map<string, ApprovalRecord>();
  for (const a of approvals) {
    if (notCountingReason(a, v, now, policy) !== undefined) continue;
    // Distinct humans, not distinct spellings: `Ops-Lead` and `ops-lead` are one approver.
    const who = principalKey(a.actor.id);
    if (!byPrincipal.has(who)) byPrincipal.set(who, a);
  }
  return [...byPrincipal.values()];
}

export interface QuorumStatus {
  policy: EffectivePolicy;
  counting: ApprovalRecord[];
  met: boolean;
}

/**
 * The effective policy in force now for the artifact, and the approvals of `v` that count under it
 * (`approvals`: the artifact's decisions when the caller has read them already).
 */
export async function quorumStatus(
  ctx: ServiceContext,
  head: HeadItem,
  v: VersionItem,
  now: Date,
  approvals?: ApprovalRecord[],
): Promise<QuorumStatus> {
  const policy = effectivePolicy(await approvalPolicyInForce(ctx), head);
  const counting = countingApprovals(approvals ?? (await listApprovals(ctx, head.artifact_id)), v, now, policy);
  return { policy, counting, met: counting.length >= policy.quorum };
}

function expiryOf(input: DecisionInput, now: Date, maxMs: number): string {
  if (input.expiresAt !== undefined && input.expiresInMs !== undefined)
    throw new InvalidInput('give expires_at or an expiry duration, not both');
  const overPolicy = () =>
    new InvalidInput(`the installation approval policy allows an approval to last at most ${maxMs} ms`, {
      reason: 'APPROVAL_LIFETIME_EXCEEDS_POLICY',
      max_approval_lifetime_ms: maxMs,
    });
  if (input.expiresAt !== undefined) {
    const at = new Date(input.expiresAt);
    if (Number.isNaN(at.getTime())) throw new InvalidInput('expires_at must be an ISO-8601 time');
    if (at.getTime() - now.getTime() > MAX_APPROVAL_TTL_MS) throw new InvalidInput('an approval may last at most 365 days');
    if (at.getTime() - now.getTime() > maxMs) throw overPolicy();
    return at.toISOString();
  }
  const ttl = input.expiresInMs ?? Math.min(DEFAULT_APPROVAL_TTL_MS, maxMs);
  if (!Number.isInteger(ttl) || ttl <= 0 || ttl > MAX_APPROVAL_TTL_MS)
    throw new InvalidInput('the approval lifetime must be between 1 ms and 365 days');
  if (ttl > maxMs) throw overPolicy();
  return new Date(now.getTime() + ttl).toISOString();
}

/** INVALID (reason EVIDENCE_REQUIRED) unless the evidence matches every pattern the policy requires. */
function assertEvidence(policy: EffectivePolicy, evidence: string): void {
  const unmet = unmetEvidence(policy.evidence_patterns, evidence);
  if (unmet.length > 0)
    throw new InvalidInput(
      `the installation approval policy (version ${policy.version}) requires the evidence reference to match ${unmet.map((p) => JSON.stringify(p)).join(' and ')} (the whole reference); nothing was recorded`,
      { reason: 'EVIDENCE_REQUIRED', patterns: unmet, policy_version: policy.version },
    );
}

/** Whether a new approval counts when given, and why not. */
function countedWhenGiven(
  actor: Principal,
  v: VersionItem,
  contentHash: Digest,
  expiresAt: string,
  now: Date,
  policy: EffectivePolicy,
  current: ApprovalRecord[],
): [boolean, string | undefined] {
  if (contentHash !== v.content_hash) return [false, `binds ${contentHash}, not the version's content ${v.content_hash}`];
  if (new Date(expiresAt).getTime() <= now.getTime()) return [false, 'expired when given'];
  if (uncountedSelfApproval(policy, v, actor.id))
    return [
      false,
      `${actor.id} proposed this round; the installation approval policy (version ${policy.version}) does not count a proposer's own approval`,
    ];
  if (current.some((a) => principalKey(a.actor.id) === principalKey(actor.id)))
    return [false, `${actor.id} already approved this proposal`];
  return [true, undefined];
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
    const policy = effectivePolicy(await approvalPolicyInForce(ctx), head);
    const expiresAt = expiryOf(input, now, policy.max_approval_lifetime_ms);
    const contentHash = bound ?? v.content_hash;
    if (input.decision === 'APPROVE') {
      assertEvidence(policy, evidence);
      const current = countingApprovals(await listApprovals(ctx, artifactId), v, now, policy);
      const [counted, reason] = countedWhenGiven(actor, v, contentHash, expiresAt, now, policy, current);
      const quorumReached = counted && current.length + 1 >= policy.quorum;
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
        approval_policy: policy,
      });
      const parts: Planned[] = [{ ops: [], entries: [entry] }];
      if (quorumReached) parts.push(planMove(head, v, 'APPROVED', 'approval', actor, at, { reason: `quorum of ${policy.quorum} reached` }));
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
      approval_policy: policy,
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
