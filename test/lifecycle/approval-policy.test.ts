/**
 * The installation approval policy (issue 20 item 4): stored and changed by humans only, every change
 * in the hash-chained approval policy log with before and after; enforced in the one rule set
 * (approvals.ts): effective quorum = max(installation minimum for kind/labels, the artifact's), a
 * proposer's own approval not counted by default, approvals older than the maximum lifetime not
 * counted, approvals without the required evidence refused; the policy recorded on every decision and
 * in its signed attestation. The counting rule is also checked against a model over random policies
 * and approvals (fast-check).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { verifyAllAudit } from '../../src/audit/verify-all.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { sha256 } from '../../src/core/digest.ts';
import { AlpError, Forbidden, InvalidInput } from '../../src/core/errors.ts';
import { APPROVAL_POLICY_PK, approvalPolicyLogSk } from '../../src/core/keys.ts';
import {
  approvalPolicyLog,
  DEFAULT_APPROVAL_POLICY,
  effectivePolicy,
  readApprovalPolicy,
  setApprovalPolicy,
} from '../../src/lifecycle/approval-policy.ts';
import { type ApprovalRecord, countingApprovals, decide, listApprovals } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { decisionAttestations } from '../../src/lifecycle/attestations.ts';
import { startExecution } from '../../src/lifecycle/executions.ts';
import type { Principal, VersionItem } from '../../src/lifecycle/model.ts';
import { reviewPolicy } from '../../src/lifecycle/review-policy.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { readVersion } from '../../src/lifecycle/versions.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { startApi } from '../helpers/api-harness.ts';
import { embeddedContext, type TestContext } from '../helpers/context.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice, bob } from '../helpers/walk.ts';

const carol: Principal = { id: 'carol', kind: 'human' };

async function proposed(ctx: TestContext, o: { kind?: string; labels?: Record<string, string>; quorum?: number; by?: Principal } = {}) {
  const { by = agent, ...meta } = o;
  const { version } = await createArtifact(ctx, by, { name: `a-${Math.random()}`, filename: 'a.sh', ...meta, body: bytesOf('echo hi\n') });
  await propose(ctx, by, version.artifact_id, 1);
  return version.artifact_id;
}

const approve = (ctx: TestContext, who: Principal, id: string, evidenceRef = 'CR-1', extra: Record<string, unknown> = {}) =>
  decide(ctx, who, id, 1, { decision: 'APPROVE', evidenceRef, ...extra });

async function refusedWith(p: Promise<unknown>, code: string, reason?: string) {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof AlpError, String(e));
    assert.equal(e.code, code, e.message);
    if (reason) assert.equal(e.details?.reason, reason, e.message);
    return true;
  });
}

describe('the installation approval policy: storage and audit', () => {
  it('is the default until a human sets it; agents and services are refused; each change is logged with before and after', async () => {
    const ctx = await embeddedContext();
    await initInstallation(ctx);
    const first = await readApprovalPolicy(ctx);
    assert.equal(first.version, 0);
    assert.deepEqual(first.policy, DEFAULT_APPROVAL_POLICY);
    assert.equal(first.policy.self_approval, 'not-counted');
    await assert.rejects(setApprovalPolicy(ctx, agent, { min_quorum: 1 }), Forbidden);
    await assert.rejects(setApprovalPolicy(ctx, { id: 'exporter', kind: 'service' }, { min_quorum: 1 }), Forbidden);
    await assert.rejects(setApprovalPolicy(ctx, alice, { evidence_rules: [{ match: {}, pattern: '(' }] }), InvalidInput);
    await assert.rejects(setApprovalPolicy(ctx, alice, { min_quorum: 11 }), InvalidInput);
    await assert.rejects(setApprovalPolicy(ctx, alice, { surprise: 1 }), InvalidInput);

    const set = await setApprovalPolicy(
      ctx,
      alice,
      { min_quorum: 2, quorum_rules: [{ match: { kind: 'migration' }, quorum: 3 }] },
      { reason: 'SOX' },
    );
    assert.equal(set.version, 1);
    assert.equal(set.changed, true);
    assert.deepEqual(set.updated_by, alice);
    const again = await setApprovalPolicy(ctx, bob, set.policy);
    assert.equal(again.changed, false);
    assert.equal(again.version, 1);
    await refusedWith(setApprovalPolicy(ctx, bob, { min_quorum: 1 }, { expectedVersion: 0 }), 'CONFLICT', 'POLICY_CHANGED');
    await setApprovalPolicy(ctx, bob, { min_quorum: 1 }, { expectedVersion: 1 });

    const log = await approvalPolicyLog(ctx);
    assert.deepEqual(
      log.map((e) => [e.seq, e.version, e.by.id, e.reason]),
      [
        [1, 1, 'alice', 'SOX'],
        [2, 2, 'bob', undefined],
      ],
    );
    assert.deepEqual(log[0]?.before, DEFAULT_APPROVAL_POLICY as unknown as Record<string, unknown>);
    assert.equal(log[0]?.after.min_quorum, 2);
    assert.deepEqual(log[1]?.before, log[0]?.after);
    const ok = await verifyAllAudit(ctx);
    assert.deepEqual(ok.approval_policy_log, { entries: 2, ok: true });

    // An edited log entry is found by alp audit verify.
    const key = { PK: APPROVAL_POLICY_PK, SK: approvalPolicyLogSk(1) };
    const entry = await ctx.items.get(key);
    await ctx.items.put({ ...entry, after: { ...(entry?.after as object), min_quorum: 1 } } as never);
    const broken = await verifyAllAudit(ctx);
    assert.equal(broken.ok, false);
    assert.ok(broken.broken.some((r) => r.artifact_id === 'approval-policy-log'));
  });

  it('PUT /v1/policy is a human’s (agent 403 FORBIDDEN); GET answers the review of a version for the caller', async () => {
    const h = await startApi();
    try {
      const body = { policy: { min_quorum: 2, evidence_rules: [{ match: {}, pattern: 'CR-[0-9]+' }] }, reason: 'api' };
      const refused = await h.call('PUT', '/v1/policy', { token: h.tokens.agent, json: body });
      assert.equal(refused.status, 403);
      assert.equal(refused.json.code, 'FORBIDDEN');
      const put = await h.call('PUT', '/v1/policy', { token: h.tokens.human, json: body });
      assert.equal(put.status, 200, put.text);
      assert.equal(put.json.version, 1);
      const { version: v } = await createArtifact(h.ctx, agent, { name: 'x', filename: 'x.sh', body: bytesOf('x\n') });
      await propose(h.ctx, alice, v.artifact_id, 1);
      const get = await h.call('GET', `/v1/policy?artifact_id=${v.artifact_id}&version=1`, { token: h.tokens.human });
      assert.equal(get.status, 200, get.text);
      assert.equal(get.json.review.quorum, 2);
      assert.equal(get.json.review.counted_so_far, 0);
      assert.deepEqual(get.json.review.evidence_patterns, ['CR-[0-9]+']);
      assert.equal(get.json.review.your_approval.counts, false, 'alice proposed');
      const asBob = await h.call('GET', `/v1/policy?artifact_id=${v.artifact_id}&version=1`, { token: h.tokens.human2 });
      assert.equal(asBob.json.review.your_approval.counts, true);
      const missing = await h.call('POST', `/v1/artifacts/${v.artifact_id}/versions/1/approvals`, {
        token: h.tokens.human2,
        json: { decision: 'APPROVE', evidence_ref: 'looks fine' },
      });
      assert.equal(missing.status, 400);
      assert.equal(missing.json.code, 'INVALID');
      assert.equal(missing.json.details.reason, 'EVIDENCE_REQUIRED');
    } finally {
      await h.close();
    }
  });
});

describe('the installation approval policy: enforced in the one rule set', () => {
  it('effective quorum is the larger of the installation minimum for kind/labels and the artifact’s own', async () => {
    const ctx = await embeddedContext();
    await setApprovalPolicy(ctx, alice, {
      quorum_rules: [
        { match: { kind: 'migration' }, quorum: 2 },
        { match: { labels: { env: 'prod' } }, quorum: 3 },
      ],
    });
    const mig = await proposed(ctx, { kind: 'migration' });
    assert.equal((await approve(ctx, alice, mig)).version.state, 'PROPOSED');
    const done = await approve(ctx, bob, mig);
    assert.equal(done.version.state, 'APPROVED');
    assert.equal(done.approval.approval_policy?.quorum, 2);
    assert.equal(done.approval.approval_policy?.installation_quorum, 2);
    assert.equal(done.approval.approval_policy?.artifact_quorum, 1);
    // The creator raises, never lowers: quorum 1 on a prod artifact still needs 3; quorum 4 on a script needs 4.
    const prod = await proposed(ctx, { kind: 'migration', labels: { env: 'prod' }, quorum: 1 });
    for (const who of [alice, bob]) assert.equal((await approve(ctx, who, prod)).version.state, 'PROPOSED');
    assert.equal((await approve(ctx, carol, prod)).version.state, 'APPROVED');
    const raised = await proposed(ctx, { quorum: 4 });
    for (const who of [alice, bob, carol]) assert.equal((await approve(ctx, who, raised)).version.state, 'PROPOSED');
    const review = await reviewPolicy(ctx, { id: 'dave', kind: 'human' }, raised, 1);
    assert.deepEqual([review.quorum, review.installation_quorum, review.artifact_quorum, review.counted_so_far], [4, 1, 4, 3]);
  });

  it('a proposer’s own approval is recorded but not counted, unless the policy counts it', async () => {
    const ctx = await embeddedContext();
    const id = await proposed(ctx, { by: alice });
    const own = await approve(ctx, alice, id);
    assert.equal(own.approval.counted, false);
    assert.match(String(own.approval.not_counted_reason), /alice proposed this round/);
    assert.equal(own.version.state, 'PROPOSED');
    assert.deepEqual((await readVersion(ctx.items, id, 1)).proposed_by, alice);
    assert.equal((await reviewPolicy(ctx, alice, id, 1)).your_approval.counts, false);
    assert.equal((await approve(ctx, bob, id)).version.state, 'APPROVED');

    await setApprovalPolicy(ctx, bob, { self_approval: 'counted' });
    const id2 = await proposed(ctx, { by: { id: 'Alice', kind: 'human' } });
    const counted = await approve(ctx, alice, id2);
    assert.equal(counted.approval.counted, true);
    assert.equal(counted.version.state, 'APPROVED');
  });

  it('the maximum lifetime bounds new expiries and stops older approvals counting at execution start', async () => {
    const ctx = await embeddedContext();
    await setApprovalPolicy(ctx, alice, { max_approval_lifetime_ms: DAY_MS });
    const id = await proposed(ctx);
    await refusedWith(approve(ctx, bob, id, 'CR-1', { expiresInMs: 2 * DAY_MS }), 'INVALID', 'APPROVAL_LIFETIME_EXCEEDS_POLICY');
    const ok = await approve(ctx, bob, id);
    assert.equal(Date.parse(ok.approval.expires_at) - Date.parse(ok.approval.timestamp), DAY_MS, 'the 7-day default is cut to the policy');
    assert.equal(ok.version.state, 'APPROVED');
    // Tightened after the decision: execution start re-counts under the policy in force.
    await setApprovalPolicy(ctx, alice, { max_approval_lifetime_ms: 3_600_000 });
    ctx.clock.advance(2 * 3_600_000);
    await refusedWith(startExecution(ctx, agent, id, 1), 'CONFLICT');
    const again = await propose(ctx, agent, id, 1);
    assert.equal(again.state, 'PROPOSED');
  });

  it('an approval without the required evidence is refused and records nothing; patterns match the whole reference', async () => {
    const ctx = await embeddedContext();
    await setApprovalPolicy(ctx, alice, {
      evidence_rules: [
        { match: {}, pattern: 'CR-[0-9]+' },
        { match: { labels: { env: 'prod' } }, pattern: 'CR-9[0-9]*' },
      ],
    });
    const id = await proposed(ctx);
    for (const bad of ['looks good', 'xCR-12', 'CR-12 and more'])
      await refusedWith(approve(ctx, bob, id, bad), 'INVALID', 'EVIDENCE_REQUIRED');
    assert.equal((await listApprovals(ctx, id)).length, 0);
    // A rejection needs no evidence pattern.
    const prod = await proposed(ctx, { labels: { env: 'prod' } });
    await refusedWith(approve(ctx, bob, prod, 'CR-12'), 'INVALID', 'EVIDENCE_REQUIRED');
    assert.equal((await approve(ctx, bob, prod, 'CR-91')).version.state, 'APPROVED');
    assert.equal((await approve(ctx, bob, id, 'CR-12')).version.state, 'APPROVED');
    const other = await proposed(ctx);
    assert.equal((await decide(ctx, bob, other, 1, { decision: 'REJECT', evidenceRef: 'no' })).version.state, 'REJECTED');
  });

  it('every decision records the policy it was judged under, and its signed attestation carries it', async () => {
    const ctx = await embeddedContext();
    await initInstallation(ctx);
    const set = await setApprovalPolicy(ctx, alice, { min_quorum: 2, evidence_rules: [{ match: {}, pattern: 'CR-[0-9]+' }] });
    const id = await proposed(ctx);
    await approve(ctx, alice, id);
    await setApprovalPolicy(ctx, alice, { min_quorum: 1 });
    const second = await approve(ctx, bob, id, 'CR-2');
    assert.equal(second.version.state, 'APPROVED');
    const recorded = (await listApprovals(ctx, id)).map((a) => [a.approval_policy?.version, a.approval_policy?.quorum]);
    assert.deepEqual(recorded, [
      [1, 2],
      [2, 1],
    ]);
    const atts = await decisionAttestations(ctx, id, 1);
    const predicate = (i: number) =>
      JSON.parse(Buffer.from(atts[i]?.envelope.payload as string, 'base64').toString('utf8')).predicate.policy as Record<string, unknown>;
    assert.equal(predicate(0).effective_quorum, 2);
    assert.deepEqual(predicate(0).installation_policy, {
      version: 1,
      hash: set.hash,
      quorum: 2,
      self_approval: 'not-counted',
      max_approval_lifetime_ms: DEFAULT_APPROVAL_POLICY.max_approval_lifetime_ms,
      evidence_patterns: ['CR-[0-9]+'],
    });
    assert.equal((predicate(1).installation_policy as { version: number }).version, 2);
    assert.equal((await verifyAllAudit(ctx)).ok, true);
  });
});

describe('the counting rule over random policies and approvals (fast-check)', () => {
  const people = ['alice', 'Alice', 'bob', 'carol'];
  const HASH = sha256('content');
  const NOW = Date.parse('2026-03-10T00:00:00.000Z');
  const approvalArb = fc.record({
    who: fc.constantFrom(...people),
    round: fc.constantFrom(1, 2),
    rightHash: fc.boolean(),
    counted: fc.boolean(),
    decision: fc.constantFrom('APPROVE', 'REJECT'),
    ageH: fc.integer({ min: 0, max: 200 }),
    ttlH: fc.integer({ min: 1, max: 300 }),
    evidence: fc.constantFrom('CR-1', 'CR-22', 'INC-3', 'see chat'),
  });
  const policyArb = fc.record({
    self: fc.constantFrom('counted', 'not-counted'),
    lifetimeH: fc.integer({ min: 1, max: 400 }),
    patterns: fc.subarray(['CR-[0-9]+', '[A-Z]+-[0-9]+', '.*']),
    min: fc.integer({ min: 1, max: 10 }),
    kindRule: fc.option(fc.integer({ min: 1, max: 10 })),
    artifactQuorum: fc.integer({ min: 1, max: 10 }),
    proposer: fc.option(fc.constantFrom(...people)),
  });

  it('counts exactly the distinct humans with an approval valid under the policy; quorum = max(installation, artifact)', () => {
    fc.assert(
      fc.property(policyArb, fc.array(approvalArb, { maxLength: 12 }), (p, as) => {
        const state = {
          version: 3,
          hash: sha256('p'),
          updated_at: null,
          updated_by: null,
          policy: {
            ...DEFAULT_APPROVAL_POLICY,
            min_quorum: p.min,
            quorum_rules: p.kindRule === null ? [] : [{ match: { kind: 'script' }, quorum: p.kindRule }],
            self_approval: p.self as 'counted' | 'not-counted',
            max_approval_lifetime_ms: p.lifetimeH * 3_600_000,
            evidence_rules: p.patterns.map((pattern) => ({ match: {}, pattern })),
          },
        };
        const eff = effectivePolicy(state, { kind: 'script', labels: {}, quorum: p.artifactQuorum });
        assert.equal(eff.quorum, Math.max(p.min, p.kindRule ?? 1, p.artifactQuorum));
        assert.ok(eff.quorum >= p.artifactQuorum);
        const v = {
          version: 1,
          content_hash: HASH,
          proposal_round: 2,
          ...(p.proposer === null ? {} : { proposed_by: { id: p.proposer, kind: 'human' } }),
        } as unknown as VersionItem;
        const records = as.map(
          (a, i) =>
            ({
              SK: `A${i}`,
              version: 1,
              decision: a.decision,
              actor: { id: a.who, kind: 'human' },
              counted: a.counted,
              round: a.round,
              content_hash: a.rightHash ? HASH : sha256('other'),
              timestamp: new Date(NOW - a.ageH * 3_600_000).toISOString(),
              expires_at: new Date(NOW - a.ageH * 3_600_000 + a.ttlH * 3_600_000).toISOString(),
              evidence_ref: a.evidence,
            }) as unknown as ApprovalRecord,
        );
        const got = countingApprovals(records, v, new Date(NOW), eff);
        // The model, written from the rule's statement.
        const key = (s: string) => s.toLowerCase();
        const valid = as.filter(
          (a) =>
            a.decision === 'APPROVE' &&
            a.counted &&
            a.round === 2 &&
            a.rightHash &&
            a.ttlH > a.ageH &&
            a.ageH < p.lifetimeH &&
            !(p.self === 'not-counted' && p.proposer !== null && key(p.proposer) === key(a.who)) &&
            p.patterns.every((pat) => new RegExp(`^(?:${pat})$`, 'u').test(a.evidence)),
        );
        const expected = new Set(valid.map((a) => key(a.who)));
        assert.deepEqual(new Set(got.map((a) => key(a.actor.id))), expected);
        assert.equal(got.length, expected.size, 'one per human');
      }),
      { numRuns: 500 },
    );
  });
});
