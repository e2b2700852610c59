/**
 * The error handler (every thrown error becomes a problem document; a range past the end is 416)
 * and the not-found handler (405 with Allow when the path exists under another method, else 404).
 */
import type { FastifyInstance } from 'fastify';
import { InvalidInput } from '../core/errors.ts';
import { HttpProblem, pathOf, sendProblem, toProblem } from './problem.ts';

/** Every route's method and pattern, collected as routes are added (for 405 answers). */
export interface RoutePatterns {
  allowed(path: string): string[];
}

export function collectRoutePatterns(app: FastifyInstance): RoutePatterns {
  const patterns: Array<{ re: RegExp; method: string }> = [];
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const re = new RegExp(`^${route.url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:\w+/g, '[^/]+')}$`);
    for (const m of methods) patterns.push({ re, method: String(m).toUpperCase() });
  });
  return { allowed: (path) => [...new Set(patterns.filter((p) => p.re.test(path)).map((p) => p.method))].sort() };
}

export function registerErrorHandlers(app: FastifyInstance, patterns: RoutePatterns): void {
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
    const allowed = patterns.allowed(path);
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
}
