/**
 * Route registration: every route module's definitions, added with the access table's method and
 * path, their schemas and OpenAPI summary; uploads in a child scope without body parsers.
 */
import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { ROUTES } from './access.ts';
import type { AnyRouteDef, Api } from './define.ts';
import { renderDocsPage, swaggerOptions } from './openapi.ts';
import { aliasAndSearchRoutes } from './routes/aliases.ts';
import { artifactRoutes } from './routes/artifacts.ts';
import { attestationRoutes } from './routes/attestations.ts';
import { lifecycleRoutes } from './routes/lifecycle.ts';
import { logRoutes } from './routes/log.ts';
import { opsRoutes } from './routes/ops.ts';
import { policyRoutes } from './routes/policy.ts';
import { queryRoutes } from './routes/queries.ts';
import { statusRoutes } from './routes/status.ts';

/** Which routes stream raw bodies, by `METHOD url` (the OpenAPI document describes them as such). */
export type RawRoutes = Map<string, { upload: boolean; download: boolean }>;

/** The OpenAPI plugin; fills in from `rawRoutes` as routes are added. */
export async function registerOpenApi(app: FastifyInstance, version: string, maxUploadBytes: number): Promise<RawRoutes> {
  const rawRoutes: RawRoutes = new Map();
  await app.register(swagger, swaggerOptions(version, maxUploadBytes, rawRoutes));
  return rawRoutes;
}

function addRoute(instance: FastifyInstance, def: AnyRouteDef, rawRoutes: RawRoutes): void {
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
}

export async function registerRoutes(app: FastifyInstance, api: Api, rawRoutes: RawRoutes): Promise<void> {
  let openapiDoc: Record<string, unknown> | undefined;
  let docsHtml: string | undefined;
  const docs = {
    openapi: () => (openapiDoc ??= app.swagger() as unknown as Record<string, unknown>),
    html: () => (docsHtml ??= renderDocsPage(docs.openapi())),
  };
  const defs = [
    ...opsRoutes(api, docs),
    ...artifactRoutes(api),
    ...lifecycleRoutes(api),
    ...aliasAndSearchRoutes(api),
    ...attestationRoutes(api),
    ...queryRoutes(api),
    ...statusRoutes(api),
    ...policyRoutes(api),
    ...logRoutes(api),
  ];
  for (const def of defs) if (!def.upload) addRoute(app, def, rawRoutes);
  // Uploads: no parser reads the body; handlers stream request.raw to the content store.
  await app.register(async (child) => {
    child.removeAllContentTypeParsers();
    child.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
    for (const def of defs) if (def.upload) addRoute(child, def, rawRoutes);
  });
}
