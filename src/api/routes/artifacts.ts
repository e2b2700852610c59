/**
 * Artifacts and versions: create (raw body), new versions (raw body), reads, verified content
 * downloads, history and verification.
 */
import { history } from '../../audit/history.ts';
import { verifyArtifactAudit } from '../../audit/verify.ts';
import { InvalidInput } from '../../core/errors.ts';
import { headView, listArtifacts, openVersionContent, resolveVersion, showArtifact } from '../../lifecycle/artifacts.ts';
import { addVersionOnce, createArtifactOnce } from '../../lifecycle/idempotency.ts';
import { parseLabel } from '../../lifecycle/validation.ts';
import { collectRefs, verifyObjects } from '../../lifecycle/verify-content.ts';
import { versionView } from '../../lifecycle/versions.ts';
import { principalOf } from '../auth.ts';
import { CONTRACT } from '../contract.ts';
import { type AnyRouteDef, type Api, defineRoute, type TypedRequest } from '../define.ts';
import { asIdempotencyProblem, idempotencyKeyOf, markReplayed } from '../idempotency-header.ts';
import { isJsonRequest, jsonUploadInput, readJsonBody } from '../json-upload.ts';
import { JSON_CONTENT_LIMIT, JsonCreateBody, JsonVersionBody } from '../schemas.ts';
import { serveRepresentation, uploadInput, withUpload } from '../transfer.ts';

const tags = ['artifacts'];

export function artifactRoutes(api: Api): AnyRouteDef[] {
  return [...artifactLevelRoutes(api), ...versionRoutes(api), ...auditViewRoutes(api)];
}

/** Listing, creating and showing artifacts. */
function artifactLevelRoutes(api: Api): AnyRouteDef[] {
  const { ctx } = api;
  return [
    defineRoute({
      id: 'listArtifacts',
      summary: 'List versions by state (or artifacts by exact name), newest first, paginated',
      description: 'Without `state` or `name`, every version grouped by state, behind one opaque cursor.',
      tags,
      schema: CONTRACT.listArtifacts.schema,
      handler: async (req) => listArtifacts(ctx, req.query),
    }),
    defineRoute({
      id: 'createArtifact',
      summary: 'Create an artifact: the raw body (or a small JSON document) becomes version 1 (DRAFT)',
      description: `The body is streamed to the content store while it is hashed, never buffered whole. With \`Repr-Digest\` (or \`Content-Digest\`) the stored bytes must match it, or nothing is kept (400). Past the size limit: 413. With \`Content-Type: application/json\` the body is instead \`{name, filename, content, encoding: utf8|base64, content_hash?, kind?, labels?, quorum?}\` (no query) with at most ${JSON_CONTENT_LIMIT} bytes of decoded content; \`content_hash\` is checked like Repr-Digest.`,
      tags,
      upload: CONTRACT.createArtifact.upload,
      schema: CONTRACT.createArtifact.schema,
      handler: async (req, reply) => {
        const { up, meta } = await createInput(req, api);
        const key = idempotencyKeyOf(req);
        const { version, replayed } = await withUpload(up, api.metrics, api.inflight, req, () =>
          asIdempotencyProblem(() =>
            createArtifactOnce(
              ctx,
              principalOf(req),
              {
                ...meta,
                body: up.body,
                expectedDigest: up.expectedDigest,
                maxBytes: up.maxBytes,
                size: up.size,
              },
              key,
            ),
          ),
        );
        markReplayed(reply, replayed);
        reply.code(201).header('location', `/v1/artifacts/${version.artifact_id}/versions/${version.version}`);
        return versionView(version);
      },
    }),
    defineRoute({
      id: 'showArtifact',
      summary: 'An artifact and its versions',
      tags,
      schema: CONTRACT.showArtifact.schema,
      handler: async (req) => {
        const { head, versions } = await showArtifact(ctx, req.params.id);
        return { ...headView(head), versions: versions.map(versionView) };
      },
    }),
    defineRoute({
      id: 'listVersions',
      summary: 'The versions of an artifact, oldest first',
      tags,
      schema: CONTRACT.listVersions.schema,
      handler: async (req) => {
        const { versions } = await showArtifact(ctx, req.params.id);
        return { artifact_id: req.params.id, versions: versions.map(versionView) };
      },
    }),
  ];
}

type CreateRequest = TypedRequest<(typeof CONTRACT)['createArtifact']['schema']>;
type VersionRequest = TypedRequest<(typeof CONTRACT)['addVersion']['schema']>;

/** A create's content and policy: from the query and the raw body, or from one JSON document. */
async function createInput(req: CreateRequest, api: Api) {
  if (isJsonRequest(req)) {
    if (Object.keys(req.query).length > 0) throw new InvalidInput('a JSON body carries every field itself: send no query');
    const b = await readJsonBody(req, JsonCreateBody);
    const meta = { name: b.name, filename: b.filename, kind: b.kind, labels: b.labels ?? {}, quorum: b.quorum };
    return { up: jsonUploadInput(req, b, api.maxUploadBytes), meta };
  }
  const q = req.query;
  if (q.name === undefined || q.filename === undefined) {
    throw new InvalidInput('name and filename are required: in the query with a raw body, or in a JSON body');
  }
  const labels = Object.fromEntries((q.label ?? []).map(parseLabel));
  const meta = { name: q.name, filename: q.filename, kind: q.kind, labels, quorum: q.quorum };
  return { up: uploadInput(req, api.maxUploadBytes, api.metrics), meta };
}

async function versionInput(req: VersionRequest, api: Api) {
  if (isJsonRequest(req)) {
    if (Object.keys(req.query).length > 0) throw new InvalidInput('a JSON body carries every field itself: send no query');
    const b = await readJsonBody(req, JsonVersionBody);
    return { up: jsonUploadInput(req, b, api.maxUploadBytes), filename: b.filename };
  }
  if (req.query.filename === undefined) throw new InvalidInput('filename is required: in the query with a raw body, or in a JSON body');
  return { up: uploadInput(req, api.maxUploadBytes, api.metrics), filename: req.query.filename };
}

/** Versions: the next one (upload), one version, its verified content */
function versionRoutes(api: Api): AnyRouteDef[] {
  const { ctx } = api;
  return [
    defineRoute({
      id: 'addVersion',
      summary: 'Store the next version of an artifact from the raw body, or a small JSON document (DRAFT)',
      description: `With \`Content-Type: application/json\` the body is \`{filename, content, encoding: utf8|base64, content_hash?}\` (no query), at most ${JSON_CONTENT_LIMIT} bytes of decoded content.`,
      tags,
      upload: CONTRACT.addVersion.upload,
      schema: CONTRACT.addVersion.schema,
      handler: async (req, reply) => {
        const { up, filename } = await versionInput(req, api);
        const key = idempotencyKeyOf(req);
        const { version: v, replayed } = await withUpload(up, api.metrics, api.inflight, req, () =>
          asIdempotencyProblem(() =>
            addVersionOnce(
              ctx,
              principalOf(req),
              req.params.id,
              { filename, body: up.body, expectedDigest: up.expectedDigest, maxBytes: up.maxBytes, size: up.size },
              key,
            ),
          ),
        );
        markReplayed(reply, replayed);
        reply.code(201).header('location', `/v1/artifacts/${v.artifact_id}/versions/${v.version}`);
        return versionView(v);
      },
    }),
    defineRoute({
      id: 'showVersion',
      summary: 'One version',
      tags,
      schema: CONTRACT.showVersion.schema,
      handler: async (req) => versionView(await resolveVersion(ctx, req.params.id, req.params.v)),
    }),
    ...(['getContent', 'headContent'] as const).map((id) =>
      defineRoute({
        id,
        summary:
          id === 'getContent' ? 'The verified content of a version (streamed; Range supported)' : 'The headers of a version’s content',
        description:
          'Every byte is hashed as it is sent and the last chunk is held back until the digest matches; if the stored bytes do not match, the response is aborted (or answered 502 before any byte) and never completes. `ETag` and `Repr-Digest` carry the digest so clients can check too.',
        tags,
        download: CONTRACT[id].download,
        schema: CONTRACT[id].schema,
        handler: async (req, reply) => {
          const { id: artifactId, v: ref } = req.params;
          // An alias is resolved once: the headers and the bytes are of the same version.
          const v = await resolveVersion(ctx, artifactId, ref);
          return serveRepresentation(
            api,
            req,
            reply,
            { digest: v.content_hash, size: v.size, filename: v.filename },
            async (range) => (await openVersionContent(ctx, artifactId, v.version, range)).stream,
            id === 'headContent',
          );
        },
      }),
    ),
  ];
}

/** An artifact's audit history and its verification. */
function auditViewRoutes(api: Api): AnyRouteDef[] {
  const { ctx } = api;
  return [
    defineRoute({
      id: 'history',
      summary: 'The merged, ordered audit history of an artifact',
      tags: ['audit'],
      schema: CONTRACT.history.schema,
      handler: async (req) => ({ artifact_id: req.params.id, entries: await history(ctx, req.params.id) }),
    }),
    defineRoute({
      id: 'verification',
      summary: 'Re-hash every object the artifact names and recompute its audit chain',
      description: 'Always 200 when the artifact exists; `ok` says whether everything verified, `findings` what did not.',
      tags: ['audit'],
      schema: CONTRACT.verification.schema,
      handler: async (req) => {
        const id = req.params.id;
        const content = await verifyObjects(ctx, await collectRefs(ctx, id));
        const { artifact_id: _a, ...audit } = await verifyArtifactAudit(ctx, id);
        return { artifact_id: id, ok: content.findings.length === 0 && audit.ok, content, audit };
      },
    }),
  ];
}
