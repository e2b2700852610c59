/**
 * The review form's wording of the installation approval policy (issue 20 item 4): quorum needed and
 * where it comes from, counted so far, whether the reader's approval would count, evidence, lifetime.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { durationWords, policyWords, type ReviewPolicyLike } from '../../src/web/app/lib/review-policy.ts';

const base: ReviewPolicyLike = {
  policy_version: 3,
  quorum: 2,
  installation_quorum: 2,
  artifact_quorum: 1,
  counted_so_far: 1,
  self_approval: 'not-counted',
  max_approval_lifetime_ms: 86_400_000,
  evidence_patterns: ['CR-[0-9]+'],
  your_approval: { counts: false, reason: 'you proposed this round' },
};

describe('web UI: the approval policy in the review form', () => {
  it('says how many approvals are needed, why, how many count, and whether yours would', () => {
    const w = policyWords(base);
    assert.equal(w.quorum, 'Quorum: 1 of 2 human approvals counted so far.');
    assert.match(w.source, /installation policy’s minimum for this artifact \(2\); the artifact asks for 1/);
    assert.equal(w.yours, 'Your approval would not count: you proposed this round.');
    assert.equal(w.evidence, 'Evidence: the whole reference must match /CR-[0-9]+/.');
    assert.equal(w.lifetime, 'An approval counts for at most 1 day after it is given.');
    assert.equal(w.selfApproval, 'A proposer’s own approval is recorded but not counted.');
  });

  it('names the artifact’s own quorum when it is the larger, and says when any evidence will do', () => {
    const w = policyWords({
      ...base,
      quorum: 4,
      artifact_quorum: 4,
      evidence_patterns: [],
      your_approval: { counts: true },
      self_approval: 'counted',
    });
    assert.match(w.source, /the artifact’s own quorum \(4\), above the installation minimum of 2/);
    assert.equal(w.yours, 'Your approval would count.');
    assert.equal(w.evidence, 'Evidence: any reference.');
    assert.equal(w.selfApproval, 'A proposer’s own approval counts.');
  });

  it('words durations in the largest whole unit', () => {
    assert.deepEqual(
      [durationWords(365 * 86_400_000), durationWords(7_200_000), durationWords(90_000), durationWords(1500)],
      ['365 days', '2 hours', '90 seconds', '1500 ms'],
    );
  });
});
