/**
 * The installation approval policy (issue 20 item 4): `GET /v1/policy` (anyone who reads; with
 * `artifact_id` and `version`, also what the policy means for that version and the caller — the web
 * UI's review form), `PUT /v1/policy` (humans only: the access table's setApprovalPolicy; every
 * change is an entry of the hash-chained approval policy log) and `GET /v1/policy/log` (that log, for
 * anyone who may read the policy: who changed it, when, before and after — `alp policy log`). The
 * schemas live beside the routes, as the status routes' do.
 */
import { Type } from '@sinclair/typebox';
import { InvalidInput } from '../../core/errors.ts';
import { resolveVersionRef } from '../../lifecycle/aliases.ts';
import {
  approvalPolicyLog,
  MAX_APPROVAL_TTL_MS,
  MAX_EVIDENCE_PATTERN,
  MAX_POLICY_RULES,
  readApprovalPolicy,
  SELF_APPROVAL,
  setApprovalPolicy,
} from '../../lifecycle/approval-policy.ts';
import { reviewPolicy } from '../../lifecycle/review-policy.ts';
import { principalOf } from '../auth.ts';
import { type AnyRouteDef, type Api, defineRoute } from '../define.ts';
import { ArtifactId, Digest, PrincipalSchema, Timestamp, VersionRefParam } from '../schemas.ts';

const closed = { additionalProperties: false } as const;
const Quorum = Type.Integer({ minimum: 1, maximum: 10 });
const Match = Type.Object(
  {
    kind: Type.Optional(Type.String({ maxLength: 64 })),
    labels: Type.Optional(Type.Record(Type.String({ maxLength: 63 }), Type.String({ maxLength: 256 }))),
  },
  { ...closed, description: 'which artifacts a rule applies to: {} every artifact; kind; labels (all must be carried); both' },
);
const SelfApprovalSchema = Type.Union(
  SELF_APPROVAL.map((s) => Type.Literal(s)),
  { description: 'whether an approval by the principal who proposed the round counts (default not-counted)' },
);
const Lifetime = Type.Integer({
  minimum: 1000,
  maximum: MAX_APPROVAL_TTL_MS,
  description: 'an approval counts at most this long after it was given',
});
const QuorumRules = Type.Array(Type.Object({ match: Match, quorum: Quorum }, closed), { maxItems: MAX_POLICY_RULES });
const EvidenceRules = Type.Array(
  Type.Object(
    {
      match: Match,
      pattern: Type.String({
        minLength: 1,
        maxLength: MAX_EVIDENCE_PATTERN,
        description: 'a JavaScript regular expression the WHOLE evidence reference must match',
      }),
    },
    closed,
  ),
  { maxItems: MAX_POLICY_RULES },
);

export const ApprovalPolicyDoc = Type.Object(
  {
    min_quorum: Quorum,
    quorum_rules: QuorumRules,
    self_approval: SelfApprovalSchema,
    max_approval_lifetime_ms: Lifetime,
    evidence_rules: EvidenceRules,
  },
  closed,
);
export const ApprovalPolicyInput = Type.Object(
  {
    min_quorum: Type.Optional(Quorum),
    quorum_rules: Type.Optional(QuorumRules),
    self_approval: Type.Optional(SelfApprovalSchema),
    max_approval_lifetime_ms: Type.Optional(Lifetime),
    evidence_rules: Type.Optional(EvidenceRules),
  },
  { ...closed, description: 'the whole policy: a field left out takes its default' },
);
export const PolicyReview = Type.Object(
  {
    artifact_id: ArtifactId,
    version: Type.Integer({ minimum: 1 }),
    state: Type.String(),
    policy_version: Type.Integer({ minimum: 0 }),
    policy_hash: Digest,
    quorum: Quorum,
    installation_quorum: Quorum,
    artifact_quorum: Quorum,
    counted_so_far: Type.Integer({ minimum: 0 }),
    self_approval: SelfApprovalSchema,
    proposed_by: Type.Union([PrincipalSchema, Type.Null()]),
    max_approval_lifetime_ms: Type.Integer({ minimum: 1 }),
    default_expiry_ms: Type.Integer({ minimum: 1 }),
    evidence_patterns: Type.Array(Type.String()),
    your_approval: Type.Object({ counts: Type.Boolean(), reason: Type.Optional(Type.String()) }, closed),
  },
  { ...closed, description: 'the effective policy for one version, and whether the caller’s approval would count' },
);
export const PolicyState = Type.Object(
  {
    version: Type.Integer({ minimum: 0, description: '0: never set (the default policy)' }),
    hash: Digest,
    policy: ApprovalPolicyDoc,
    updated_at: Type.Union([Type.String(), Type.Null()]),
    updated_by: Type.Union([PrincipalSchema, Type.Null()]),
    changed: Type.Optional(Type.Boolean({ description: 'PUT: false when the policy given was already in force (nothing recorded)' })),
    review: Type.Optional(PolicyReview),
  },
  closed,
);
export const PolicyQuery = Type.Object(
  { artifact_id: Type.Optional(ArtifactId), version: Type.Optional(VersionRefParam) },
  { ...closed, description: 'both, or neither' },
);
export const PolicyBody = Type.Object(
  {
    policy: ApprovalPolicyInput,
    expected_version: Type.Optional(
      Type.Integer({ minimum: 0, description: 'refuse (409, reason POLICY_CHANGED) unless this version is in force' }),
    ),
    reason: Type.Optional(Type.String({ maxLength: 1000 })),
  },
  closed,
);

export const PolicyLogEvent = Type.Object(
  {
    seq: Type.Integer({ minimum: 1 }),
    timestamp: Timestamp,
    version: Type.Integer({ minimum: 1, description: 'the policy version this change made (= seq)' }),
    before: ApprovalPolicyDoc,
    after: ApprovalPolicyDoc,
    before_hash: Digest,
    after_hash: Digest,
    by: PrincipalSchema,
    reason: Type.Optional(Type.String()),
    prev_hash: Type.Union([Digest, Type.Null()]),
    hash: Digest,
  },
  { ...closed, description: 'an entry of the approval policy log (hash-chained; docs/audit-format.md)' },
);
export const PolicyLog = Type.Object(
  {
    events: Type.Array(PolicyLogEvent, { description: 'every change of the policy, oldest first; empty: the defaults were never changed' }),
  },
  closed,
);

export const POLICY_CONTRACT = {
  getPolicy: { schema: { querystring: PolicyQuery, response: { 200: PolicyState } } },
  setPolicy: { schema: { body: PolicyBody, response: { 200: PolicyState } } },
  policyLog: { schema: { response: { 200: PolicyLog } } },
} as const;

export function policyRoutes(api: Api): AnyRouteDef[] {
  const { ctx } = api;
  return [
    defineRoute({
      id: 'getPolicy',
      summary: 'The installation approval policy in force (version, hash, fields)',
      description:
        'With `artifact_id` and `version` (a number or @alias), also `review`: the effective policy for that version — quorum needed (the larger of the installation minimum for its kind/labels and the artifact’s own), approvals counted so far, whether the caller’s approval would count, evidence patterns, lifetime.',
      tags: ['policy'],
      schema: POLICY_CONTRACT.getPolicy.schema,
      handler: async (req) => {
        const state = await readApprovalPolicy(ctx);
        const { artifact_id: id, version } = req.query;
        if ((id === undefined) !== (version === undefined)) throw new InvalidInput('give artifact_id and version together, or neither');
        if (id === undefined || version === undefined) return state;
        const n = await resolveVersionRef(ctx, id, version);
        return { ...state, review: await reviewPolicy(ctx, principalOf(req), id, n) };
      },
    }),
    defineRoute({
      id: 'setPolicy',
      summary: 'Replace the installation approval policy (humans only; an entry of the approval policy log with before and after)',
      description:
        'The body’s `policy` is the whole policy (fields left out take their defaults). Agents and services: 403 FORBIDDEN. Decisions are judged under the policy in force when they are made, and execution start re-counts under the policy then in force.',
      tags: ['policy'],
      schema: POLICY_CONTRACT.setPolicy.schema,
      handler: async (req) =>
        setApprovalPolicy(ctx, principalOf(req), req.body.policy, { expectedVersion: req.body.expected_version, reason: req.body.reason }),
    }),
    defineRoute({
      id: 'policyLog',
      summary: 'The approval policy log: every change of the policy, oldest first',
      description:
        'Each entry: who changed the policy and when, the whole policy before and after with their hashes, the reason given, and the entry’s hash chain (`prev_hash`, `hash`; `alp audit verify` checks it). Readable by anyone who may read the policy.',
      tags: ['policy'],
      schema: POLICY_CONTRACT.policyLog.schema,
      handler: async () => ({ events: await approvalPolicyLog(ctx) }),
    }),
  ];
}
