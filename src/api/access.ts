/**
 * The authorization matrix: every HTTP route, its method and path, and the principal kinds that may
 * call it. Routes are registered from this table and the authorization test iterates over it, so the
 * table is the one place that says who may do what over HTTP.
 *
 * - `human`: everything an agent may do, plus approving, rejecting and archiving.
 * - `agent`: create artifacts and versions, propose and withdraw, append provenance, start and finish
 *   executions, upload their outputs, create compensations; read everything.
 * - `service`: read only (exporters, dashboards).
 *
 * Retention, recovery, the telemetry claim and token administration have no route at all (their
 * read-only figures are in /v1/status/operations).
 */
import type { PrincipalKind } from '../lifecycle/model.ts';

export type Access = 'public' | readonly PrincipalKind[];

const READERS = ['human', 'agent', 'service'] as const;
const WRITERS = ['human', 'agent'] as const;
const HUMANS = ['human'] as const;

export type Method = 'GET' | 'HEAD' | 'POST' | 'PUT';

export interface RouteSpec {
  method: Method;
  url: string;
  access: Access;
}

export const ROUTES = {
  health: { method: 'GET', url: '/healthz', access: 'public' },
  ready: { method: 'GET', url: '/readyz', access: 'public' },
  metrics: { method: 'GET', url: '/metrics', access: 'public' },
  openapi: { method: 'GET', url: '/openapi.json', access: 'public' },
  docs: { method: 'GET', url: '/docs', access: 'public' },

  whoami: { method: 'GET', url: '/v1/whoami', access: READERS },
  listArtifacts: { method: 'GET', url: '/v1/artifacts', access: READERS },
  createArtifact: { method: 'POST', url: '/v1/artifacts', access: WRITERS },
  showArtifact: { method: 'GET', url: '/v1/artifacts/:id', access: READERS },
  history: { method: 'GET', url: '/v1/artifacts/:id/history', access: READERS },
  verification: { method: 'GET', url: '/v1/artifacts/:id/verification', access: READERS },
  listVersions: { method: 'GET', url: '/v1/artifacts/:id/versions', access: READERS },
  addVersion: { method: 'POST', url: '/v1/artifacts/:id/versions', access: WRITERS },
  showVersion: { method: 'GET', url: '/v1/artifacts/:id/versions/:v', access: READERS },
  getContent: { method: 'GET', url: '/v1/artifacts/:id/versions/:v/content', access: READERS },
  headContent: { method: 'HEAD', url: '/v1/artifacts/:id/versions/:v/content', access: READERS },
  transition: { method: 'POST', url: '/v1/artifacts/:id/versions/:v/transitions', access: WRITERS },
  decide: { method: 'POST', url: '/v1/artifacts/:id/versions/:v/approvals', access: HUMANS },
  listApprovals: { method: 'GET', url: '/v1/artifacts/:id/approvals', access: READERS },
  startExecution: { method: 'POST', url: '/v1/artifacts/:id/versions/:v/executions', access: WRITERS },
  listExecutions: { method: 'GET', url: '/v1/artifacts/:id/executions', access: READERS },
  compensate: { method: 'POST', url: '/v1/artifacts/:id/versions/:v/compensations', access: WRITERS },
  getProvenance: { method: 'GET', url: '/v1/artifacts/:id/provenance', access: READERS },
  addProvenance: { method: 'POST', url: '/v1/artifacts/:id/provenance', access: WRITERS },
  archive: { method: 'POST', url: '/v1/artifacts/:id/archive', access: HUMANS },
  showExecution: { method: 'GET', url: '/v1/executions/:run', access: READERS },
  uploadOutput: { method: 'PUT', url: '/v1/executions/:run/:output', access: WRITERS },
  getOutput: { method: 'GET', url: '/v1/executions/:run/:output', access: READERS },
  headOutput: { method: 'HEAD', url: '/v1/executions/:run/:output', access: READERS },
  finishExecution: { method: 'POST', url: '/v1/executions/:run/finish', access: WRITERS },
  queryTransitions: { method: 'GET', url: '/v1/query/transitions', access: READERS },
  queryApprovals: { method: 'GET', url: '/v1/query/approvals', access: READERS },
  queryRuns: { method: 'GET', url: '/v1/query/runs', access: READERS },
  queryProvenance: { method: 'GET', url: '/v1/query/provenance', access: READERS },
  queryCompensations: { method: 'GET', url: '/v1/query/compensations', access: READERS },
  statusStates: { method: 'GET', url: '/v1/status/states', access: READERS },
  statusOperations: { method: 'GET', url: '/v1/status/operations', access: READERS },
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
