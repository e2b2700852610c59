/**
 * The lifecycle of a version over HTTP: propose/withdraw, human decisions, executions and their
 * outputs, compensation, provenance, archive. Each handler calls the one service function that owns
 * the rule.
 */
import { entryView } from '../../audit/history.ts';
import { parseDuration } from '../../core/clock.ts';
import { InvalidInput } from '../../core/errors.ts';
import { resolveVersionRef } from '../../lifecycle/aliases.ts';
import { decide } from '../../lifecycle/approvals.ts';
import { archiveArtifact } from '../../lifecycle/archive.ts';
import { headView, parseState } from '../../lifecycle/artifacts.ts';
import { signedProvenance } from '../../lifecycle/attestations.ts';
import { compensate } from '../../lifecycle/compensation.ts';
import { executionView, finishExecution, readExecution, startExecution, uploadOutput } from '../../lifecycle/executions.ts';
import { addProvenance, inTotoStatement, provenanceStepView } from '../../lifecycle/provenance.ts';
import { approvalsOf, executionOutput, executionsOf, openExecutionOutput, provenanceOf } from '../../lifecycle/reads.ts';
import { transition } from '../../lifecycle/transitions.ts';
import { versionView } from '../../lifecycle/versions.ts';
import type { Item } from '../../store/item-store.ts';
import { principalOf } from '../auth.ts';
import { CONTRACT } from '../contract.ts';
import { type AnyRouteDef, type Api, defineRoute } from '../define.ts';
import { serveRepresentation, uploadInput, withUpload } from '../transfer.ts';

export function lifecycleRoutes(api: Api): AnyRouteDef[] {
  return [...reviewRoutes(api), ...executionRoutes(api), ...compensationProvenanceArchiveRoutes(api)];
}

/** Transitions and the approval decisions. */
function reviewRoutes(api: Api): AnyRouteDef[] {
  const { ctx } = api;
  return [
    defineRoute({
      id: 'transition',
      summary: 'A manual state change: PROPOSED (propose; earlier open versions become SUPERSEDED) or DRAFT (withdraw)',
      description:
        'Every other move happens through its own operation (approvals, executions, compensation, archive); asking for it here is ILLEGAL_TRANSITION (409).',
      tags: ['lifecycle'],
      schema: CONTRACT.transition.schema,
      handler: async (req) =>
        versionView(
          await transition(
            ctx,
            principalOf(req),
            req.params.id,
            await resolveVersionRef(ctx, req.params.id, req.params.v),
            parseState(req.body.to),
            req.body.reason,
          ),
        ),
    }),
    defineRoute({
      id: 'decide',
      summary: 'Approve or reject a PROPOSED version (humans only)',
      description:
        'The approval binds the content hash (the version’s, or `content_hash` if given), carries `evidence_ref` and an expiry. Reaching the quorum moves the version to APPROVED; a rejection moves it to REJECTED.',
      tags: ['lifecycle'],
      schema: CONTRACT.decide.schema,
      handler: async (req, reply) => {
        const b = req.body;
        let expiresInMs: number | undefined;
        if (b.expires_in !== undefined) {
          expiresInMs = parseDuration(b.expires_in);
          if (expiresInMs === undefined) throw new InvalidInput('expires_in takes a duration like 7d, 12h, 30m');
        }
        const n = await resolveVersionRef(ctx, req.params.id, req.params.v);
        const { approval, version } = await decide(ctx, principalOf(req), req.params.id, n, {
          decision: b.decision,
          evidenceRef: b.evidence_ref,
          expiresAt: b.expires_at,
          expiresInMs,
          contentHash: b.content_hash,
          comment: b.comment,
        });
        reply.code(201);
        return { approval: entryView(approval as unknown as Item), version: versionView(version) };
      },
    }),
    defineRoute({
      id: 'listApprovals',
      summary: 'Every approval and rejection of an artifact, oldest first',
      tags: ['lifecycle'],
      schema: CONTRACT.listApprovals.schema,
      handler: async (req) => ({ artifact_id: req.params.id, approvals: await approvalsOf(ctx, req.params.id) }),
    }),
  ];
}

/** Executions: start, list, show, their outputs (upload, download), finish */
function executionRoutes(api: Api): AnyRouteDef[] {
  const { ctx } = api;
  return [
    defineRoute({
      id: 'startExecution',
      summary: 'Start an execution: APPROVED → EXECUTING after re-checking the approvals',
      tags: ['executions'],
      schema: CONTRACT.startExecution.schema,
      handler: async (req, reply) => {
        const e = await startExecution(ctx, principalOf(req), req.params.id, await resolveVersionRef(ctx, req.params.id, req.params.v));
        reply.code(201).header('location', `/v1/executions/${e.run_id}`);
        return executionView(e);
      },
    }),
    defineRoute({
      id: 'listExecutions',
      summary: 'The executions of an artifact',
      tags: ['executions'],
      schema: CONTRACT.listExecutions.schema,
      handler: async (req) => ({ artifact_id: req.params.id, executions: await executionsOf(ctx, req.params.id) }),
    }),
    defineRoute({
      id: 'showExecution',
      summary: 'An execution and its outputs',
      tags: ['executions'],
      schema: CONTRACT.showExecution.schema,
      handler: async (req) => executionView(await readExecution(ctx, req.params.run)),
    }),
    defineRoute({
      id: 'uploadOutput',
      summary: 'Upload output.json, stdout.log or stderr.log of a running execution (raw body, streamed; once)',
      tags: ['executions'],
      upload: CONTRACT.uploadOutput.upload,
      schema: CONTRACT.uploadOutput.schema,
      handler: async (req, reply) => {
        const up = uploadInput(req, api.maxUploadBytes, api.metrics);
        const rec = await withUpload(up, api.metrics, api.inflight, req, () =>
          uploadOutput(ctx, principalOf(req), req.params.run, req.params.output, up.body, {
            maxBytes: up.maxBytes,
            size: up.size,
            ...(up.expectedDigest ? { expectedDigest: up.expectedDigest } : {}),
          }),
        );
        reply.code(201);
        return rec;
      },
    }),
    ...(['getOutput', 'headOutput'] as const).map((id) =>
      defineRoute({
        id,
        summary:
          id === 'getOutput'
            ? 'The verified bytes of an execution output (streamed; Range supported)'
            : 'The headers of an execution output',
        tags: ['executions'],
        download: CONTRACT[id].download,
        schema: CONTRACT[id].schema,
        handler: async (req, reply) => {
          const { run, output } = req.params;
          const rec = await executionOutput(ctx, run, output);
          return serveRepresentation(
            api,
            req,
            reply,
            { digest: rec.digest, size: rec.size, filename: rec.name },
            async (range) => (await openExecutionOutput(ctx, run, output, range)).stream,
            id === 'headOutput',
          );
        },
      }),
    ),
    defineRoute({
      id: 'finishExecution',
      summary: 'Finish an execution: EXECUTING → EXECUTED (SUCCEEDED) or FAILED',
      tags: ['executions'],
      schema: CONTRACT.finishExecution.schema,
      handler: async (req) =>
        executionView(
          await finishExecution(ctx, principalOf(req), req.params.run, {
            status: req.body.status,
            exitCode: req.body.exit_code,
            ...(req.body.signal !== undefined ? { signal: req.body.signal } : {}),
          }),
        ),
    }),
  ];
}

/** Compensation, provenance steps, archiving. */
function compensationProvenanceArchiveRoutes(api: Api): AnyRouteDef[] {
  const { ctx } = api;
  return [
    defineRoute({
      id: 'compensate',
      summary: 'Create the compensation (rollback) artifact of an EXECUTED or FAILED version from the raw body',
      description:
        'The content is stored as rollback-{filename} beside the compensated version; the compensation artifact has its own lifecycle.',
      tags: ['lifecycle'],
      upload: CONTRACT.compensate.upload,
      schema: CONTRACT.compensate.schema,
      handler: async (req, reply) => {
        const n = await resolveVersionRef(ctx, req.params.id, req.params.v);
        const up = uploadInput(req, api.maxUploadBytes, api.metrics);
        const r = await withUpload(up, api.metrics, api.inflight, req, () =>
          compensate(ctx, principalOf(req), req.params.id, n, {
            filename: req.query.filename,
            body: up.body,
            expectedDigest: up.expectedDigest,
            maxBytes: up.maxBytes,
            size: up.size,
            ...(req.query.reason !== undefined ? { reason: req.query.reason } : {}),
          }),
        );
        reply.code(201).header('location', `/v1/artifacts/${r.compensation.artifact_id}`);
        return { compensation: headView(r.compensation), version: versionView(r.version), compensated: versionView(r.compensated) };
      },
    }),
    defineRoute({
      id: 'getProvenance',
      summary:
        'The provenance chain, or (format=in-toto) an in-toto Statement v1 with an SLSA Provenance v1 predicate, or (format=dsse) that statement signed',
      description:
        'The statement’s subjects are what the steps produced (their output digests); an artifact without steps, or whose steps produced nothing, has none (404). format=dsse: a DSSE envelope signed by the installation key (GET /v1/keys).',
      tags: ['provenance'],
      schema: CONTRACT.getProvenance.schema,
      handler: async (req) => {
        if (req.query.format === 'in-toto') return inTotoStatement(ctx, req.params.id);
        if (req.query.format === 'dsse') return signedProvenance(ctx, req.params.id);
        return { artifact_id: req.params.id, steps: await provenanceOf(ctx, req.params.id) };
      },
    }),
    defineRoute({
      id: 'addProvenance',
      summary: 'Append a provenance step (hash-chained)',
      tags: ['provenance'],
      schema: CONTRACT.addProvenance.schema,
      handler: async (req, reply) => {
        const step = await addProvenance(ctx, principalOf(req), req.params.id, req.body);
        reply.code(201);
        return provenanceStepView(step);
      },
    }),
    defineRoute({
      id: 'archive',
      summary: 'Archive a settled artifact: copy and verify every object under archive/, then move its versions to ARCHIVED',
      tags: ['lifecycle'],
      schema: CONTRACT.archive.schema,
      handler: async (req) => archiveArtifact(ctx, principalOf(req), req.params.id),
    }),
  ];
}
