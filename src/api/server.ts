/**
 * The HTTP server (fastify 5): builds the app from a ServiceContext. Routes come from the access table
 * (access.ts) and the route modules; every handler calls a service. Cross-cutting parts, one concern
 * per file: the Node-level answers and fastify options (node-requests.ts), TypeBox validation
 * (validation.ts), request ids, structured logs, metrics and authentication (hooks.ts), problem
 * responses including 404/405 (error-handlers.ts, problem.ts), route registration and raw-body upload
 * parsing (register-routes.ts), and here graceful shutdown (in-flight uploads finish within the grace
 * period, else they are aborted and their temp files removed by the content store).
 */
import type { IncomingMessage } from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import { type Logger, pino } from 'pino';
import { redactTokens } from '../core/redact.ts';
import type { ServiceContext } from '../system/context.ts';
import { telemetryMetricsCollector } from '../telemetry/metrics.ts';
import type { Api } from './define.ts';
import { collectRoutePatterns, registerErrorHandlers } from './error-handlers.ts';
import { registerRequestHooks } from './hooks.ts';
import { registerMcpRoute } from './mcp-route.ts';
import { ApiMetrics, type MetricsCollector, withMetricsSink } from './metrics.ts';
import { answerNodeLevelRequests, fastifyOptions } from './node-requests.ts';
import { openapiPath } from './openapi.ts';
import { registerOpenApi, registerRoutes } from './register-routes.ts';
import { registerValidation } from './validation.ts';
import { defaultWebRoot, registerWebApp } from './web.ts';

export const DEFAULT_MAX_UPLOAD_BYTES = 1024 * 1024 * 1024;
export const DEFAULT_JSON_BODY_LIMIT = 1024 * 1024;
export const DEFAULT_SHUTDOWN_GRACE_MS = 30_000;

export interface ServerOptions {
  /** Largest upload accepted (413 past it). Default 1 GiB. */
  maxUploadBytes?: number;
  /** Largest JSON body. Default 1 MiB. */
  jsonBodyLimit?: number;
  /** A pino logger, or false for none. Default: JSON lines on stdout at level info. */
  logger?: Logger | false;
  /** The version shown in the OpenAPI document. */
  version?: string;
  /** Extra metrics on /metrics (the telemetry outbox counters are always there). */
  metricsCollectors?: MetricsCollector[];
  /** Node process metrics on /metrics (default true). */
  processMetrics?: boolean;
  /** The built web UI served at `/` (default dist/web; false: none). */
  webRoot?: string | false;
}

export interface AlpServer {
  app: FastifyInstance;
  metrics: ApiMetrics;
  /** The context the handlers use (the given one, with the metrics audit sink). */
  ctx: ServiceContext;
  readonly closing: boolean;
  /** Starts listening; returns the base URL. */
  listen(host: string, port: number): Promise<string>;
  /**
   * Stops accepting requests, lets in-flight requests finish for up to `graceMs`, then aborts the
   * uploads still streaming (their temp files are removed) and closes every connection.
   */
  shutdown(graceMs?: number): Promise<void>;
}

/**
 * JSON lines on stdout. Every line passes through redactTokens on its way out: whatever a request
 * carried (a token in its path, query, request id or body, echoed in an error detail), no bearer token
 * reaches the log. The Authorization header itself is never logged (observe() logs no headers).
 */
export function defaultLogger(
  level = 'info',
  destination: { write(line: string): unknown } = pino.destination({ dest: 1, sync: true }),
): Logger {
  const out = { write: (line: string) => destination.write(redactTokens(line)) };
  return pino({ level, base: { service: 'alp', pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, out);
}

/**
 * Builds the app: fastify and the Node-level answers (node-requests.ts), validation, the 405 table
 * and OpenAPI plugin, the request hooks (hooks.ts), the error handlers, the routes
 * (register-routes.ts), the web UI. The order is fastify's: plugins and hooks before the routes.
 */
export async function buildServer(base: ServiceContext, options: ServerOptions = {}): Promise<AlpServer> {
  const metrics = new ApiMetrics({ processMetrics: options.processMetrics !== false });
  const ctx = withMetricsSink(base, metrics);
  // The telemetry outbox's persisted counters (alp_telemetry_*), read at scrape time, then any others.
  for (const collect of [telemetryMetricsCollector, ...(options.metricsCollectors ?? [])]) collect(metrics.registry, base);
  const maxUploadBytes = options.maxUploadBytes ?? DEFAULT_MAX_UPLOAD_BYTES;
  const inflight = new Set<IncomingMessage>();
  const state = { closing: false };
  const api: Api = { ctx, metrics, maxUploadBytes, inflight, isClosing: () => state.closing };

  const logger = options.logger === undefined ? defaultLogger() : options.logger;
  const app = Fastify(fastifyOptions(logger, options.jsonBodyLimit ?? DEFAULT_JSON_BODY_LIMIT)) as unknown as FastifyInstance;
  answerNodeLevelRequests(app);
  app.decorateRequest('principal', null);
  registerValidation(app);
  const patterns = collectRoutePatterns(app);
  const rawRoutes = await registerOpenApi(app, options.version ?? 'dev', maxUploadBytes);
  registerRequestHooks(app, api);
  registerErrorHandlers(app, patterns);
  await registerRoutes(app, api, rawRoutes);
  // The MCP tools for agents at POST /mcp (stateless Streamable HTTP, same bearer tokens).
  registerMcpRoute(app, api, options.version ?? 'dev');
  if (options.webRoot !== false) registerWebApp(app, options.webRoot ?? defaultWebRoot());
  await app.ready();
  return serverHandle(app, api, state);
}

/** Listening and graceful shutdown of a built app. */
function serverHandle(app: FastifyInstance, api: Api, state: { closing: boolean }): AlpServer {
  const { inflight } = api;
  let shutdownPromise: Promise<void> | undefined;
  return {
    app,
    metrics: api.metrics,
    ctx: api.ctx,
    get closing() {
      return state.closing;
    },
    async listen(host: string, port: number) {
      await app.listen({ host, port });
      const address = app.server.address();
      if (!address || typeof address === 'string') return String(address);
      const h = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      return `http://${h}:${address.port}`;
    },
    shutdown(graceMs = DEFAULT_SHUTDOWN_GRACE_MS) {
      shutdownPromise ??= (async () => {
        state.closing = true;
        app.log.info({ in_flight_uploads: inflight.size, grace_ms: graceMs }, 'shutting down');
        const closed = app.close();
        const timer = setTimeout(() => {
          if (inflight.size) app.log.warn({ uploads: inflight.size }, 'grace period over: aborting in-flight uploads');
          for (const req of inflight) req.destroy(new Error('server shutting down'));
          setTimeout(() => app.server.closeAllConnections(), 200).unref();
        }, graceMs);
        await closed;
        clearTimeout(timer);
        // Aborted uploads remove their temp files before their handlers return.
        for (let i = 0; inflight.size > 0 && i < 500; i++) await new Promise((r) => setTimeout(r, 10));
        app.log.info('shut down');
      })();
      return shutdownPromise;
    },
  };
}

export { openapiPath };
