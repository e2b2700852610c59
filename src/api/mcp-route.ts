/**
 * The MCP tools (src/mcp/server.ts) over Streamable HTTP at POST /mcp, stateless: every request gets
 * its own transport and server (`sessionIdGenerator: undefined`), bound to the principal of its bearer
 * token, and answers with one JSON response (no SSE stream, so GET and DELETE /mcp are 405). Nothing
 * is kept between requests, so any node of a distributed deployment can answer any request.
 *
 * Authentication is the API's: the same bearer token parsing and cached token resolution as every
 * other route (auth.ts), refused with a 401 problem before the MCP layer sees the request. File paths
 * are not accepted (the server cannot read the agent's files); error messages are scrubbed as in
 * problem+json.
 */
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Unauthenticated } from '../core/errors.ts';
import type { Principal } from '../lifecycle/model.ts';
import { resolveToken } from '../lifecycle/principals.ts';
import { MCP_MAX_INLINE_CHARS } from '../mcp/content.ts';
import { buildMcpServer } from '../mcp/server.ts';
import { bearerToken } from './auth.ts';
import type { Api } from './define.ts';
import { scrub } from './problem.ts';

export const MCP_PATH = '/mcp';
/** Room for the largest inline content (base64) and the JSON-RPC envelope around it. */
export const MCP_BODY_LIMIT = MCP_MAX_INLINE_CHARS + 64 * 1024;

async function mcpCaller(api: Api, request: FastifyRequest): Promise<Principal> {
  const token = bearerToken(request.headers.authorization);
  if (token === undefined) throw new Unauthenticated('a bearer token is required (Authorization: Bearer <token>)');
  // Cached per node for a bounded time, as for every route (lifecycle/token-cache.ts).
  return resolveToken(api.ctx, token, { cached: true });
}

export function registerMcpRoute(app: FastifyInstance, api: Api, version: string): void {
  app.route({
    method: 'POST',
    url: MCP_PATH,
    bodyLimit: MCP_BODY_LIMIT,
    config: { metricsRoute: MCP_PATH },
    // Not in the OpenAPI document: it speaks JSON-RPC (the MCP specification), not the REST API.
    schema: { hide: true },
    onRequest: async (request) => {
      request.principal = await mcpCaller(api, request);
    },
    handler: async (request, reply) => {
      const principal = request.principal as Principal;
      const server = buildMcpServer(api.ctx, principal, {
        allowFilePaths: false,
        version,
        renderMessage: scrub,
        log: (err, tool) => request.log.error({ err, tool }, 'mcp tool failed'),
      });
      const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true }); // no sessionIdGenerator: stateless;
      reply.raw.on('close', () => {
        void transport.close();
        void server.close();
      });
      // The transport writes the response itself, on the raw Node response.
      reply.hijack();
      reply.raw.setHeader('x-request-id', request.id);
      reply.raw.setHeader('x-content-type-options', 'nosniff');
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    },
  });
}
