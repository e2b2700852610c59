/**
 * Artifacts and versions over MCP: create (version 1) and the next version, the verified content,
 * listings and the RFC-012 §9.1 queries. Each tool calls the service function the HTTP route calls.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import {
  addVersion,
  createArtifact,
  headView,
  listArtifacts,
  openVersionContent,
  resolveVersion,
  showArtifact,
} from '../lifecycle/artifacts.ts';
import { queryIndex } from '../lifecycle/queries.ts';
import { versionView } from '../lifecycle/versions.ts';
import { assertReadSize, contentBody, filenameOf, readVerified, storing } from './content.ts';
import type { ToolEnv } from './env.ts';
import { runTool } from './results.ts';
import { artifactId, contentFields, cursor, limit, versionNumber } from './schemas.ts';

const WRITE = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false } as const;
const READ = { readOnlyHint: true, openWorldHint: false } as const;

export function registerArtifactTools(server: McpServer, env: ToolEnv): void {
  registerCreateTools(server, env);
  registerReadTools(server, env);
}

function registerCreateTools(server: McpServer, env: ToolEnv): void {
  const { ctx, principal } = env;
  server.registerTool(
    'create_artifact',
    {
      title: 'Create an artifact',
      description:
        'Store new content as version 1 of a new artifact (state DRAFT). Returns the version: artifact_id, version, state, content_hash (sha256). Next: propose.',
      inputSchema: {
        name: z.string().min(1).max(200).describe('the artifact name (e.g. deploy)'),
        filename: z.string().min(1).max(255).optional().describe('the stored filename (default: the file name of path)'),
        kind: z.string().max(64).optional().describe('what it is (script, config, migration, report; default file)'),
        labels: z.record(z.string(), z.string()).optional().describe('labels, e.g. {"team": "ops"}'),
        quorum: z.number().int().min(1).optional().describe('distinct human approvals needed (default 1)'),
        ...contentFields(env.allowFilePaths),
      },
      annotations: WRITE,
    },
    (args) =>
      runTool('create_artifact', env.results, async () => {
        const c = await contentBody(args, env.allowFilePaths);
        const { version } = await storing(c, () =>
          createArtifact(ctx, principal, {
            name: args.name,
            filename: filenameOf(args.filename, c),
            kind: args.kind,
            labels: args.labels,
            quorum: args.quorum,
            body: c.body,
            size: c.size,
            expectedDigest: c.expectedDigest,
          }),
        );
        return versionView(version);
      }),
  );
  server.registerTool(
    'create_version',
    {
      title: 'Store the next version',
      description: 'Store new content as the next version of an artifact (state DRAFT). Returns the version. Next: propose.',
      inputSchema: {
        artifact_id: artifactId,
        filename: z.string().min(1).max(255).optional().describe('the stored filename (default: the file name of path)'),
        ...contentFields(env.allowFilePaths),
      },
      annotations: WRITE,
    },
    (args) =>
      runTool('create_version', env.results, async () => {
        const c = await contentBody(args, env.allowFilePaths);
        const v = await storing(c, () =>
          addVersion(ctx, principal, args.artifact_id, {
            filename: filenameOf(args.filename, c),
            body: c.body,
            size: c.size,
            expectedDigest: c.expectedDigest,
          }),
        );
        return versionView(v);
      }),
  );
}

function registerReadTools(server: McpServer, env: ToolEnv): void {
  const { ctx } = env;
  server.registerTool(
    'get_content',
    {
      title: 'Read verified content',
      description: `The content of a version, re-hashed against its recorded digest before it is returned (INTEGRITY if the stored bytes do not match). As text when it is UTF-8 (encoding auto), else base64. At most ${env.maxReadBytes} bytes (TOO_LARGE past it: download over HTTP).`,
      inputSchema: {
        artifact_id: artifactId,
        version: versionNumber.optional().describe('the version (default: the latest)'),
        encoding: z.enum(['auto', 'utf8', 'base64']).optional().describe('auto (default): utf8 when valid, else base64'),
      },
      annotations: READ,
    },
    (args) =>
      runTool('get_content', env.results, async () => {
        const v = await resolveVersion(ctx, args.artifact_id, args.version);
        assertReadSize(v.size, env.maxReadBytes, `/v1/artifacts/${v.artifact_id}/versions/${v.version}/content`);
        const { stream } = await openVersionContent(ctx, v.artifact_id, v.version);
        const read = await readVerified(stream, args.encoding ?? 'auto');
        const { artifact_id, version, filename, content_hash, size } = versionView(v);
        return { artifact_id, version, filename, content_hash, size, verified: true, ...read };
      }),
  );
  server.registerTool(
    'list_artifacts',
    {
      title: 'List versions or artifacts',
      description: 'Versions by state (e.g. PROPOSED), or artifacts by exact name, newest first, paginated (cursor).',
      inputSchema: {
        state: z.string().max(32).optional().describe('a version state: DRAFT, PROPOSED, APPROVED, EXECUTED, …'),
        name: z.string().min(1).max(200).optional().describe('an exact artifact name'),
        limit: limit.optional(),
        cursor: cursor.optional(),
      },
      annotations: READ,
    },
    (args) => runTool('list_artifacts', env.results, async () => listArtifacts(ctx, args)),
  );
  server.registerTool(
    'list_versions',
    {
      title: 'An artifact and its versions',
      description: 'The artifact (name, kind, labels, quorum) and every version, oldest first, with its state and digest.',
      inputSchema: { artifact_id: artifactId },
      annotations: READ,
    },
    (args) =>
      runTool('list_versions', env.results, async () => {
        const { head, versions } = await showArtifact(ctx, args.artifact_id);
        return { ...headView(head), versions: versions.map(versionView) };
      }),
  );
  server.registerTool(
    'query',
    {
      title: 'Query the indexes',
      description:
        'A page of one listing: transitions on a day, approvals by an approver, runs on a day, provenance steps on a day, compensations by state.',
      inputSchema: {
        kind: z.enum(['transitions', 'approvals', 'runs', 'provenance', 'compensations']),
        key: z
          .string()
          .min(1)
          .max(200)
          .describe('YYYY-MM-DD for transitions, runs and provenance; a principal for approvals; a state for compensations'),
        limit: limit.optional(),
        cursor: cursor.optional(),
      },
      annotations: READ,
    },
    (args) => runTool('query', env.results, async () => queryIndex(ctx, args.kind, args.key, { limit: args.limit, cursor: args.cursor })),
  );
}
