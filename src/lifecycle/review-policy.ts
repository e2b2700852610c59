/**
 * What a reviewer is shown before deciding (the web UI's review form, `GET /v1/policy?artifact_id&version`):
 * the effective approval policy for the version — quorum needed and where it comes from, how many
 * approvals count so far, whether the caller's own approval would count and why not, the evidence
 * patterns required and the maximum lifetime. Read through the one rule set (approvals.ts), never
 * recomputed by an entry point.
 */
import { readHead } from '../audit/chain.ts';
import type { Digest } from '../core/digest.ts';
import type { ServiceContext } from '../system/context.ts';
import { mayPerform } from './access.ts';
import { DEFAULT_APPROVAL_TTL_MS, type SelfApproval } from './approval-policy.ts';
import { quorumStatus, uncountedSelfApproval } from './approvals.ts';
import type { Principal } from './model.ts';
import { principalKey } from './principal-key.ts';
import { readVersion } from './versions.ts';

export interface ReviewPolicy {
  artifact_id: string;
  version: number;
  state: string;
  policy_version: number;
  policy_hash: Digest;
  quorum: number;
  installation_quorum: number;
  artifact_quorum: number;
  counted_so_far: number;
  self_approval: SelfApproval;
  proposed_by: Principal | null;
  max_approval_lifetime_ms: number;
  default_expiry_ms: number;
  evidence_patterns: string[];
  your_approval: { counts: boolean; reason?: string };
}

function yourApproval(caller: Principal, state: string, self: boolean, alreadyCounted: boolean): { counts: boolean; reason?: string } {
  if (!mayPerform('decide', { principal: caller, operator: false }))
    return { counts: false, reason: `only humans decide; ${caller.id} is ${caller.kind}` };
  if (state !== 'PROPOSED') return { counts: false, reason: `the version is ${state}; only PROPOSED versions take approvals` };
  if (self)
    return { counts: false, reason: 'you proposed this round, and the installation policy does not count a proposer’s own approval' };
  if (alreadyCounted) return { counts: false, reason: 'your approval already counts' };
  return { counts: true };
}

export async function reviewPolicy(ctx: ServiceContext, caller: Principal, artifactId: string, n: number): Promise<ReviewPolicy> {
  const head = await readHead(ctx, artifactId);
  const v = await readVersion(ctx.items, artifactId, n);
  const { policy, counting } = await quorumStatus(ctx, head, v, ctx.clock.now());
  const mine = counting.some((a) => principalKey(a.actor.id) === principalKey(caller.id));
  return {
    artifact_id: artifactId,
    version: n,
    state: v.state,
    policy_version: policy.version,
    policy_hash: policy.hash,
    quorum: policy.quorum,
    installation_quorum: policy.installation_quorum,
    artifact_quorum: policy.artifact_quorum,
    counted_so_far: counting.length,
    self_approval: policy.self_approval,
    proposed_by: v.proposed_by ?? null,
    max_approval_lifetime_ms: policy.max_approval_lifetime_ms,
    default_expiry_ms: Math.min(DEFAULT_APPROVAL_TTL_MS, policy.max_approval_lifetime_ms),
    evidence_patterns: policy.evidence_patterns,
    your_approval: yourApproval(caller, v.state, uncountedSelfApproval(policy, v, caller.id), mine),
  };
}
