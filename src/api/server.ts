/**
 * The HTTP server (fastify 5): builds the app from a ServiceContext. Routes come from the access table
 * (access.ts) and the route modules; every handler calls a service. Cross-cutting parts live here:
 * request ids and structured logs, authentication, schema validation (TypeBox), metrics, problem
 * responses (including 404/405 and errors Node's parser raises), raw-body upload parsing, and graceful
 * shutdown (in-flight uploads finish within the grace period, else they are aborted and their temp
 * files removed by the content store).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import swagger from '@fastify/swagger';
import type { TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { type Logger, pino } from 'pino';
import { InvalidInput } from '../core/errors.ts';
import { redactTokens } from '../core/redact.ts';
import type { ServiceContext } from '../lifecycle/context.ts';
import { telemetryMetricsCollector } from '../telemetry/metrics.ts';
import { ROUTES } from './access.ts';
import { authenticate } from './auth.ts';
import type { AnyRouteDef, Api } from './define.ts';
import { lingerOnClose } from './linger.ts';
import { ApiMetrics, type MetricsCollector, observedContext } from './metrics.ts';
import { openapiPath, renderDocsPage, swaggerOptions } from './openapi.ts';
import { HttpProblem, PROBLEM_TYPE, pathOf, rawProblem, sendProblem, toProblem } from './problem.ts';
import { artifactRoutes } from './routes/artifacts.ts';
import { lifecycleRoutes } from './routes/lifecycle.ts';
import { opsRoutes } from './routes/ops.ts';
import { queryRoutes } from './routes/queries.ts';
import { statusRoutes } from './routes/status.ts';
import { SHARED_SCHEMAS } from './schemas.ts';
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
  /** The context the handlers use (the given one, observed for metrics). */
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

export async function buildServer(base: ServiceContext, options: ServerOptions = {}): Promise<AlpServer> {
  const metrics = new ApiMetrics({ processMetrics: options.processMetrics !== false });
  const ctx = observedContext(base, (ops) => metrics.observeCommit(ops));
  // The telemetry outbox's persisted counters (alp_telemetry_*), read at scrape time, then any others.
  for (const collect of [telemetryMetricsCollector, ...(options.metricsCollectors ?? [])]) collect(metrics.registry, base);
  const maxUploadBytes = options.maxUploadBytes ?? DEFAULT_MAX_UPLOAD_BYTES;
  const inflight = new Set<IncomingMessage>();
  const state = { closing: false };
  const api: Api = { ctx, metrics, maxUploadBytes, inflight, isClosing: () => state.closing };

  const logger = options.logger === undefined ? defaultLogger() : options.logger;
  const app: FastifyInstance = Fastify({
    ...(logger ? { loggerInstance: logger } : { logger: false }),
    // One structured line per request is written by observe(), with the route and principal.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      // A client's id is kept when it is short and plain, and never when it looks like a token.
      return typeof given === 'string' && /^[A-Za-z0-9._:-]{1,64}$/.test(given) && !given.startsWith('alp_') ? given : randomUUID();
    },
    bodyLimit: options.jsonBodyLimit ?? DEFAULT_JSON_BODY_LIMIT,
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    requestTimeout: 0,
    frameworkErrors: (error, request, reply) => {
      sendProblem(request, reply, toProblem(error, request).problem);
    },
    clientErrorHandler: (err: NodeJS.ErrnoException, socket: Socket) => {
      if (err.code === 'ECONNRESET' || socket.destroyed) return;
      const busy = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
      if (socket.writable && !busy?.headersSent) {
        const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
        const detail =
          status === 431
            ? 'the request headers are too large'
            : status === 408
              ? 'the request took too long to arrive'
              : 'malformed HTTP request';
        socket.end(rawProblem(status, status === 431 ? 'TOO_LARGE' : 'INVALID', detail));
        setTimeout(() => socket.destroy(), 1000).unref();
      } else socket.destroy();
    },
  }) as unknown as FastifyInstance;

  // Requests Node answers itself, outside fastify: a CONNECT (this is no proxy) would get its socket
  // closed without a word, an Expect other than 100-continue a bare 417. Both get a problem document.
  app.server.on('connect', (_req: IncomingMessage, socket: Socket) => {
    socket.on('error', () => {});
    socket.end(rawProblem(405, 'INVALID', 'CONNECT is not supported: this server is not a proxy', { allow: 'GET, HEAD, POST, PUT' }));
    // Whatever the client sends after the request is read and dropped (a paused socket would never see
    // the client's close), and the socket does not outlive a second.
    socket.resume();
    setTimeout(() => socket.destroy(), 1000).unref();
  });
  app.server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const detail = `the expectation ${JSON.stringify(String(req.headers.expect).slice(0, 100))} is not supported (only 100-continue)`;
    const body = JSON.stringify({
      ...toProblem(new HttpProblem(417, 'INVALID', detail, { title: 'Expectation failed' }), { id: randomUUID(), url: req.url ?? '' })
        .problem,
    });
    res.writeHead(417, { 'content-type': PROBLEM_TYPE, 'content-length': Buffer.byteLength(body), connection: 'close' }).end(body);
  });

  app.decorateRequest('principal', null);
  app.setValidatorCompiler(({ schema, httpPart }) => typeboxValidator(schema as TSchema, httpPart ?? 'body'));
  for (const s of SHARED_SCHEMAS) app.addSchema(s);

  // Every route's method and pattern, for 405 answers and the OpenAPI completion.
  const patterns: Array<{ re: RegExp; method: string }> = [];
  const rawRoutes = new Map<string, { upload: boolean; download: boolean }>();
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const re = new RegExp(`^${route.url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:\w+/g, '[^/]+')}$`);
    for (const m of methods) patterns.push({ re, method: String(m).toUpperCase() });
  });

  await app.register(swagger, swaggerOptions(options.version ?? 'dev', maxUploadBytes, rawRoutes));

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id).header('x-content-type-options', 'nosniff');
    observe(request, reply, metrics);
    if (state.closing) throw new HttpProblem(503, 'MAINTENANCE', 'the server is shutting down; retry', { title: 'Service unavailable' });
    await authenticate(ctx, request);
  });
  app.addHook('onSend', async (request, reply, payload) => {
    if (state.closing) reply.header('connection', 'close');
    if (!request.raw.complete) lingerOnClose(request.raw);
    return payload;
  });

  app.setErrorHandler((err, request, reply) => {
    let e: unknown = err;
    if (err instanceof InvalidInput && err.details?.rangeNotSatisfiable) {
      e = new HttpProblem(416, 'INVALID', err.message, {
        title: 'Range not satisfiable',
        headers: { 'content-range': `bytes */${String(err.details.size)}` },
      });
    }
    const { problem, internal } = toProblem(e, request);
    if (internal) request.log.error({ err }, `request failed: ${problem.code}`);
    else if (problem.status >= 500) request.log.warn({ code: problem.code, detail: problem.detail }, 'request refused');
    else request.log.debug({ code: problem.code, detail: problem.detail }, 'request refused');
    sendProblem(request, reply, problem, e instanceof HttpProblem ? e.headers : {});
  });

  app.setNotFoundHandler((request, reply) => {
    const path = pathOf(request.url);
    const allowed = [...new Set(patterns.filter((p) => p.re.test(path)).map((p) => p.method))].sort();
    if (allowed.length > 0) {
      const { problem } = toProblem(
        new HttpProblem(405, 'INVALID', `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`, {
          title: 'Method not allowed',
        }),
        request,
      );
      sendProblem(request, reply, problem, { allow: allowed.join(', ') });
      return;
    }
    const { problem } = toProblem(new HttpProblem(404, 'NOT_FOUND', `no route ${request.method} ${path}`), request);
    sendProblem(request, reply, problem);
  });

  let openapiDoc: Record<string, unknown> | undefined;
  let docsHtml: string | undefined;
  const docs = {
    openapi: () => (openapiDoc ??= app.swagger() as unknown as Record<string, unknown>),
    html: () => (docsHtml ??= renderDocsPage(docs.openapi())),
  };
  const defs = [...opsRoutes(api, docs), ...artifactRoutes(api), ...lifecycleRoutes(api), ...queryRoutes(api), ...statusRoutes(api)];
  const add = (instance: FastifyInstance, def: AnyRouteDef) => {
    const spec = ROUTES[def.id];
    rawRoutes.set(`${spec.method} ${spec.url}`, { upload: def.upload === true, download: def.download === true });
    instance.route({
      method: spec.method,
      url: spec.url,
      exposeHeadRoute: spec.method === 'GET' && def.download !== true,
      schema: { ...def.schema, summary: def.summary, tags: def.tags, ...(def.description ? { description: def.description } : {}) },
      // fastify adds HEAD to every GET (undocumented); the table's own HEAD routes are documented.
      config: {
        routeId: def.id,
        upload: def.upload === true,
        download: def.download === true,
        ...(spec.method === 'HEAD' ? { swagger: { exposeHeadRoute: true } } : {}),
      },
      handler: def.handler as never,
    });
  };
  for (const def of defs) if (!def.upload) add(app, def);
  // Uploads: no parser reads the body; handlers stream request.raw to the content store.
  await app.register(async (child) => {
    child.removeAllContentTypeParsers();
    child.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
    for (const def of defs) if (def.upload) add(child, def);
  });
  if (options.webRoot !== false) registerWebApp(app, options.webRoot ?? defaultWebRoot());
  await app.ready();

  let shutdownPromise: Promise<void> | undefined;
  return {
    app,
    metrics,
    ctx,
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

/** Bodies are checked as they are; path parameters, queries and headers are converted first. */
function typeboxValidator(schema: TSchema, httpPart: string) {
  const check = TypeCompiler.Compile(schema);
  const part = httpPart === 'querystring' ? 'query' : httpPart;
  return (data: unknown) => {
    const value = httpPart === 'body' ? data : Value.Convert(schema, data);
    if (check.Check(value)) return httpPart === 'headers' ? true : { value };
    const first = check.Errors(value).First();
    const where = first?.path ? `${part}${first.path.replace(/\//g, '.')}` : part;
    const error = Object.assign(new Error(`${where}: ${first?.message ?? 'invalid'}`), { statusCode: 400 });
    return { error };
  };
}

interface RouteConfig {
  routeId?: string;
  /** The metrics label of a route outside the table (the web UI's files). */
  metricsRoute?: string;
  upload?: boolean;
  download?: boolean;
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
    const config = (request.routeOptions.config ?? {}) as RouteConfig;
    // Streamed bodies are counted as they flow (transfer.ts); the others by their Content-Length.
    const downloads = config.download === true;
    const uploads = config.upload === true;
    if (!downloads && finished) {
      const out = Number(res.getHeader('content-length'));
      if (out > 0) metrics.bytesOut.inc({ route }, out);
    }
    if (!uploads && request.raw.complete) {
      const inBytes = Number(request.headers['content-length']);
      if (inBytes > 0) metrics.bytesIn.inc({ route }, inBytes);
    }
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

export { openapiPath };
