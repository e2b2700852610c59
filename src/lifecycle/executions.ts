/**
 * Executions: start (APPROVED → EXECUTING after re-checking the approvals), streamed uploads of
 * output.json / stdout.log / stderr.log, and finish (→ EXECUTED or FAILED). A finished compensation
 * also settles the version it compensates.
 *
 * Uploads reserve their object key on the execution item before any byte is written (`reserved:{name}`,
 * with its owner in `reserved:{name}#owner`), so two uploads never write the same key and an interrupted
 * one is visible as in-flight — until its owner is known dead (instance.ts) or the reservation is older
 * than UPLOAD_RESERVATION_TTL_MS.
 */

import { afterOps, RESERVATION_PREFIX, readBackOr, readHead, runAudited } from '../audit/chain.ts';
import type { Body } from '../content/content-store.ts';
import { isoDate, isoTimestamp } from '../core/clock.ts';
import { ConditionFailed, Conflict, InvalidInput, MaintenanceInProgress, NotFound } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import {
  artifactPk,
  eventGsiSk,
  executionFinishSk,
  executionOutputSk,
  executionSk,
  indexShard,
  RUN_POINTER_SK,
  runGsiPk,
  runPk,
} from '../core/keys.ts';
import { EXECUTION_OUTPUTS, type ExecutionOutput, executionKey } from '../core/object-keys.ts';
import { cond, type Item, queryAll } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertNotFenced, fenceCheck } from '../system/fence.ts';
import { assertActor } from './access.ts';
import { quorumStatus } from './approvals.ts';
import { compensationOutcome } from './compensation-outcome.ts';
import { ensureLease, instanceOf, localVerdict, ownerDead, ownerTag, parseOwner, processInstance, whileLeased } from './instance.ts';
import { type HeadItem, type Principal, SIGNAL_NAME_PATTERN } from './model.ts';
import { merge, planMove } from './moves.ts';
import { combineCountOps } from './state-counts.ts';
import { validateVersionNumber } from './validation.ts';
import { readVersion } from './versions.ts';

/** An interrupted upload's reservation may be taken over after this long, whoever holds it (the last resort). */
export const UPLOAD_RESERVATION_TTL_MS = 60 * 60 * 1000;
/** `reserved:{name}` + this: the owner (instance.ts ownerTag) of the reservation. */
export const RESERVATION_OWNER_SUFFIX = '#owner';

export interface ExecutionItem extends Item {
  type: 'execution';
  artifact_id: string;
  version: number;
  run_id: string;
  status: 'RUNNING' | 'SUCCEEDED' | 'FAILED';
  started_by: Principal;
  content_hash: string;
  outputs: Record<string, { key: string; digest: string; size: number }>;
  exit_code?: number;
  /** The signal that ended the command (`SIGKILL`), when one did: the run is FAILED. */
  signal?: string;
  finished_at?: string;
}

const SIGNAL_NAME = new RegExp(SIGNAL_NAME_PATTERN);

export async function startExecution(ctx: ServiceContext, actor: Principal, artifactId: string, version: number): Promise<ExecutionItem> {
  assertActor('startExecution', actor);
  const n = validateVersionNumber(version);
  await assertNotFenced(ctx, { kind: 'artifacts', ids: [artifactId] });
  const runId = newId(ctx.clock);
  const result = await runAudited(ctx, [artifactId], async (heads) => {
    const head = heads[artifactId] as HeadItem;
    const v = await readVersion(ctx.items, artifactId, n);
    const now = ctx.clock.now();
    if (v.state === 'APPROVED') {
      const { counting: valid, policy, met } = await quorumStatus(ctx, head, v, now);
      if (!met) {
        throw new Conflict(
          `version ${n} no longer has ${policy.quorum} valid approval(s) binding ${v.content_hash} under the installation approval policy (version ${policy.version}) (${valid.length} still count; the others expired or do not count under it); propose it again for fresh approvals: alp artifact propose ${artifactId} --version ${n} (HTTP: POST /v1/artifacts/${artifactId}/versions/${n}/transitions {"to":"PROPOSED"})`,
          { valid: valid.length, quorum: policy.quorum, policy_version: policy.version },
        );
      }
    }
    const at = isoTimestamp(now);
    const move = planMove(head, v, 'EXECUTING', 'execution', actor, at, {
      reason: `run ${runId}`,
      set: { current_run: runId },
      fields: { run_id: runId },
    });
    const exec = {
      type: 'execution' as const,
      // No GSI1 keys here: every upload and the finish rewrite the execution item (see the pointer).
      keys: () => ({ SK: executionSk(runId) }),
      fields: { run_id: runId, version: n, started_by: actor, content_hash: v.content_hash },
      view: { status: 'RUNNING', outputs: {} },
    };
    // The run's RUN#{date} entry (GSI1) is on its pointer, written once, keyed by the start time.
    const pointer = {
      PK: runPk(runId),
      SK: RUN_POINTER_SK,
      GSI1PK: runGsiPk(isoDate(now), indexShard(artifactId, ctx.layout.index_shards)),
      GSI1SK: eventGsiSk(at, artifactId),
      type: 'run_pointer',
      run_id: runId,
      artifact_id: artifactId,
      version: n,
    };
    const plan = merge({ ops: [{ op: 'put', item: pointer, condition: cond.notExists() }], entries: [exec] }, move);
    return { chains: [{ artifactId, entries: plan.entries }], ops: plan.ops };
  });
  return readBackOr(
    () => readExecution(ctx, runId),
    () => result.items.find((i) => i.type === 'execution') as ExecutionItem,
  );
}

export async function readExecution(ctx: ServiceContext, runId: string): Promise<ExecutionItem> {
  if (typeof runId !== 'string' || !/^[0-9A-HJKMNP-TV-Z]{26}$/.test(runId)) throw new NotFound(`no run ${String(runId).slice(0, 40)}`);
  const pointer = await ctx.items.get({ PK: runPk(runId), SK: RUN_POINTER_SK }, { consistent: true });
  if (!pointer) throw new NotFound(`no run ${runId}`);
  const exec = await ctx.items.get({ PK: artifactPk(pointer.artifact_id as string), SK: executionSk(runId) }, { consistent: true });
  if (!exec) throw new NotFound(`no run ${runId}`);
  return exec as ExecutionItem;
}

export function validateOutputName(name: string): ExecutionOutput {
  if (!(EXECUTION_OUTPUTS as readonly string[]).includes(name))
    throw new InvalidInput(`output must be one of ${EXECUTION_OUTPUTS.join(', ')}`);
  return name as ExecutionOutput;
}

export async function uploadOutput(
  ctx: ServiceContext,
  actor: Principal,
  runId: string,
  name: string,
  body: Body,
  opts: { maxBytes?: number; expectedDigest?: import('../core/digest.ts').Digest; size?: number | undefined } = {},
): Promise<{ key: string; digest: string; size: number }> {
  assertActor('uploadOutput', actor);
  const output = validateOutputName(name);
  const exec = await readExecution(ctx, runId);
  await assertNotFenced(ctx, { kind: 'artifacts', ids: [exec.artifact_id] });
  if (exec.status !== 'RUNNING') throw new Conflict(`run ${runId} is ${exec.status}; outputs can only be uploaded while it runs`);
  if (exec.outputs[output]) throw new Conflict(`run ${runId} already has ${output}; outputs are immutable`);
  const reservation = `${RESERVATION_PREFIX}${output}`;
  const owner = `${reservation}${RESERVATION_OWNER_SUFFIX}`;
  const now = ctx.clock.now();
  // The reservation holds the time it was taken and its owner; it can be taken over (conditioned on
  // that exact time) at once when its owner is dead, else once older than UPLOAD_RESERVATION_TTL_MS.
  const existing = exec[reservation] as string | undefined;
  if (existing && now.getTime() - new Date(existing).getTime() <= UPLOAD_RESERVATION_TTL_MS && !(await ownerDead(ctx, exec[owner]))) {
    throw new Conflict(`an upload of ${output} for run ${runId} is in progress`);
  }
  const stamp = isoTimestamp(now);
  // Takes back the reservation if it is still ours (conditioned on our stamp); never fails the caller.
  const release = () =>
    ctx.items.update({ PK: exec.PK, SK: exec.SK }, { remove: [reservation, owner] }, { condition: cond.eq(reservation, stamp) }).then(
      () => {},
      () => {},
    );
  // The owner's lease is valid for a while before the reservation names it (instance.ts ensureLease).
  await ensureLease(ctx);
  try {
    // The reservation is a write of a publisher: fenced like every other one.
    await ctx.items.transactWrite([
      {
        op: 'update',
        key: { PK: exec.PK, SK: exec.SK },
        update: { set: { [reservation]: stamp, [owner]: ownerTag(instanceOf(ctx)) } },
        condition: cond.and(cond.eq('status', 'RUNNING'), existing ? cond.eq(reservation, existing) : cond.attrNotExists(reservation)),
      },
      fenceCheck(ctx, { kind: 'artifacts', ids: [exec.artifact_id] }),
    ]);
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 1) throw new MaintenanceInProgress();
    if (e instanceof ConditionFailed) throw new Conflict(`an upload of ${output} for run ${runId} is in progress, or the run finished`);
    // The outcome is unknown (a timeout may hide a write that took effect): take back what may be ours.
    await release();
    throw e;
  }
  // The key is create-only (content-store.ts: a committed immutable key is never rewritten), so the
  // writer whose bytes are at the key is the only one whose record can name them:
  // - a late writer (its reservation taken over) that publishes after the newer one fails CONFLICT in
  //   the engine and leaves nothing; with the very same bytes its publish succeeds but its commit finds
  //   the committed output and fails CONFLICT;
  // - a late writer that publishes first wins the key; the newer one then fails CONFLICT at publication,
  //   and the late one's commit records its own bytes (the commit is conditioned on no output yet, not
  //   on the reservation: whoever holds the key must be able to commit, or the key is lost to nobody);
  // - a writer that dies between publication and commit leaves unrecorded bytes at the key: a retry
  //   with the same bytes records them, other bytes are CONFLICT (never a replacement).
  const key = executionKey(runId, output);
  let put: { digest: string; size: number };
  try {
    put = await whileLeased(ctx, () =>
      ctx.content.put(key, body, {
        ...(opts.maxBytes !== undefined ? { maxBytes: opts.maxBytes } : {}),
        ...(opts.expectedDigest ? { expectedDigest: opts.expectedDigest } : {}),
        ...(opts.size !== undefined ? { sizeHint: opts.size } : {}),
      }),
    );
  } catch (e) {
    // A failed put left nothing at the key: release the reservation (if it is still ours) so the upload
    // can be retried at once instead of after UPLOAD_RESERVATION_TTL_MS.
    await release();
    throw e;
  }
  const record = { key, digest: put.digest, size: put.size };
  // If the commit fails the reservation is released too (if still ours), so that the upload can be
  // retried at once; after a commit it is a leftover view attribute that nothing reads.
  await runAudited(ctx, [exec.artifact_id], async () => {
    const current = await readExecution(ctx, runId);
    if (current.status !== 'RUNNING') throw new Conflict(`run ${runId} finished while ${output} was uploading`);
    if (current.outputs[output]) throw new Conflict(`run ${runId} already has ${output}`);
    return {
      chains: [
        {
          artifactId: exec.artifact_id,
          entries: [
            {
              type: 'execution_output',
              keys: () => ({ SK: executionOutputSk(runId, output) }),
              fields: { run_id: runId, name: output, ...record, uploaded_by: actor },
            },
          ],
        },
      ],
      published: [key],
      ops: [
        {
          op: 'update',
          key: { PK: current.PK, SK: current.SK },
          update: { set: { outputs: { ...current.outputs, [output]: record } } },
          condition: cond.eq('status', 'RUNNING'),
        },
      ],
    };
  }).catch(async (e: unknown) => {
    await release();
    throw e;
  });
  return record;
}

export async function finishExecution(
  ctx: ServiceContext,
  actor: Principal,
  runId: string,
  input: { status: string; exitCode: number; signal?: string },
): Promise<ExecutionItem> {
  assertActor('finishExecution', actor);
  if (input.status !== 'SUCCEEDED' && input.status !== 'FAILED') throw new InvalidInput('status must be SUCCEEDED or FAILED');
  if (!Number.isInteger(input.exitCode) || input.exitCode < -2147483648 || input.exitCode > 2147483647)
    throw new InvalidInput('exit code must be an integer');
  if (input.signal !== undefined && !(typeof input.signal === 'string' && SIGNAL_NAME.test(input.signal)))
    throw new InvalidInput('signal must be a signal name such as SIGKILL');
  if (input.signal !== undefined && input.status !== 'FAILED') throw new InvalidInput('a run ended by a signal is FAILED');
  const status = input.status;
  const signal = input.signal !== undefined ? { signal: input.signal } : {};
  const exec0 = await readExecution(ctx, runId);
  const head0 = await readHead(ctx, exec0.artifact_id);
  const ids = [exec0.artifact_id, ...(head0.compensates ? [head0.compensates.artifact_id] : [])];
  let committed: ExecutionItem | undefined;
  await runAudited(ctx, ids, async (heads) => {
    const head = heads[exec0.artifact_id] as HeadItem;
    const exec = await readExecution(ctx, runId);
    if (exec.status !== 'RUNNING') throw new Conflict(`run ${runId} already finished (${exec.status})`);
    const v = await readVersion(ctx.items, exec.artifact_id, exec.version);
    const at = ctx.clock.now().toISOString();
    const to = status === 'SUCCEEDED' ? 'EXECUTED' : 'FAILED';
    const move = planMove(head, v, to, 'execution', actor, at, {
      reason: `run ${runId} ${status.toLowerCase()} with exit code ${input.exitCode}${input.signal ? ` (killed by ${input.signal})` : ''}`,
      remove: ['current_run'],
      fields: { run_id: runId },
    });
    const finish = {
      type: 'execution_finish' as const,
      keys: () => ({ SK: executionFinishSk(runId) }),
      fields: { run_id: runId, status, exit_code: input.exitCode, ...signal, finished_by: actor, outputs: exec.outputs },
    };
    const viewUpdate = {
      op: 'update' as const,
      key: { PK: exec.PK, SK: exec.SK },
      update: { set: { status, exit_code: input.exitCode, ...signal, finished_at: at } },
      condition: cond.eq('status', 'RUNNING'),
    };
    const plan = merge({ ops: [viewUpdate], entries: [finish] }, move);
    committed = afterOps(exec, [viewUpdate]);
    const chains = [{ artifactId: exec.artifact_id, entries: plan.entries }];
    let ops = plan.ops;
    if (head.compensates) {
      const outcome = await compensationOutcome(ctx, heads, head, status, actor, at);
      chains.push(outcome.chain);
      ops = combineCountOps([...ops, ...outcome.ops]);
    }
    return { chains, ops };
  });
  return readBackOr(
    () => readExecution(ctx, runId),
    () => committed as ExecutionItem,
  );
}

export async function listExecutions(ctx: ServiceContext, artifactId: string): Promise<ExecutionItem[]> {
  const items = await queryAll(ctx.items, { pk: artifactPk(artifactId), sk: { beginsWith: 'EXEC#' }, consistent: true });
  return items.filter((i) => i.type === 'execution') as ExecutionItem[];
}

/** The outputs being uploaded: reserved, not committed, and not held by an owner known dead on this host. */
function uploadsInProgress(e: ExecutionItem): string[] {
  return Object.keys(e)
    .filter((k) => k.startsWith(RESERVATION_PREFIX) && !k.endsWith(RESERVATION_OWNER_SUFFIX))
    .map((k) => k.slice(RESERVATION_PREFIX.length))
    .filter((name) => {
      if (e.outputs[name]) return false;
      const owner = parseOwner(e[`${RESERVATION_PREFIX}${name}${RESERVATION_OWNER_SUFFIX}`]);
      return !owner || localVerdict(owner, processInstance()) !== 'dead';
    });
}

export function executionView(e: ExecutionItem): Record<string, unknown> {
  const reservations = uploadsInProgress(e);
  return {
    run_id: e.run_id,
    artifact_id: e.artifact_id,
    version: e.version,
    status: e.status,
    started_at: e.timestamp,
    started_by: e.started_by,
    content_hash: e.content_hash,
    outputs: e.outputs,
    ...(e.exit_code !== undefined ? { exit_code: e.exit_code } : {}),
    ...(e.signal !== undefined ? { signal: e.signal } : {}),
    ...(e.finished_at ? { finished_at: e.finished_at } : {}),
    ...(reservations.length ? { uploads_in_progress: reservations } : {}),
  };
}
