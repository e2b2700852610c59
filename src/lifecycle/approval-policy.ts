/**
 * The installation approval policy (issue 20 item 4): what every decision on every artifact is judged
 * under, on top of the artifact's own chained policy (audit/policy.ts). A human changes it (`alp
 * policy set`, `PUT /v1/policy`; the access table's setApprovalPolicy), every change commits with an
 * entry of the hash-chained approval policy log holding the policy before and after
 * (audit/approval-policy-log.ts). Fields:
 *
 * - `min_quorum` and `quorum_rules` (a `match` on kind and/or labels, and a quorum): the installation
 *   minimum for an artifact is the largest of `min_quorum` and every matching rule's quorum; the
 *   effective quorum is the larger of that and the artifact's own quorum — its creator can raise it,
 *   never lower it.
 * - `self_approval`: `not-counted` (the default) — an approval by the principal who proposed the
 *   current round is recorded but does not count; `counted`.
 * - `max_approval_lifetime_ms`: an approval counts for at most this long after it was given, whatever
 *   its own expiry; a decision may not ask for a longer expiry, and the default expiry (7 days) is cut
 *   to it.
 * - `evidence_rules` (a `match` and a `pattern`): an approval of a matching artifact is refused
 *   (INVALID, details.reason EVIDENCE_REQUIRED) unless its evidence reference matches every matching
 *   rule's pattern — a JavaScript regular expression (`u` flag) that must match the WHOLE reference.
 *
 * A `match` of `{}` matches every artifact; `{kind}` artifacts of that kind; `{labels}` artifacts
 * carrying every one of those labels; both: both. The counting rule itself is in approvals.ts.
 */

import { type ApprovalPolicyLogEvent, commitApprovalPolicyChange, readApprovalPolicyLog } from '../audit/approval-policy-log.ts';
import { canonicalDigest } from '../core/canonical-json.ts';
import { DAY_MS } from '../core/clock.ts';
import type { Digest } from '../core/digest.ts';
import { ConditionFailed, Conflict, InvalidInput } from '../core/errors.ts';
import { APPROVAL_POLICY_CURRENT_SK, APPROVAL_POLICY_PK } from '../core/keys.ts';
import { cond, type Item, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertActor } from './access.ts';
import type { HeadItem, Principal } from './model.ts';
import { policyCacheOf } from './policy-cache.ts';
import { validateKind, validateLabels, validateQuorum, validateText } from './validation.ts';

export const DEFAULT_APPROVAL_TTL_MS = 7 * DAY_MS;
export const MAX_APPROVAL_TTL_MS = 365 * DAY_MS;
export const MAX_POLICY_RULES = 50;
export const MAX_EVIDENCE_PATTERN = 500;

export const SELF_APPROVAL = ['counted', 'not-counted'] as const;
export type SelfApproval = (typeof SELF_APPROVAL)[number];

export interface PolicyMatch {
  kind?: string;
  labels?: Record<string, string>;
}
export interface QuorumRule {
  match: PolicyMatch;
  quorum: number;
}
export interface EvidenceRule {
  match: PolicyMatch;
  pattern: string;
}

export interface ApprovalPolicy {
  min_quorum: number;
  quorum_rules: QuorumRule[];
  self_approval: SelfApproval;
  max_approval_lifetime_ms: number;
  evidence_rules: EvidenceRule[];
}

export const DEFAULT_APPROVAL_POLICY: ApprovalPolicy = Object.freeze({
  min_quorum: 1,
  quorum_rules: [],
  self_approval: 'not-counted',
  max_approval_lifetime_ms: MAX_APPROVAL_TTL_MS,
  evidence_rules: [],
}) as ApprovalPolicy;

/** The policy in force: version 0 (never set) is the default policy. */
export interface ApprovalPolicyState {
  version: number;
  hash: Digest;
  policy: ApprovalPolicy;
  updated_at: string | null;
  updated_by: Principal | null;
}

/** What a decision on one artifact is judged under: recorded on every approval entry (`approval_policy`). */
export interface EffectivePolicy {
  /** The installation policy's version and hash. */
  version: number;
  hash: Digest;
  /** max(installation_quorum, artifact_quorum). */
  quorum: number;
  installation_quorum: number;
  artifact_quorum: number;
  self_approval: SelfApproval;
  max_approval_lifetime_ms: number;
  /** Every pattern the evidence reference must match whole (the matching evidence rules', in order). */
  evidence_patterns: string[];
}

export function policyHash(policy: ApprovalPolicy): Digest {
  return canonicalDigest(policy);
}

function validateMatch(m: unknown, where: string): PolicyMatch {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) throw new InvalidInput(`${where}.match must be an object`);
  const { kind, labels, ...rest } = m as Record<string, unknown>;
  if (Object.keys(rest).length > 0) throw new InvalidInput(`${where}.match takes kind and labels only`);
  const out: PolicyMatch = {};
  if (kind !== undefined) out.kind = validateKind(kind);
  if (labels !== undefined) {
    if (typeof labels !== 'object' || labels === null || Array.isArray(labels))
      throw new InvalidInput(`${where}.match.labels must be an object`);
    const l = validateLabels(labels as Record<string, string>);
    if (Object.keys(l).length > 0) out.labels = l;
  }
  return out;
}

/** A pattern compiled as the policy applies it: the whole reference must match. */
export function compileEvidencePattern(pattern: string): RegExp {
  try {
    return new RegExp(`^(?:${pattern})$`, 'u');
  } catch (e) {
    throw new InvalidInput(
      `evidence pattern ${JSON.stringify(pattern.slice(0, 100))} is not a valid regular expression: ${(e as Error).message}`,
    );
  }
}

function rules<T>(v: unknown, field: string, one: (r: Record<string, unknown>, where: string) => T): T[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw new InvalidInput(`${field} must be an array`);
  if (v.length > MAX_POLICY_RULES) throw new InvalidInput(`${field}: at most ${MAX_POLICY_RULES} rules`);
  return v.map((r, i) => {
    if (typeof r !== 'object' || r === null) throw new InvalidInput(`${field}[${i}] must be an object`);
    return one(r as Record<string, unknown>, `${field}[${i}]`);
  });
}

/** A complete policy from a (possibly partial) input: missing fields take the defaults. */
export function validateApprovalPolicy(input: unknown): ApprovalPolicy {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new InvalidInput('the approval policy must be an object');
  const p = input as Record<string, unknown>;
  const known = new Set(Object.keys(DEFAULT_APPROVAL_POLICY));
  const unknown = Object.keys(p).filter((k) => !known.has(k));
  if (unknown.length > 0) throw new InvalidInput(`unknown approval policy field(s): ${unknown.join(', ')}`);
  const selfApproval = p.self_approval ?? DEFAULT_APPROVAL_POLICY.self_approval;
  if (!SELF_APPROVAL.includes(selfApproval as SelfApproval)) throw new InvalidInput('self_approval must be counted or not-counted');
  const lifetime = p.max_approval_lifetime_ms ?? DEFAULT_APPROVAL_POLICY.max_approval_lifetime_ms;
  if (typeof lifetime !== 'number' || !Number.isInteger(lifetime) || lifetime < 1000 || lifetime > MAX_APPROVAL_TTL_MS)
    throw new InvalidInput('max_approval_lifetime_ms must be an integer from 1 second to 365 days');
  return {
    min_quorum: validateQuorum(p.min_quorum ?? DEFAULT_APPROVAL_POLICY.min_quorum),
    quorum_rules: rules(p.quorum_rules, 'quorum_rules', (r, w) => ({
      match: validateMatch(r.match ?? {}, w),
      quorum: validateQuorum(r.quorum),
    })),
    self_approval: selfApproval as SelfApproval,
    max_approval_lifetime_ms: lifetime,
    evidence_rules: rules(p.evidence_rules, 'evidence_rules', (r, w) => {
      const pattern = validateText(`${w}.pattern`, r.pattern, { min: 1, max: MAX_EVIDENCE_PATTERN });
      compileEvidencePattern(pattern);
      return { match: validateMatch(r.match ?? {}, w), pattern };
    }),
  };
}

export function policyMatches(m: PolicyMatch, head: Pick<HeadItem, 'kind' | 'labels'>): boolean {
  if (m.kind !== undefined && m.kind !== head.kind) return false;
  return Object.entries(m.labels ?? {}).every(([k, v]) => head.labels?.[k] === v);
}

/** The policy one artifact's decisions are judged under (the rule: creator may raise, never lower). */
export function effectivePolicy(state: ApprovalPolicyState, head: Pick<HeadItem, 'kind' | 'labels' | 'quorum'>): EffectivePolicy {
  const p = state.policy;
  const installationQuorum = Math.max(p.min_quorum, ...p.quorum_rules.filter((r) => policyMatches(r.match, head)).map((r) => r.quorum));
  return {
    version: state.version,
    hash: state.hash,
    quorum: Math.max(installationQuorum, head.quorum),
    installation_quorum: installationQuorum,
    artifact_quorum: head.quorum,
    self_approval: p.self_approval,
    max_approval_lifetime_ms: p.max_approval_lifetime_ms,
    evidence_patterns: p.evidence_rules.filter((r) => policyMatches(r.match, head)).map((r) => r.pattern),
  };
}

/** The patterns `evidence` fails (empty: it satisfies the policy). */
export function unmetEvidence(patterns: readonly string[], evidence: string): string[] {
  return patterns.filter((p) => !compileEvidencePattern(p).test(evidence));
}

const CURRENT_KEY = { PK: APPROVAL_POLICY_PK, SK: APPROVAL_POLICY_CURRENT_SK };

function defaultState(): ApprovalPolicyState {
  return { version: 0, hash: policyHash(DEFAULT_APPROVAL_POLICY), policy: DEFAULT_APPROVAL_POLICY, updated_at: null, updated_by: null };
}

/**
 * The policy the rules enforce: this node's cached answer (policy-cache.ts: a change made on another
 * node is in force here within ALP_POLICY_CACHE_MS, default 5 s; at once on the node that made it).
 */
export function approvalPolicyInForce(ctx: Pick<ServiceContext, 'items' | 'clock'>): Promise<ApprovalPolicyState> {
  return policyCacheOf<ApprovalPolicyState>(ctx.items).lookup(ctx.clock, () => readApprovalPolicy(ctx));
}

/** The policy as stored now (a strongly consistent read of one item; the default policy when never set). */
export async function readApprovalPolicy(ctx: Pick<ServiceContext, 'items'>): Promise<ApprovalPolicyState> {
  const item = await ctx.items.get(CURRENT_KEY, { consistent: true });
  if (!item) return defaultState();
  return {
    version: item.version as number,
    hash: item.hash as Digest,
    policy: item.policy as ApprovalPolicy,
    updated_at: item.updated_at as string,
    updated_by: item.updated_by as Principal,
  };
}

export interface SetPolicyOptions {
  /** Refuse (CONFLICT, reason POLICY_CHANGED) unless the policy in force is still this version. */
  expectedVersion?: number | undefined;
  reason?: string | undefined;
}

export interface SetPolicyResult extends ApprovalPolicyState {
  /** false when the policy given is the one in force (nothing written, no log entry). */
  changed: boolean;
}

/** Replaces the policy (humans and the local operator only); the change and its log entry in one transaction. */
export async function setApprovalPolicy(
  ctx: ServiceContext,
  actor: Principal,
  input: unknown,
  opts: SetPolicyOptions = {},
): Promise<SetPolicyResult> {
  assertActor('setApprovalPolicy', actor);
  const policy = validateApprovalPolicy(input);
  const reason = opts.reason === undefined ? undefined : validateText('reason', opts.reason, { min: 0, max: 1000 });
  const current = await readApprovalPolicy(ctx);
  if (opts.expectedVersion !== undefined && opts.expectedVersion !== current.version)
    throw changedSince(opts.expectedVersion, current.version);
  const hash = policyHash(policy);
  if (hash === current.hash) return { ...current, changed: false };
  const at = ctx.clock.now().toISOString();
  const by = { id: actor.id, kind: actor.kind };
  const next: ApprovalPolicyState = { version: current.version + 1, hash, policy, updated_at: at, updated_by: by };
  const item: Item = { ...CURRENT_KEY, type: 'approval_policy', ...next };
  const op: TransactOp = { op: 'put', item, condition: current.version === 0 ? cond.notExists() : cond.eq('version', current.version) };
  try {
    await commitApprovalPolicyChange(ctx, [op], {
      version: next.version,
      before: current.policy as unknown as Record<string, unknown>,
      after: policy as unknown as Record<string, unknown>,
      before_hash: current.hash,
      after_hash: hash,
      by,
      reason,
    });
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 0) throw changedSince(current.version, -1);
    throw e;
  }
  policyCacheOf<ApprovalPolicyState>(ctx.items).remember(next, ctx.clock);
  return { ...next, changed: true };
}

function changedSince(expected: number, now: number): Conflict {
  return new Conflict(
    `the approval policy changed since version ${expected} was read${now >= 0 ? ` (now version ${now})` : ''}: read it again (alp policy show) and retry`,
    { reason: 'POLICY_CHANGED', expected_version: expected, ...(now >= 0 ? { version: now } : {}) },
  );
}

/** Every change, oldest first: the stored entries without their item keys (`alp policy log`, `GET /v1/policy/log`). */
export async function approvalPolicyLog(ctx: Pick<ServiceContext, 'items'>): Promise<ApprovalPolicyLogEvent[]> {
  const out: ApprovalPolicyLogEvent[] = [];
  for await (const e of readApprovalPolicyLog(ctx)) {
    const { PK: _pk, SK: _sk, type: _type, ...entry } = e as ApprovalPolicyLogEvent & Record<string, unknown>;
    out.push(entry as ApprovalPolicyLogEvent);
  }
  return out;
}
