/**
 * Signed attestations (issue 20 item 3): every human decision on a version, and the artifact's SLSA
 * provenance, as in-toto Statements v1 in DSSE envelopes signed by the installation key
 * (audit/installation-keys.ts). Anyone holding the public key (`GET /v1/keys`) can check them with
 * any DSSE/Ed25519 implementation; docs/audit-format.md §5 gives the formats.
 *
 * A decision statement's subject is the digest the human reviewed (the approval's `content_hash`),
 * named `<artifact name>@v<n>/<filename>`; its predicate (`urn:alp:attestation:decision:v1`) records
 * the approver, the decision, the evidence reference, the expiry, the proposal round, whether it
 * counted toward the quorum, the policy in force (the artifact's hash-chained policy, and the
 * installation approval policy recorded on the entry at decision time) and the audit entry it was read from (seq and hash), which
 * binds the statement to the artifact's hash chain.
 *
 * Envelopes are signed when asked for, from the stored (hash-chained) entries: the same entry always
 * gives the same envelope. An entry whose stored hash does not match its fields is refused
 * (INTEGRITY): the key never vouches for a record that fails its own check.
 */
import { auditHash, readHead } from '../audit/chain.ts';
import type { DsseEnvelope } from '../audit/dsse.ts';
import { signStatement } from '../audit/installation-keys.ts';
import { hotChainedPolicy, type Policy, policyOf } from '../audit/policy.ts';
import { digestHex } from '../core/digest.ts';
import { IntegrityError } from '../core/errors.ts';
import type { Item } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { readInstallation } from '../system/installation.ts';
import { type ApprovalRecord, DEFAULT_APPROVAL_TTL_MS, listApprovals, MAX_APPROVAL_TTL_MS } from './approvals.ts';
import { ALP_DECISION_PREDICATE_TYPE, alpBuilderId, IN_TOTO_STATEMENT_V1 } from './attestation-types.ts';
import type { HeadItem, Principal, VersionItem } from './model.ts';
import { inTotoStatement } from './provenance.ts';
import { readVersion } from './versions.ts';

export interface DecisionAttestation {
  /** The approval's audit entry (its seq in the artifact's chain). */
  seq: number;
  decision: ApprovalRecord['decision'];
  actor: Principal;
  timestamp: string;
  envelope: DsseEnvelope;
}

/**
 * What a decision was judged under: the artifact's chained policy, and the installation approval
 * policy recorded on the approval entry at decision time (`approval_policy`; the policy can change
 * later, the entry cannot). Decisions made before installation policies existed have none recorded:
 * `installation_policy` is null and the quorum was the artifact's.
 */
function policyInForce(policy: Policy, approval: ApprovalRecord): Record<string, unknown> {
  const recorded = approval.approval_policy;
  const maxMs = recorded?.max_approval_lifetime_ms ?? MAX_APPROVAL_TTL_MS;
  return {
    quorum: policy.quorum,
    kind: policy.kind,
    labels: policy.labels,
    approval_lifetime_default_ms: Math.min(DEFAULT_APPROVAL_TTL_MS, maxMs),
    approval_lifetime_max_ms: maxMs,
    effective_quorum: recorded?.quorum ?? policy.quorum,
    installation_policy: recorded
      ? {
          version: recorded.version,
          hash: recorded.hash,
          quorum: recorded.installation_quorum,
          self_approval: recorded.self_approval,
          max_approval_lifetime_ms: recorded.max_approval_lifetime_ms,
          evidence_patterns: recorded.evidence_patterns,
        }
      : null,
  };
}

/** The in-toto Statement of one decision. */
export function decisionStatement(
  head: Pick<HeadItem, 'artifact_id' | 'name'>,
  version: Pick<VersionItem, 'version' | 'filename' | 'content_hash'>,
  approval: ApprovalRecord,
  policy: Policy,
  installationId: string,
): Record<string, unknown> {
  return {
    _type: IN_TOTO_STATEMENT_V1,
    subject: [
      {
        name: `${head.name}@v${version.version}/${version.filename}`,
        digest: { sha256: digestHex(approval.content_hash) },
        annotations: { artifact_id: head.artifact_id, version: version.version },
      },
    ],
    predicateType: ALP_DECISION_PREDICATE_TYPE,
    predicate: {
      decision: approval.decision,
      approver: { id: approval.actor.id, kind: approval.actor.kind },
      evidence_ref: approval.evidence_ref,
      decided_at: approval.timestamp,
      expires_at: approval.expires_at,
      round: approval.round,
      counted: approval.counted,
      ...(approval.not_counted_reason === undefined ? {} : { not_counted_reason: approval.not_counted_reason }),
      ...(approval.comment === undefined ? {} : { comment: approval.comment }),
      reviewed_digest: approval.content_hash,
      version_digest: version.content_hash,
      policy: policyInForce(policy, approval),
      audit_entry: { artifact_id: head.artifact_id, seq: approval.seq, hash: (approval as unknown as Item).hash },
      installation: alpBuilderId(installationId),
    },
  };
}

/** Every decision on version `n`, oldest first, each as a signed envelope. */
export async function decisionAttestations(ctx: ServiceContext, artifactId: string, n: number): Promise<DecisionAttestation[]> {
  const head = await readHead(ctx, artifactId);
  const version = await readVersion(ctx.items, artifactId, n);
  const installationId = await requireInstallationId(ctx);
  const policy = (await hotChainedPolicy(ctx, artifactId)) ?? policyOf(head);
  const decisions = (await listApprovals(ctx, artifactId)).filter((a) => a.version === n).sort((a, b) => a.seq - b.seq);
  const out: DecisionAttestation[] = [];
  for (const approval of decisions) {
    assertEntryIntact(approval);
    out.push({
      seq: approval.seq,
      decision: approval.decision,
      actor: approval.actor,
      timestamp: approval.timestamp,
      envelope: await signStatement(ctx, decisionStatement(head, version, approval, policy, installationId)),
    });
  }
  return out;
}

/** The SLSA provenance statement (provenance.ts) as a signed envelope. */
export async function signedProvenance(ctx: ServiceContext, artifactId: string): Promise<DsseEnvelope> {
  return signStatement(ctx, await inTotoStatement(ctx, artifactId));
}

function assertEntryIntact(approval: ApprovalRecord): void {
  const item = approval as unknown as Item;
  if (auditHash(item) !== item.hash)
    throw new IntegrityError(
      `the approval entry seq ${approval.seq} of artifact ${approval.artifact_id} does not match its hash: refusing to sign it (run alp audit verify)`,
      { artifact_id: approval.artifact_id, seq: approval.seq },
    );
}

async function requireInstallationId(ctx: ServiceContext): Promise<string> {
  const installation = await readInstallation(ctx);
  if (!installation) throw new IntegrityError('no installation record: cannot name the installation that signs');
  return installation.installation_id;
}
