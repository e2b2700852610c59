/**
 * The HTTP route table: every route, its method and path, and the operation it performs. Who may
 * perform an operation is decided by the shared access table (src/lifecycle/access.ts), which the CLI
 * and the services ask too; a route only names its operation. Routes are registered from this table
 * and the authorization test iterates over it (every route × every principal kind).
 *
 * Retention, recovery, the telemetry claim and token administration have no route at all: they are
 * the local operator's (their read-only figures are in /v1/status/operations).
 */
import { kindsFor, type Operation } from '../lifecycle/access.ts';
import type { PrincipalKind } from '../lifecycle/model.ts';

export type Access = 'public' | readonly PrincipalKind[];

export type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE';

export interface RouteSpec {
  method: Method;
  url: string;
  /** The operation of the shared access table, or public (no token). */
  operation: Operation | 'public';
  access: Access;
}

function route(method: Method, url: string, operation: Operation | 'public'): RouteSpec {
  return { method, url, operation, access: operation === 'public' ? 'public' : kindsFor(operation) };
}

export const ROUTES = {
  health: route('GET', '/healthz', 'public'),
  ready: route('GET', '/readyz', 'public'),
  metrics: route('GET', '/metrics', 'public'),
  openapi: route('GET', '/openapi.json', 'public'),
  docs: route('GET', '/docs', 'public'),
  keys: route('GET', '/v1/keys', 'public'),
  logCheckpoint: route('GET', '/v1/log/checkpoint', 'read'),
  logInclusion: route('GET', '/v1/log/proof/inclusion', 'read'),
  logConsistency: route('GET', '/v1/log/proof/consistency', 'read'),
  logEntry: route('GET', '/v1/log/entry', 'read'),

  whoami: route('GET', '/v1/whoami', 'read'),
  listArtifacts: route('GET', '/v1/artifacts', 'read'),
  createArtifact: route('POST', '/v1/artifacts', 'createArtifact'),
  showArtifact: route('GET', '/v1/artifacts/:id', 'read'),
  history: route('GET', '/v1/artifacts/:id/history', 'read'),
  verification: route('GET', '/v1/artifacts/:id/verification', 'read'),
  listVersions: route('GET', '/v1/artifacts/:id/versions', 'read'),
  addVersion: route('POST', '/v1/artifacts/:id/versions', 'addVersion'),
  showVersion: route('GET', '/v1/artifacts/:id/versions/:v', 'read'),
  getContent: route('GET', '/v1/artifacts/:id/versions/:v/content', 'read'),
  headContent: route('HEAD', '/v1/artifacts/:id/versions/:v/content', 'read'),
  transition: route('POST', '/v1/artifacts/:id/versions/:v/transitions', 'propose'),
  decide: route('POST', '/v1/artifacts/:id/versions/:v/approvals', 'decide'),
  listApprovals: route('GET', '/v1/artifacts/:id/approvals', 'read'),
  listAttestations: route('GET', '/v1/artifacts/:id/versions/:v/attestations', 'read'),
  startExecution: route('POST', '/v1/artifacts/:id/versions/:v/executions', 'startExecution'),
  listExecutions: route('GET', '/v1/artifacts/:id/executions', 'read'),
  compensate: route('POST', '/v1/artifacts/:id/versions/:v/compensations', 'compensate'),
  getProvenance: route('GET', '/v1/artifacts/:id/provenance', 'read'),
  addProvenance: route('POST', '/v1/artifacts/:id/provenance', 'addProvenance'),
  archive: route('POST', '/v1/artifacts/:id/archive', 'archive'),
  listAliases: route('GET', '/v1/artifacts/:id/aliases', 'read'),
  setAlias: route('PUT', '/v1/artifacts/:id/aliases/:name', 'moveAlias'),
  removeAlias: route('DELETE', '/v1/artifacts/:id/aliases/:name', 'moveAlias'),
  search: route('GET', '/v1/search', 'read'),
  showExecution: route('GET', '/v1/executions/:run', 'read'),
  uploadOutput: route('PUT', '/v1/executions/:run/:output', 'uploadOutput'),
  getOutput: route('GET', '/v1/executions/:run/:output', 'read'),
  headOutput: route('HEAD', '/v1/executions/:run/:output', 'read'),
  finishExecution: route('POST', '/v1/executions/:run/finish', 'finishExecution'),
  queryTransitions: route('GET', '/v1/query/transitions', 'read'),
  queryApprovals: route('GET', '/v1/query/approvals', 'read'),
  queryRuns: route('GET', '/v1/query/runs', 'read'),
  queryProvenance: route('GET', '/v1/query/provenance', 'read'),
  queryCompensations: route('GET', '/v1/query/compensations', 'read'),
  statusStates: route('GET', '/v1/status/states', 'read'),
  statusOperations: route('GET', '/v1/status/operations', 'read'),
  getPolicy: route('GET', '/v1/policy', 'read'),
  setPolicy: route('PUT', '/v1/policy', 'setApprovalPolicy'),
  policyLog: route('GET', '/v1/policy/log', 'read'),
} as const satisfies Record<string, RouteSpec>;

export type RouteId = keyof typeof ROUTES;

export function routeSpec(id: RouteId): RouteSpec {
  return ROUTES[id];
}

/** Whether a principal of `kind` may call the route (public routes need no principal). */
export function allows(id: RouteId, kind: PrincipalKind | undefined): boolean {
  const access = ROUTES[id].access as Access;
  if (access === 'public') return true;
  return kind !== undefined && access.includes(kind);
}

export function describeAccess(id: RouteId): string {
  const access = ROUTES[id].access as Access;
  return access === 'public' ? 'public (no token)' : `bearer token of kind ${access.join(', ')}`;
}
