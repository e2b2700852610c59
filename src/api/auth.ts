/**
 * Bearer authentication and the kind check. The token's sha256 names a principal (principals.ts);
 * the route table (access.ts) names the route's operation and the shared access table
 * (lifecycle/access.ts) says which kinds may perform it. Missing, unknown, revoked or expired token:
 * 401 (expiry judged on the server's injected clock); a known principal of the wrong kind: 403. Runs in onRequest, before any body byte is read. Over HTTP there
 * is no local operator: every caller is its token's principal.
 */
import type { FastifyRequest } from 'fastify';
import { Unauthenticated } from '../core/errors.ts';
import { assertMay } from '../lifecycle/access.ts';
import type { Principal } from '../lifecycle/model.ts';
import { resolveToken } from '../lifecycle/principals.ts';
import type { ServiceContext } from '../system/context.ts';
import { ROUTES, type RouteId } from './access.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    routeId?: RouteId;
  }
}

export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const m = /^\s*Bearer\s+([!-~]+)\s*$/i.exec(header);
  if (!m) throw new Unauthenticated('the Authorization header must be "Bearer <token>"');
  return m[1];
}

export async function authenticate(ctx: ServiceContext, request: FastifyRequest): Promise<void> {
  const id = request.routeOptions.config.routeId;
  if (id === undefined) return;
  const { operation } = ROUTES[id];
  if (operation === 'public') return;
  const token = bearerToken(request.headers.authorization);
  if (token === undefined) throw new Unauthenticated('a bearer token is required (Authorization: Bearer <token>)');
  // Cached per node for a bounded time (lifecycle/token-cache.ts; docs/design.md §9).
  const principal = await resolveToken(ctx, token, { cached: true });
  assertMay(operation, { principal, operator: false });
  request.principal = principal;
}

/** The authenticated principal of a route that requires one. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Unauthenticated();
  return request.principal;
}
