/**
 * The route contract: for every route of the table (access.ts: method, path, who may call it) the
 * schemas of its path parameters, query, headers, body and responses, and whether it streams a raw
 * body. The server registers its routes with these schemas (routes/*.ts) and the typed client
 * (src/client/) takes its request and response types from them (`Static<…>`), so neither side has a
 * copy of the other's shapes. The client imports this module as types only (`import type`): the status
 * schemas live beside their route (routes/status.ts), whose module is not browser-safe.
 */
import type { TSchema } from '@sinclair/typebox';
import type { RouteId } from './access.ts';
import { LOG_CONTRACT } from './routes/log.ts';
import { POLICY_CONTRACT } from './routes/policy.ts';
import { OperationsStatus, StateCounts } from './routes/status.ts';
import {
  AliasBody,
  AliasChangeResult,
  AliasList,
  AliasParams,
  AliasRemoveQuery,
  AliasRemoveResult,
  ApprovalList,
  ApproverQuery,
  ArchiveResult,
  ArtifactPage,
  ArtifactWithVersions,
  AttestationList,
  CompensationQuery,
  CompensationResult,
  CreateHeaders,
  CreateQuery,
  DateQuery,
  DecisionBody,
  DecisionResult,
  ExecutionList,
  ExecutionResult,
  FilenameQuery,
  FinishBody,
  Health,
  History,
  IdParams,
  JsonCreateBody,
  JsonVersionBody,
  KeyList,
  ListQuery,
  OutputParams,
  OutputRecord,
  ProvenanceBody,
  ProvenanceQuery,
  ProvenanceResult,
  ProvenanceStep,
  QueryPage,
  Ready,
  RunParams,
  SearchPage,
  SearchQuery,
  StateQuery,
  TransitionBody,
  UploadHeaders,
  Verification,
  VersionList,
  VersionParams,
  VersionSchema,
  WhoAmI,
} from './schemas.ts';

export interface ContractEntry {
  schema: {
    params?: TSchema;
    querystring?: TSchema;
    headers?: TSchema;
    body?: TSchema;
    response?: Record<number, TSchema>;
  };
  /** The request body is raw content, streamed to the content store. */
  upload?: true;
  /** An upload that also takes its content as one JSON document (`Content-Type: application/json`, json-upload.ts). */
  jsonBody?: TSchema;
  /** The response body is raw, verified content (ETag and Repr-Digest carry its digest). */
  download?: true;
  /** The response is a document that is not JSON of a schema (its media type). */
  produces?: string;
}

const download = <P extends TSchema>(params: P) => ({ schema: { params }, download: true }) as const;

export const CONTRACT = {
  health: { schema: { response: { 200: Health } } },
  ready: { schema: { response: { 200: Ready } } },
  metrics: { schema: {}, produces: 'text/plain; version=0.0.4; charset=utf-8' },
  openapi: { schema: {}, produces: 'application/json' },
  docs: { schema: {}, produces: 'text/html; charset=utf-8' },
  keys: { schema: { response: { 200: KeyList } } },

  whoami: { schema: { response: { 200: WhoAmI } } },
  listArtifacts: { schema: { querystring: ListQuery, response: { 200: ArtifactPage } } },
  createArtifact: {
    schema: { querystring: CreateQuery, headers: CreateHeaders, response: { 201: VersionSchema } },
    upload: true,
    jsonBody: JsonCreateBody,
  },
  showArtifact: { schema: { params: IdParams, response: { 200: ArtifactWithVersions } } },
  history: { schema: { params: IdParams, response: { 200: History } } },
  verification: { schema: { params: IdParams, response: { 200: Verification } } },
  listVersions: { schema: { params: IdParams, response: { 200: VersionList } } },
  addVersion: {
    schema: { params: IdParams, querystring: FilenameQuery, headers: CreateHeaders, response: { 201: VersionSchema } },
    upload: true,
    jsonBody: JsonVersionBody,
  },
  showVersion: { schema: { params: VersionParams, response: { 200: VersionSchema } } },
  getContent: download(VersionParams),
  headContent: download(VersionParams),
  transition: { schema: { params: VersionParams, body: TransitionBody, response: { 200: VersionSchema } } },
  decide: { schema: { params: VersionParams, body: DecisionBody, response: { 201: DecisionResult } } },
  listApprovals: { schema: { params: IdParams, response: { 200: ApprovalList } } },
  listAttestations: { schema: { params: VersionParams, response: { 200: AttestationList } } },
  startExecution: { schema: { params: VersionParams, response: { 201: ExecutionResult } } },
  listExecutions: { schema: { params: IdParams, response: { 200: ExecutionList } } },
  compensate: {
    schema: { params: VersionParams, querystring: CompensationQuery, headers: UploadHeaders, response: { 201: CompensationResult } },
    upload: true,
  },
  getProvenance: { schema: { params: IdParams, querystring: ProvenanceQuery, response: { 200: ProvenanceResult } } },
  addProvenance: { schema: { params: IdParams, body: ProvenanceBody, response: { 201: ProvenanceStep } } },
  archive: { schema: { params: IdParams, response: { 200: ArchiveResult } } },
  listAliases: { schema: { params: IdParams, response: { 200: AliasList } } },
  setAlias: { schema: { params: AliasParams, body: AliasBody, response: { 200: AliasChangeResult } } },
  removeAlias: { schema: { params: AliasParams, querystring: AliasRemoveQuery, response: { 200: AliasRemoveResult } } },
  search: { schema: { querystring: SearchQuery, response: { 200: SearchPage } } },
  showExecution: { schema: { params: RunParams, response: { 200: ExecutionResult } } },
  uploadOutput: { schema: { params: OutputParams, headers: UploadHeaders, response: { 201: OutputRecord } }, upload: true },
  getOutput: download(OutputParams),
  headOutput: download(OutputParams),
  finishExecution: { schema: { params: RunParams, body: FinishBody, response: { 200: ExecutionResult } } },
  queryTransitions: { schema: { querystring: DateQuery, response: { 200: QueryPage } } },
  queryApprovals: { schema: { querystring: ApproverQuery, response: { 200: QueryPage } } },
  queryRuns: { schema: { querystring: DateQuery, response: { 200: QueryPage } } },
  queryProvenance: { schema: { querystring: DateQuery, response: { 200: QueryPage } } },
  queryCompensations: { schema: { querystring: StateQuery, response: { 200: QueryPage } } },
  statusStates: { schema: { response: { 200: StateCounts } } },
  statusOperations: { schema: { response: { 200: OperationsStatus } } },
  ...POLICY_CONTRACT,
  ...LOG_CONTRACT,
} as const satisfies Record<RouteId, ContractEntry>;

export type Contract = typeof CONTRACT;
