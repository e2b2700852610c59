/**
 * The manual moves: propose (which supersedes earlier open versions in the same transaction, and
 * re-opens an APPROVED version whose approvals expired), withdraw, and the generic `transition --to`.
 * Every move is planned by planMove (moves.ts) against the table in state-machine.ts.
 */
import { AUDIT_RESERVED_OPS, afterOps, readBackOr, runAudited } from '../audit/chain.ts';
import { Conflict, InvalidInput } from '../core/errors.ts';
import { MAX_TRANSACT_OPS } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertActor } from './access.ts';
import { countingApprovals, listApprovals } from './approvals.ts';
import type { HeadItem, Principal, VersionItem } from './model.ts';
import { merge, type Planned, planMove } from './moves.ts';
import { OPEN_STATES, type VersionState } from './state-machine.ts';
import { validateText, validateVersionNumber } from './validation.ts';
import { listVersions, readVersion } from './versions.ts';

export { type MoveOptions, merge, type Planned, planMove } from './moves.ts';

function reasonOf(reason: unknown): string | undefined {
  return reason === undefined ? undefined : validateText('reason', reason, { min: 0, max: 1000 });
}

/**
 * DRAFT → PROPOSED; earlier versions still open (DRAFT, PROPOSED, APPROVED) become SUPERSEDED. An
 * APPROVED version whose approvals no longer reach the quorum goes back to PROPOSED the same way.
 */
export async function propose(
  ctx: ServiceContext,
  actor: Principal,
  artifactId: string,
  version?: number,
  reason?: string,
): Promise<VersionItem> {
  assertActor('propose', actor);
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
    const parts = [await planProposal(ctx, head, target, actor, at, why)];
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

/**
 * The move that opens a new proposal round (approvals of earlier rounds never count again). From
 * APPROVED it is legal only when the approvals have expired or no longer bind the content: the reason
 * recorded says how many were still valid.
 */
async function planProposal(
  ctx: ServiceContext,
  head: HeadItem,
  target: VersionItem,
  actor: Principal,
  at: string,
  why: string | undefined,
): Promise<Planned> {
  const set = { proposal_round: target.proposal_round + 1 };
  if (target.state !== 'APPROVED') return planMove(head, target, 'PROPOSED', 'manual', actor, at, { reason: why, set });
  const valid = countingApprovals(await listApprovals(ctx, head.artifact_id), target, ctx.clock.now()).length;
  if (valid >= head.quorum) {
    throw new Conflict(
      `version ${target.version} is APPROVED with ${valid} valid approval(s) (quorum ${head.quorum}); start its run instead`,
      {
        valid,
        quorum: head.quorum,
      },
    );
  }
  const expired = `approvals expired: ${valid} of ${head.quorum} still valid`;
  return planMove(head, target, 'PROPOSED', 'reproposal', actor, at, { reason: why ? `${expired}; ${why}` : expired, set });
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
  assertActor('propose', actor);
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
