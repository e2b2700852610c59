/**
 * Read-side helpers for entry points (the HTTP API): per-artifact views that answer NOT_FOUND for an
 * unknown artifact, verified reads of execution outputs, and the readiness probe of both stores.
 */
import type { Readable } from 'node:stream';
import { readHead } from '../audit/chain.ts';
import { entryView } from '../audit/history.ts';
import type { Digest } from '../core/digest.ts';
import { NotFound } from '../core/errors.ts';
import { provenanceKey } from '../core/object-keys.ts';
import type { Item } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertReadable } from '../system/fence.ts';
import { readInstallation } from '../system/installation.ts';
import { listApprovals } from './approvals.ts';
import { getOriginalOrArchived } from './archived-read.ts';
import { type ExecutionItem, executionView, listExecutions, readExecution, validateOutputName } from './executions.ts';
import type { ArchivedObject } from './model.ts';
import { listProvenance, provenanceStepView } from './provenance.ts';

export async function approvalsOf(ctx: ServiceContext, artifactId: string): Promise<Record<string, unknown>[]> {
  await readHead(ctx, artifactId);
  return (await listApprovals(ctx, artifactId)).map((a) => entryView(a as unknown as Item));
}

export async function executionsOf(ctx: ServiceContext, artifactId: string): Promise<Record<string, unknown>[]> {
  await readHead(ctx, artifactId);
  return (await listExecutions(ctx, artifactId)).map(executionView);
}

export async function provenanceOf(ctx: ServiceContext, artifactId: string): Promise<Record<string, unknown>[]> {
  await readHead(ctx, artifactId);
  return (await listProvenance(ctx, artifactId)).map(provenanceStepView);
}

export interface OutputRef {
  run_id: string;
  /** The artifact the run belongs to (its fence shard guards the read). */
  artifact_id: string;
  name: string;
  key: string;
  /** Where the output was uploaded (`key` is its archive copy once the artifact is archived). */
  original_key: string;
  digest: Digest;
  size: number;
}

/** The record of an uploaded execution output (its archive copy once the artifact is archived). */
export async function executionOutput(ctx: ServiceContext, runId: string, name: string): Promise<OutputRef> {
  const output = validateOutputName(name);
  const exec: ExecutionItem = await readExecution(ctx, runId);
  const rec = exec.outputs[output];
  if (!rec) throw new NotFound(`run ${runId} has no ${output}`);
  const archived = (exec.archive_objects as ArchivedObject[] | undefined)?.find((a) => a.original_key === rec.key);
  return {
    run_id: runId,
    artifact_id: exec.artifact_id,
    name: output,
    key: archived?.archive_key ?? rec.key,
    original_key: rec.key,
    digest: rec.digest as Digest,
    size: rec.size,
  };
}

/**
 * A verified stream of an execution output; fails with IntegrityError if the bytes do not match, and
 * with MAINTENANCE while a maintenance that fences readers holds the fence (checked before the bytes open).
 */
export async function openExecutionOutput(
  ctx: ServiceContext,
  runId: string,
  name: string,
  range?: { start?: number; end?: number },
): Promise<{ output: OutputRef; stream: Readable }> {
  const output = await executionOutput(ctx, runId, name);
  await assertReadable(ctx, { kind: 'artifacts', ids: [output.artifact_id] });
  const keys = { original: output.original_key, archive: output.key === output.original_key ? undefined : output.key };
  const stream = await getOriginalOrArchived(ctx.content, keys, output.digest, { expectedSize: output.size, ...range });
  return { output, stream };
}

/** Both stores answer and the installation exists; throws otherwise. */
export async function readiness(ctx: ServiceContext): Promise<{ installation_id: string; metadata: string; content: string }> {
  const installation = await readInstallation(ctx);
  if (!installation) throw new NotFound('the installation is not initialized (alp init)');
  // A key that never exists: the content store must answer, not find it.
  await ctx.content.head(provenanceKey('00000000000000000000000000'));
  return { installation_id: installation.installation_id, metadata: ctx.items.engine, content: ctx.content.engine };
}
