/** The installation approval policy as it applies to one version, inside the review form (issue 20 item 4). */
import { ErrorBox, useApi } from '../components.tsx';
import { policyWords, type ReviewPolicyLike } from '../lib/review-policy.ts';

export function PolicyNote({ artifactId, version }: { artifactId: string; version: number }) {
  const r = useApi<{ version: number; review?: ReviewPolicyLike }>(
    `/v1/policy?artifact_id=${encodeURIComponent(artifactId)}&version=${version}`,
  );
  const review = r.data?.review;
  if (!review) return <ErrorBox error={r.error} what="Approval policy unavailable" />;
  const w = policyWords(review);
  return (
    <div class="policy-note" data-testid="review-policy">
      <p>
        <strong data-testid="policy-quorum">{w.quorum}</strong> {w.source}
      </p>
      <p data-testid="policy-yours">{w.yours}</p>
      <ul class="small">
        <li data-testid="policy-evidence">{w.evidence}</li>
        <li data-testid="policy-lifetime">{w.lifetime}</li>
        <li>{w.selfApproval}</li>
        <li class="muted">Installation approval policy version {review.policy_version}.</li>
      </ul>
    </div>
  );
}
