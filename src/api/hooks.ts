/**
 * The request hooks: security headers and the request id, one metrics observation and log line per
 * request (observe), refusal while shutting down, authentication; and, on send, closing connections
 * while shutting down and lingering on a body the handler did not read.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ROUTES } from './access.ts';
import { authenticate } from './auth.ts';
import type { Api } from './define.ts';
import { lingerOnClose } from './linger.ts';
import type { ApiMetrics } from './metrics.ts';
import { HttpProblem, pathOf } from './problem.ts';

export interface RouteConfig {
  routeId?: string;
  /** The metrics label of a route outside the table (the web UI's files). */
  metricsRoute?: string;
  upload?: boolean;
  download?: boolean;
}

export function registerRequestHooks(app: FastifyInstance, api: Api): void {
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id).header('x-content-type-options', 'nosniff');
    observe(request, reply, api.metrics);
    if (api.isClosing()) throw new HttpProblem(503, 'MAINTENANCE', 'the server is shutting down; retry', { title: 'Service unavailable' });
    await authenticate(api.ctx, request);
  });
  app.addHook('onSend', async (request, reply, payload) => {
    if (api.isClosing()) reply.header('connection', 'close');
    if (!request.raw.complete) lingerOnClose(request.raw);
    return payload;
  });
}

/** Counts, times and logs every request when its response closes (finished or aborted). */
function observe(request: FastifyRequest, reply: FastifyReply, metrics: ApiMetrics): void {
  const start = process.hrtime.bigint();
  const res = reply.raw;
  res.once('close', () => {
    const id = request.routeOptions.config?.routeId;
    const route = id ? ROUTES[id].url : ((request.routeOptions.config as RouteConfig | undefined)?.metricsRoute ?? 'unmatched');
    const finished = res.writableFinished;
    const status = finished ? String(res.statusCode) : 'aborted';
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    const labels = { method: request.method, route, status };
    metrics.requests.inc(labels);
    metrics.duration.observe(labels, seconds);
    countBodyBytes(request, reply, metrics, route, finished);
    const entry = {
      method: request.method,
      url: pathOf(request.url),
      route,
      status,
      ms: Math.round(seconds * 1e4) / 10,
      ...(request.principal ? { principal: request.principal.id } : {}),
    };
    if (!finished || res.statusCode >= 500) request.log.warn(entry, 'request completed');
    else request.log.info(entry, 'request completed');
  });
}

/** Streamed bodies are counted as they flow (transfer.ts); the others by their Content-Length. */
function countBodyBytes(request: FastifyRequest, reply: FastifyReply, metrics: ApiMetrics, route: string, finished: boolean): void {
  const config = (request.routeOptions.config ?? {}) as RouteConfig;
  if (config.download !== true && finished) {
    const out = Number(reply.raw.getHeader('content-length'));
    if (out > 0) metrics.bytesOut.inc({ route }, out);
  }
  if (config.upload !== true && request.raw.complete) {
    const inBytes = Number(request.headers['content-length']);
    if (inBytes > 0) metrics.bytesIn.inc({ route }, inBytes);
  }
}
