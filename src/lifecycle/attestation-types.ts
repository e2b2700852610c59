/**
 * The type URIs of ALP's signed statements (issue 20 item 3), one place for the code and the docs
 * (docs/audit-format.md §5). ALP's own types are URNs in the `urn:alp:` namespace the API already uses
 * for its problem types: an installation has no domain of its own, and an https URI would claim one
 * the project does not own. They are names, not addresses: nothing needs to resolve them.
 */

export const IN_TOTO_STATEMENT_V1 = 'https://in-toto.io/Statement/v1';
export const SLSA_PROVENANCE_V1 = 'https://slsa.dev/provenance/v1';

/** SLSA `buildType`: the build is the artifact's ordered, hash-chained provenance steps (lifecycle/provenance.ts). */
export const ALP_STEPS_BUILD_TYPE = 'urn:alp:provenance:steps:v1';

/** The predicate type of a human decision (approve or reject) on a version. */
export const ALP_DECISION_PREDICATE_TYPE = 'urn:alp:attestation:decision:v1';

/** SLSA `builder.id`: the installation that recorded the steps and signs the statement. */
export function alpBuilderId(installationId: string): string {
  return `urn:alp:installation:${installationId}`;
}

/** A digest as a resource URI (dependencies, and subjects that are not a version of the artifact). */
export function digestUri(digest: string): string {
  return `urn:alp:digest:${digest}`;
}
