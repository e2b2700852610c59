/**
 * Compensation: a rollback artifact with its own ULID and lifecycle, stored as
 * `artifacts/{id}/v{n}/rollback-{filename}` beside the version it compensates. Creating it moves that
 * version to COMPENSATING and writes the Compensation item (COMP#, GSI1 COMP_STATE#) in the same
 * transaction; the item follows the compensation artifact's state, and its execution settles the
 * compensated version (COMPENSATED, or back to the prior state).
 */
import { afterOps, readBackOr, readHead, runAudited } from '../audit/chain.ts';
import { ConditionFailed, Conflict, MaintenanceInProgress } from '../core/errors.ts';
import { artifactPk, COMPENSATION_SK_PREFIX, compensationSk, compStateGsiPk, createdGsiSk, HEAD_SK, indexShard } from '../core/keys.ts';
import { rollbackKey, validateFilename } from '../core/object-keys.ts';
import { cond, queryAll } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { fenceCheck } from '../system/fence.ts';
import { assertActor } from './access.ts';
import { type ContentInput, nameEntryOps, prepareNewArtifact } from './artifacts.ts';
import { UPLOAD_RESERVATION_TTL_MS } from './executions.ts';
import { ensureLease, instanceOf, ownerDead, ownerTag, whileLeased } from './instance.ts';
import type { HeadItem, Principal, VersionItem } from './model.ts';
import { merge, planMove } from './moves.ts';
import { combineCountOps, versionCreationOps } from './state-counts.ts';
import { validateVersionNumber } from './validation.ts';
import { readVersion } from './versions.ts';

export interface CompensationResult {
  compensation: HeadItem;
  version: VersionItem;
  compensated: VersionItem;
}

export async function compensate(
  ctx: ServiceContext,
  actor: Principal,
  artifactId: string,
  version: number,
  input: ContentInput & { reason?: string },
): Promise<CompensationResult> {
  assertActor('compensate', actor);
  const n = validateVersionNumber(version);
  const filename = validateFilename(input.filename);
  const target = await readVersion(ctx.items, artifactId, n);
  if (target.state !== 'EXECUTED' && target.state !== 'FAILED') {
    throw new Conflict(`version ${n} is ${target.state}; only EXECUTED or FAILED versions can be compensated`);
  }
  const key = rollbackKey(artifactId, n, filename);
  // Refused early when a committed compensation holds the key. The key is create-only (content-store.ts):
  // bytes an interrupted attempt left there are never replaced — a retry with the same bytes records
  // them, other bytes fail CONFLICT at publication (choose another --filename). A late writer whose
  // reservation was taken over cannot replace what the newer one committed, and if it published first
  // the newer one fails at publication instead; the commit's state move (EXECUTED/FAILED →
  // COMPENSATING) lets only one of them record the key.
  const committed = await queryAll(ctx.items, { pk: artifactPk(artifactId), sk: { beginsWith: COMPENSATION_SK_PREFIX }, consistent: true });
  if (committed.some((c) => c.content_key === key))
    throw new Conflict(`${key} already exists; use another --filename for a new compensation`);
  // One compensation upload per version at a time. The reservation is on the compensated version, names
  // its owner (instance.ts), is taken over at once when that owner is dead or else once stale, is
  // released on failure and removed by the commit.
  const now = ctx.clock.now();
  const stamp = now.toISOString();
  const stale = new Date(now.getTime() - UPLOAD_RESERVATION_TTL_MS).toISOString();
  const held = target.rollback_upload_at as string | undefined;
  const takeOver = held !== undefined && (await ownerDead(ctx, target.rollback_upload_owner)) ? [cond.eq('rollback_upload_at', held)] : [];
  const versionKey = { PK: target.PK, SK: target.SK };
  const release = () =>
    ctx.items
      .update(versionKey, { remove: [...ROLLBACK_RESERVATION] }, { condition: cond.eq('rollback_upload_at', stamp) })
      .catch(() => {});
  await ensureLease(ctx);
  try {
    await ctx.items.transactWrite([
      {
        op: 'update',
        key: versionKey,
        update: { set: { rollback_upload: filename, rollback_upload_at: stamp, rollback_upload_owner: ownerTag(instanceOf(ctx)) } },
        condition: cond.and(
          cond.in('state', ['EXECUTED', 'FAILED']),
          cond.or(cond.attrNotExists('rollback_upload_at'), cond.lt('rollback_upload_at', stale), ...takeOver),
        ),
      },
      fenceCheck(ctx, { kind: 'artifacts', ids: [artifactId] }),
    ]);
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 1) throw new MaintenanceInProgress();
    if (e instanceof ConditionFailed) throw new Conflict(`a compensation of version ${n} is being uploaded, or the version changed; retry`);
    await release();
    throw e;
  }
  try {
    return await whileLeased(ctx, () => compensateReserved(ctx, actor, { artifactId, n, filename, key, input }));
  } catch (e) {
    await release();
    throw e;
  }
}

const ROLLBACK_RESERVATION = ['rollback_upload', 'rollback_upload_at', 'rollback_upload_owner'] as const;

async function compensateReserved(
  ctx: ServiceContext,
  actor: Principal,
  a: { artifactId: string; n: number; filename: string; key: string; input: ContentInput & { reason?: string } },
): Promise<CompensationResult> {
  const { artifactId, n, filename, key, input } = a;
  const origHead = await readHead(ctx, artifactId);
  const prepared = await prepareNewArtifact(
    ctx,
    actor,
    {
      name: `${origHead.name} (compensation of v${n})`,
      kind: 'compensation',
      filename,
      body: input.body,
      expectedDigest: input.expectedDigest,
      maxBytes: input.maxBytes,
      quorum: origHead.quorum,
    },
    { contentKeyFor: () => key, headExtra: { compensates: { artifact_id: artifactId, version: n } } },
  );
  const compId = prepared.head.artifact_id;
  let compensated: VersionItem | undefined;
  const result = await runAudited(ctx, [artifactId], async (heads) => {
    const head = heads[artifactId] as HeadItem;
    const v = await readVersion(ctx.items, artifactId, n);
    const at = ctx.clock.now().toISOString();
    const move = planMove(head, v, 'COMPENSATING', 'compensation', actor, at, {
      reason: input.reason ?? `compensation ${compId} created`,
      set: { compensating_from: v.state },
      remove: [...ROLLBACK_RESERVATION],
      fields: { compensation_artifact_id: compId },
    });
    const compEntry = {
      type: 'compensation' as const,
      keys: (_seq: number, _ts: string) => ({ SK: compensationSk(compId), GSI1SK: createdGsiSk(prepared.version.created_at, artifactId) }),
      fields: {
        comp_artifact_id: compId,
        version: n,
        filename,
        content_key: key,
        content_hash: prepared.version.content_hash,
        size: prepared.version.size,
        created_by: actor,
      },
      // In the compensation artifact's index shard: moves.ts keeps it there as its version moves.
      view: { state: 'DRAFT', GSI1PK: compStateGsiPk('DRAFT', indexShard(compId, ctx.layout.index_shards)), updated_at: at },
    };
    const plan = merge({ ops: [], entries: [compEntry] }, move);
    compensated = afterOps(v, plan.ops);
    return {
      chains: [
        { artifactId, entries: plan.entries },
        { artifactId: compId, newHead: prepared.head, entries: [prepared.creation] },
      ],
      ops: combineCountOps([
        ...plan.ops,
        ...versionCreationOps(prepared.version),
        ...nameEntryOps(ctx, prepared.head),
        ...prepared.indexOps,
      ]),
      published: [prepared.version.content_key, prepared.version.metadata_key],
    };
  });
  // What the commit wrote, should reading it back fail: the new HEAD carries its creation entry.
  const creation = result.items.find((i) => i.artifact_id === compId);
  const committedHead = { ...prepared.head, audit_seq: creation?.seq, audit_head_hash: creation?.hash } as HeadItem;
  return {
    compensation: await readBackOr(
      async () =>
        ((await ctx.items.get({ PK: prepared.head.PK, SK: HEAD_SK }, { consistent: true })) as HeadItem | undefined) ?? committedHead,
      () => committedHead,
    ),
    version: prepared.version,
    compensated: await readBackOr(
      () => readVersion(ctx.items, artifactId, n),
      () => compensated as VersionItem,
    ),
  };
}
