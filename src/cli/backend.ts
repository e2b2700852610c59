/**
 * What the artifact, lifecycle, exec, provenance, history, query and policy commands call: one interface with
 * two implementations, chosen once per command from the global options (session.ts):
 *
 * - local (backend-local.ts): the services over the installation the storage options open;
 * - remote (backend-remote.ts): the typed HTTP client (`alp/client`) of an `alp serve`.
 *
 * Both answer with the API's views (the client's types, `Static<…>` of the route contract), so a
 * command renders one shape, prints the same output either way, and has no local/remote branch. The
 * rules stay where they are: the services (behind the HTTP routes too), and the CLI's own choices
 * (names, default versions: targets.ts) over the lookups below.
 */
import type * as T from '../client/types.ts';
import type { Digest } from '../core/digest.ts';
import type { IndexQuery } from '../lifecycle/queries.ts';

/** What the name and default-version rules of targets.ts read. */
export interface TargetLookup {
  /** Whether an artifact with this id exists. */
  artifactExists(id: string): Promise<boolean>;
  /** Artifacts with exactly this name, newest first (one page). */
  artifactsNamed(name: string, limit: number): Promise<T.ArtifactPage>;
  /** The state of one version ('unknown' if it cannot be read). */
  versionState(id: string, version: number): Promise<string>;
  /** Every version of the artifact, oldest first. */
  versions(id: string): Promise<T.Version[]>;
  /** The latest version. */
  latestVersion(id: string): Promise<T.Version>;
  /** The version an alias (`@prod`) names now. */
  aliasedVersion(id: string, ref: `@${string}`): Promise<T.Version>;
}

/** Content named on the command line: `--file PATH` (or `-` for stdin), the filename to record, the digest expected. */
export interface ContentSource {
  file: string;
  filename: string | undefined;
  digest?: Digest | undefined;
}

export interface CreateInput extends ContentSource {
  name: string;
  kind: string;
  labels: Record<string, string>;
  quorum?: number | undefined;
  idempotencyKey?: string | undefined;
}

export interface DecisionInput {
  decision: 'APPROVE' | 'REJECT';
  evidenceRef: string;
  /** The lifetime as given (`7d`), already checked by the command. */
  expiresIn: string;
  expiresInMs: number;
  contentHash?: string | undefined;
  comment?: string | undefined;
}

export interface FinishInput {
  status: string;
  exitCode: number;
  signal?: string | undefined;
}

export interface PageInput {
  limit?: number | undefined;
  cursor?: string | undefined;
}

export interface SearchInput extends PageInput {
  namePrefix?: string | undefined;
  labels: Record<string, string>;
  state?: string | undefined;
}

export interface Backend extends TargetLookup {
  createArtifact(input: CreateInput): Promise<T.Version>;
  addVersion(id: string, input: ContentSource & { idempotencyKey?: string | undefined }): Promise<T.Version>;
  showArtifact(id: string): Promise<T.ArtifactWithVersions>;
  listArtifacts(input: PageInput & { state?: string | undefined; name?: string | undefined }): Promise<T.ArtifactPage>;
  /** Writes the version's verified bytes to `out` (a file appears only once every byte verified; `-` is stdout). */
  saveContent(id: string, version: number, out: string): Promise<T.Version>;

  transition(id: string, version: number, to: string, reason: string | undefined): Promise<T.Version>;
  withdraw(id: string, version: number, reason: string | undefined): Promise<T.Version>;
  decide(id: string, version: number, input: DecisionInput): Promise<T.DecisionResult>;
  archive(id: string): Promise<T.ArchiveResult>;
  compensate(id: string, version: number, input: ContentSource & { reason?: string | undefined }): Promise<T.CompensationResult>;

  startExecution(id: string, version: number): Promise<T.Execution>;
  uploadOutput(run: string, output: string, source: ContentSource): Promise<T.OutputRecord>;
  finishExecution(run: string, input: FinishInput): Promise<T.Execution>;
  showExecution(run: string): Promise<T.Execution>;

  history(id: string): Promise<T.History>;
  addProvenance(id: string, step: T.ProvenanceBody): Promise<T.ProvenanceStep>;
  provenance(id: string): Promise<T.ProvenanceChain>;
  inToto(id: string): Promise<T.InTotoStatement>;
  /** The SLSA statement in a DSSE envelope signed by the installation key. */
  signedProvenance(id: string): Promise<T.DsseEnvelope>;
  /** Every decision on a version, each a signed in-toto statement (DSSE). */
  attestations(id: string, version: number): Promise<T.AttestationList>;
  /** The installation's public signing key. */
  keys(): Promise<T.KeyList>;
  /** Where entry `seq` of an artifact's audit chain is in the transparency log (its leaf, or pending). */
  logEntry(id: string, seq: number): Promise<T.LogEntry>;
  /** The inclusion proof of a leaf in the tree of `size` leaves (default: the committed size). */
  logInclusion(leaf: number, size?: number): Promise<T.LogInclusion>;
  /** The transparency log's signed checkpoint note. */
  logCheckpoint(): Promise<string>;
  query(kind: IndexQuery, key: string, page: PageInput): Promise<T.QueryPage>;

  listAliases(id: string): Promise<T.AliasList>;
  /** `version`: a number, or another alias. */
  setAlias(id: string, name: string, version: T.VersionRef, reason: string | undefined): Promise<T.AliasChange>;
  removeAlias(id: string, name: string, reason: string | undefined): Promise<T.AliasRemoval>;
  search(input: SearchInput): Promise<T.SearchPage>;
  /** Re-hashes every object the artifact names (ids only: `verify` takes no names). */
  verifyContent(id: string): Promise<T.Verification['content']>;

  /** The approval policy in force; with a version, also what it means for that version and the caller (`review`). */
  policy(review?: { artifactId: string; version: number }): Promise<T.PolicyState>;
  /** Replaces the approval policy (humans and the local operator only), refused unless `expectedVersion` is in force. */
  setPolicy(policy: Record<string, unknown>, opts: { expectedVersion: number; reason?: string | undefined }): Promise<T.PolicyState>;
  /** The approval policy log, oldest first. */
  policyLog(): Promise<T.PolicyLog>;
}
