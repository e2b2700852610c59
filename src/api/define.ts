/**
 * How a route is declared: its id in the access table (method, path, allowed kinds), its schemas, and
 * a handler typed from those schemas. Handlers are thin: they read the request, call one service
 * function and shape the answer.
 */
import type { IncomingMessage } from 'node:http';
import type { Static, TSchema } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../system/context.ts';
import { ROUTES, type RouteId } from './access.ts';
import type { ApiMetrics } from './metrics.ts';

/** What handlers share: the services' context and the server's transfer settings. */
export interface Api {
  ctx: ServiceContext;
  metrics: ApiMetrics;
  maxUploadBytes: number;
  /** Uploads being streamed (graceful shutdown waits for them, then aborts them). */
  inflight: Set<IncomingMessage>;
  isClosing(): boolean;
}

export interface RouteSchemas {
  params?: TSchema;
  querystring?: TSchema;
  body?: TSchema;
  headers?: TSchema;
  response?: Record<string, TSchema>;
}

type StaticOf<T> = T extends TSchema ? Static<T> : unknown;

export type TypedRequest<S extends RouteSchemas> = FastifyRequest<{
  Params: StaticOf<S['params']>;
  Querystring: StaticOf<S['querystring']>;
  Body: StaticOf<S['body']>;
}>;

export interface RouteDef<S extends RouteSchemas = RouteSchemas> {
  id: RouteId;
  summary: string;
  description?: string;
  tags: string[];
  schema: S;
  /** The request body is the raw content, streamed to the content store. */
  upload?: boolean;
  /** The response body is raw, verified content. */
  download?: boolean;
  handler(request: TypedRequest<S>, reply: FastifyReply): Promise<unknown>;
}

export type AnyRouteDef = RouteDef<RouteSchemas>;

export function defineRoute<S extends RouteSchemas>(def: RouteDef<S>): AnyRouteDef {
  return def as unknown as AnyRouteDef;
}

export function specOf(def: AnyRouteDef) {
  return ROUTES[def.id];
}
