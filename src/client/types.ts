/**
 * The client's request and response types: `Static<…>` of the route contract's TypeBox schemas
 * (api/contract.ts), the same schemas the server validates and serializes with. Nothing here is
 * written by hand but the option objects that rename a query field for callers (labels as a map).
 */
import type { Static, TSchema } from '@sinclair/typebox';
import type { RouteId } from '../api/access.ts';
import type { Contract } from '../api/contract.ts';
import type * as S from '../api/schemas.ts';

type SchemaOf<K extends RouteId> = Contract[K]['schema'];
type PartOf<K extends RouteId, P extends string> = SchemaOf<K> extends { readonly [Q in P]: infer T extends TSchema } ? Static<T> : never;

/** The JSON body of the route's success answer (each route has exactly one). */
export type ResponseOf<K extends RouteId> =
  SchemaOf<K> extends { readonly response: infer R } ? (R[keyof R] extends infer T extends TSchema ? Static<T> : never) : never;
export type QueryOf<K extends RouteId> = PartOf<K, 'querystring'>;
export type BodyOf<K extends RouteId> = PartOf<K, 'body'>;
export type ParamsOf<K extends RouteId> = PartOf<K, 'params'>;

export type Principal = Static<typeof S.PrincipalSchema>;
export type PrincipalKind = Principal['kind'];
export type VersionState = Static<typeof S.StateName>;
export type OutputName = Static<typeof S.OutputName>;
export type Version = Static<typeof S.VersionSchema>;
export type Artifact = Static<typeof S.ArtifactSchema>;
export type ArtifactWithVersions = ResponseOf<'showArtifact'>;
export type ArtifactPage = ResponseOf<'listArtifacts'>;
export type VersionList = ResponseOf<'listVersions'>;
export type History = ResponseOf<'history'>;
export type HistoryEntry = History['entries'][number];
export type Verification = ResponseOf<'verification'>;
export type ApprovalList = ResponseOf<'listApprovals'>;
export type Approval = ApprovalList['approvals'][number];
export type DecisionResult = ResponseOf<'decide'>;
export type Execution = ResponseOf<'showExecution'>;
export type ExecutionList = ResponseOf<'listExecutions'>;
export type OutputRecord = ResponseOf<'uploadOutput'>;
export type CompensationResult = ResponseOf<'compensate'>;
export type ProvenanceChain = Static<typeof S.ProvenanceChain>;
export type ProvenanceStep = ResponseOf<'addProvenance'>;
export type InTotoStatement = Static<typeof S.InTotoStatement>;
export type DsseEnvelope = Static<typeof S.DsseEnvelope>;
export type KeyList = ResponseOf<'keys'>;
export type PublicKey = KeyList['keys'][number];
export type LogInclusion = ResponseOf<'logInclusion'>;
export type LogConsistency = ResponseOf<'logConsistency'>;
export type LogEntry = ResponseOf<'logEntry'>;
export type AttestationList = ResponseOf<'listAttestations'>;
export type DecisionAttestation = AttestationList['attestations'][number];
export type ArchiveResult = ResponseOf<'archive'>;
export type QueryPage = ResponseOf<'queryTransitions'>;
export type WhoAmI = ResponseOf<'whoami'>;
export type Health = ResponseOf<'health'>;
export type Ready = ResponseOf<'ready'>;
export type StateCounts = ResponseOf<'statusStates'>;
export type OperationsStatus = ResponseOf<'statusOperations'>;
export type Problem = S.ProblemDocument;
/** A version where one is taken: its number, or `@` and one of the artifact's aliases. */
export type VersionRef = number | `@${string}`;
export type AliasList = ResponseOf<'listAliases'>;
export type AliasView = AliasList['aliases'][number];
export type AliasChange = ResponseOf<'setAlias'>;
export type AliasRemoval = ResponseOf<'removeAlias'>;
export type SearchPage = ResponseOf<'search'>;
export type SearchHit = SearchPage['items'][number];
/** `search`'s query, with the labels as a map (sent as repeated `label=k=v`). */
export type SearchOptions = Omit<QueryOf<'search'>, 'label'> & { labels?: Record<string, string> | undefined };

export type ListArtifactsQuery = QueryOf<'listArtifacts'>;
export type TransitionBody = BodyOf<'transition'>;
export type DecisionBody = BodyOf<'decide'>;
export type PolicyState = ResponseOf<'getPolicy'>;
export type PolicyReview = NonNullable<PolicyState['review']>;
export type ApprovalPolicyInput = BodyOf<'setPolicy'>['policy'];
export type PolicyLog = ResponseOf<'policyLog'>;
export type PolicyLogEvent = PolicyLog['events'][number];
export type FinishBody = BodyOf<'finishExecution'>;
export type ProvenanceBody = BodyOf<'addProvenance'>;
export type DateQuery = QueryOf<'queryTransitions'>;
export type ApproverQuery = QueryOf<'queryApprovals'>;
export type StateQuery = QueryOf<'queryCompensations'>;
export type CompensationQuery = QueryOf<'compensate'>;

/** `createArtifact`'s query, with the labels as a map (sent as repeated `label=k=v`). */
export type CreateArtifactOptions = Omit<QueryOf<'createArtifact'>, 'label' | 'name' | 'filename'> & {
  name: string;
  filename: string;
  labels?: Record<string, string> | undefined;
  /** Sent as `Idempotency-Key`; one is generated when not given, so a retry never makes a second artifact. */
  idempotencyKey?: string | undefined;
};
export type AddVersionOptions = { filename: string; idempotencyKey?: string | undefined };

/** The JSON document of a small create or version (`createArtifactFromText`, `addVersionFromText`). */
export type JsonBodyOf<K extends RouteId> = Contract[K] extends { readonly jsonBody: infer T extends TSchema } ? Static<T> : never;
export type TextArtifact = JsonBodyOf<'createArtifact'> & { idempotencyKey?: string | undefined };
export type TextVersion = JsonBodyOf<'addVersion'> & { idempotencyKey?: string | undefined };
