/**
 * What the server answers below fastify: the fastify instance options (request ids, body limit,
 * errors fastify's router raises, malformed HTTP the client sent), and the requests Node answers
 * itself (CONNECT, an unsupported Expect). Every one of them gets a problem document.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { LogController } from 'fastify';
import type { Logger } from 'pino';
import { HttpProblem, PROBLEM_TYPE, rawProblem, sendProblem, toProblem } from './problem.ts';

/** A client's request id is kept when it is short and plain, and never when it looks like a token. */
export function requestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && /^[A-Za-z0-9._:-]{1,64}$/.test(given) && !given.startsWith('alp_') ? given : randomUUID();
}

/** Malformed HTTP on a socket (bad request line, headers too large, too slow): a raw problem, then close. */
export function clientError(err: NodeJS.ErrnoException, socket: Socket): void {
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
}

/** The fastify instance options: logging, request ids, the JSON body limit, timeouts, framework errors. */
export function fastifyOptions(logger: Logger | false, bodyLimit: number): FastifyServerOptions {
  return {
    ...(logger ? { loggerInstance: logger } : { logger: false }),
    // One structured line per request is written by observe() (hooks.ts), with the route and principal.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: requestId,
    bodyLimit,
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    requestTimeout: 0,
    frameworkErrors: (error, request, reply) => {
      sendProblem(request, reply, toProblem(error, request).problem);
    },
    clientErrorHandler: clientError,
  } as FastifyServerOptions;
}

/**
 * Requests Node answers itself, outside fastify: a CONNECT (this is no proxy) would get its socket
 * closed without a word, an Expect other than 100-continue a bare 417. Both get a problem document.
 */
export function answerNodeLevelRequests(app: FastifyInstance): void {
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
}
