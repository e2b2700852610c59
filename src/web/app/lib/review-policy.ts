/**
 * The review form's account of the installation approval policy for one version, in words (issue 20
 * item 4): how many approvals are needed and why, how many count so far, whether the signed-in
 * human's approval would count, the evidence the reference must match, and how long an approval
 * counts. The numbers are the server's (`GET /v1/policy?artifact_id&version`, computed by the one rule
 * set); this module only words them.
 */

export interface ReviewPolicyLike {
  policy_version: number;
  quorum: number;
  installation_quorum: number;
  artifact_quorum: number;
  counted_so_far: number;
  self_approval: 'counted' | 'not-counted';
  max_approval_lifetime_ms: number;
  evidence_patterns: string[];
  your_approval: { counts: boolean; reason?: string | undefined };
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

export function durationWords(ms: number): string {
  const units: Array<[number, string]> = [
    [86_400_000, 'day'],
    [3_600_000, 'hour'],
    [60_000, 'minute'],
    [1000, 'second'],
  ];
  for (const [size, name] of units) if (ms % size === 0) return plural(ms / size, name);
  return `${ms} ms`;
}

export interface PolicyWords {
  quorum: string;
  source: string;
  yours: string;
  evidence: string;
  lifetime: string;
  selfApproval: string;
}

export function policyWords(r: ReviewPolicyLike): PolicyWords {
  const raisedBy =
    r.installation_quorum >= r.artifact_quorum
      ? `the installation policy’s minimum for this artifact (${r.installation_quorum}); the artifact asks for ${r.artifact_quorum}`
      : `the artifact’s own quorum (${r.artifact_quorum}), above the installation minimum of ${r.installation_quorum}`;
  return {
    quorum: `Quorum: ${r.counted_so_far} of ${plural(r.quorum, 'human approval')} counted so far.`,
    source: `Needed: ${r.quorum}, from ${raisedBy}.`,
    yours: r.your_approval.counts
      ? 'Your approval would count.'
      : `Your approval would not count: ${r.your_approval.reason ?? 'no reason given'}.`,
    evidence:
      r.evidence_patterns.length === 0
        ? 'Evidence: any reference.'
        : `Evidence: the whole reference must match ${r.evidence_patterns.map((p) => `/${p}/`).join(' and ')}.`,
    lifetime: `An approval counts for at most ${durationWords(r.max_approval_lifetime_ms)} after it is given.`,
    selfApproval:
      r.self_approval === 'counted' ? 'A proposer’s own approval counts.' : 'A proposer’s own approval is recorded but not counted.',
  };
}
