/**
 * Operations: liveness, readiness (both stores answer), Prometheus metrics, the OpenAPI document and
 * the readable API page. All public: they carry no artifact data.
 */
import { readiness } from '../../lifecycle/reads.ts';
import { CONTRACT } from '../contract.ts';
import { type AnyRouteDef, type Api, defineRoute } from '../define.ts';
import { HttpProblem } from '../problem.ts';

export function opsRoutes(api: Api, docs: { openapi(): unknown; html(): string }): AnyRouteDef[] {
  return [
    defineRoute({
      id: 'health',
      summary: 'Liveness: the process answers',
      tags: ['operations'],
      schema: CONTRACT.health.schema,
      handler: async () => ({ status: 'ok' }),
    }),
    defineRoute({
      id: 'ready',
      summary: 'Readiness: the installation exists and both stores answer (503 otherwise, and while shutting down)',
      tags: ['operations'],
      schema: CONTRACT.ready.schema,
      handler: async () => {
        if (api.isClosing()) throw new HttpProblem(503, 'MAINTENANCE', 'the server is shutting down', { title: 'Service unavailable' });
        try {
          return { status: 'ready', ...(await readiness(api.ctx)) };
        } catch (e) {
          throw new HttpProblem(503, 'INTERNAL', `not ready: ${(e as Error).message}`, { title: 'Not ready', cause: e });
        }
      },
    }),
    defineRoute({
      id: 'metrics',
      summary: 'Prometheus metrics (text exposition format)',
      tags: ['operations'],
      // Not JSON: the OpenAPI document declares its media type from the contract (`produces`).
      schema: CONTRACT.metrics.schema,
      handler: async (_req, reply) => {
        const body = await api.metrics.registry.metrics();
        return reply.type(api.metrics.registry.contentType).send(body);
      },
    }),
    defineRoute({
      id: 'openapi',
      summary: 'This API as an OpenAPI 3.1 document',
      tags: ['operations'],
      schema: CONTRACT.openapi.schema,
      handler: async (_req, reply) => reply.type('application/json').send(JSON.stringify(docs.openapi())),
    }),
    defineRoute({
      id: 'docs',
      summary: 'A readable page of this API',
      tags: ['operations'],
      schema: CONTRACT.docs.schema,
      handler: async (_req, reply) =>
        reply
          .type('text/html; charset=utf-8')
          .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'")
          .send(docs.html()),
    }),
  ];
}
