/**
 * State changes: the one planner every operation uses (planMove), and the manual moves — propose
 * (which supersedes earlier open versions in the same transaction), withdraw, and the generic
 * `transition --to`.
 */
import type { AuditDraft } from '../audit/chain.ts';
import { AUDIT_RESERVED_OPS, afterOps, readBackOr, runAudited } from '../audit/chain.ts';
import { Conflict, InvalidInput } from '../core/errors.ts';
import { artifactPk, compensationSk, compStateGsiPk } from '../core/keys.ts';
import { cond, MAX_TRANSACT_OPS, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from './context.ts';
import type { HeadItem, Principal, VersionItem } from './model.ts';
import { OPEN_STATES, requireMove, type TransitionVia, type VersionState } from './state-machine.ts';
import { validateText, validateVersionNumber } from './validation.ts';
import { listVersions, readVersion, stateChangeOp, transitionDraft } from './versions.ts';

export interface MoveOptions {
  reason?: string | undefined;
  /** Extra attributes set on the version item. */
  set?: Record<string, unknown>;
  remove?: string[];
  /** Extra fields recorded in the transition entry. */
  fields?: Record<string, unknown>;
}

export interface Planned {
  ops: TransactOp[];
  entries: AuditDraft[];
}

/**
 * Plans one legal move: the conditional version update, its Transition entry and, for a compensation
 * artifact, keeping its Compensation item (on the compensated artifact) in step.
 */
export function planMove(
  head: HeadItem,
  v: VersionItem,
  to: VersionState,
  via: TransitionVia,
  actor: Principal,
  at: string,
  o: MoveOptions = {},
): Planned {
  requireMove(v.state, to, via);
  const ops: TransactOp[] = [stateChangeOp(v, to, at, o.set ?? {}, o.remove ?? [])];
  if (head.compensates) {
    ops.push({
      op: 'update',
      key: { PK: artifactPk(head.compensates.artifact_id), SK: compensationSk(head.artifact_id) },
      update: { set: { state: to, GSI1PK: compStateGsiPk(to), updated_at: at } },
      condition: cond.exists(),
    });
  }
  const entries = [transitionDraft(head.artifact_id, { version: v.version, from: v.state, to, actor, reason: o.reason, ...o.fields })];
  return { ops, entries };
}

export function merge(...parts: Planned[]): Planned {
  return { ops: parts.flatMap((p) => p.ops), entries: parts.flatMap((p) => p.entries) };
}

function reasonOf(reason: unknown): string | undefined {
  return reason === undefined ? undefined : validateText('reason', reason, { min: 0, max: 1000 });
}

/** DRAFT → PROPOSED; earlier versions still open (DRAFT, PROPOSED, APPROVED) become SUPERSEDED. */
export async function propose(
  ctx: ServiceContext,
  actor: Principal,
  artifactId: string,
  version?: number,
  reason?: string,
): Promise<VersionItem> {
  const why = reasonOf(reason);
  let proposed: VersionItem | undefined;
  let committed: VersionItem | undefined;
  await runAudited(ctx, [artifactId], async (heads) => {
    const head = heads[artifactId] as HeadItem;
    const versions = await listVersions(ctx.items, artifactId);
    const target =
      version === undefined ? versions[versions.length - 1] : versions.find((v) => v.version === validateVersionNumber(version));
    if (!target) throw new InvalidInput(`artifact ${artifactId} has no version ${String(version)}`);
    const at = ctx.clock.now().toISOString();
    const parts = [
      planMove(head, target, 'PROPOSED', 'manual', actor, at, { reason: why, set: { proposal_round: target.proposal_round + 1 } }),
    ];
    for (const older of versions) {
      if (older.version < target.version && OPEN_STATES.includes(older.state)) {
        parts.push(planMove(head, older, 'SUPERSEDED', 'supersede', actor, at, { reason: `superseded by version ${target.version}` }));
      }
    }
    const plan = merge(...parts);
    if (plan.ops.length + plan.entries.length + AUDIT_RESERVED_OPS > MAX_TRANSACT_OPS) {
      throw new Conflict(`too many open versions to supersede in one transaction; archive or supersede older versions first`);
    }
    proposed = { ...target, state: 'PROPOSED' };
    committed = afterOps(target, plan.ops);
    return { chains: [{ artifactId, entries: plan.entries }], ops: plan.ops };
  });
  return readBackOr(
    () => readVersion(ctx.items, artifactId, (proposed as VersionItem).version),
    () => committed as VersionItem,
  );
}

/** A manual move (`alp artifact transition --to`, `withdraw`). PROPOSED goes through propose(). */
export async function transition(
  ctx: ServiceContext,
  actor: Principal,
  artifactId: string,
  version: number,
  to: VersionState,
  reason?: string,
): Promise<VersionItem> {
  if (to === 'PROPOSED') return propose(ctx, actor, artifactId, version, reason);
  const why = reasonOf(reason);
  const n = validateVersionNumber(version);
  let committed: VersionItem | undefined;
  await runAudited(ctx, [artifactId], async (heads) => {
    const head = heads[artifactId] as HeadItem;
    const v = await readVersion(ctx.items, artifactId, n);
    const plan = planMove(head, v, to, 'manual', actor, ctx.clock.now().toISOString(), { reason: why });
    committed = afterOps(v, plan.ops);
    return { chains: [{ artifactId, entries: plan.entries }], ops: plan.ops };
  });
  return readBackOr(
    () => readVersion(ctx.items, artifactId, n),
    () => committed as VersionItem,
  );
}

export function withdraw(
  ctx: ServiceContext,
  actor: Principal,
  artifactId: string,
  version: number,
  reason?: string,
): Promise<VersionItem> {
  return transition(ctx, actor, artifactId, version, 'DRAFT', reason ?? 'withdrawn');
}
