/**
 * The installation's public key and the signed attestations (issue 20 items 2–3): `GET /v1/keys`
 * (public: what a verifier pins) and every decision on a version as a DSSE envelope. The signed SLSA
 * provenance is `GET …/provenance?format=dsse` (routes/lifecycle.ts).
 */
import { installationKeys } from '../../audit/installation-keys.ts';
import { resolveVersionRef } from '../../lifecycle/aliases.ts';
import { decisionAttestations } from '../../lifecycle/attestations.ts';
import { CONTRACT } from '../contract.ts';
import { type AnyRouteDef, type Api, defineRoute } from '../define.ts';

export function attestationRoutes(api: Api): AnyRouteDef[] {
  const { ctx } = api;
  return [
    defineRoute({
      id: 'keys',
      summary: 'The installation’s public signing key: verifier key, raw Ed25519 key and fingerprint',
      description:
        'Pin it out of band. It verifies the DSSE envelopes of the attestations (raw key; keyid = fingerprint) and signed notes (verifier key). 404 NOT_FOUND (reason NO_SIGNING_KEY) when the installation has no key configured.',
      tags: ['attestations'],
      schema: CONTRACT.keys.schema,
      handler: async () => installationKeys(ctx),
    }),
    defineRoute({
      id: 'listAttestations',
      summary: 'Every approval and rejection of a version as an in-toto Statement in a signed DSSE envelope',
      description:
        'Subject: the reviewed digest. predicateType urn:alp:attestation:decision:v1 (approver, decision, evidence, expiry, round, the policy in force, the audit entry). Verify with GET /v1/keys.',
      tags: ['attestations'],
      schema: CONTRACT.listAttestations.schema,
      handler: async (req) => {
        const n = await resolveVersionRef(ctx, req.params.id, req.params.v);
        return { artifact_id: req.params.id, version: n, attestations: await decisionAttestations(ctx, req.params.id, n) };
      },
    }),
  ];
}
