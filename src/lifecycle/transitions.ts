/**
 * The manual moves: propose (which supersedes earlier open versions, in chunks when there are many, and
 * re-opens an APPROVED version whose approvals expired), withdraw, and the generic `transition --to`.
 * Every move is planned by planMove (moves.ts) against the table in state-machine.ts.
 */
import { AUDIT_RESERVED_OPS, afterOps, readBackOr, runAudited } from '../audit/chain.ts';
import { Conflict, InvalidInput } from '../core/errors.ts';
import { MAX_TRANSACT_OPS, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertActor } from './access.ts';
import { quorumStatus } from './approvals.ts';
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
 *
 * Any number of open versions (issue 16): while more earlier versions are open than fit beside the
 * proposal in one audit transaction, a transaction supersedes a chunk of them (each with its
 * `transition` entry, reason and `superseded_by` naming this proposal); the last transaction proposes
 * the target together with every earlier version still open. Every transaction is built on the HEAD it
 * read and conditioned on it (runAudited), and every chunk first re-checks that the target may still
 * be proposed, so nothing is superseded for a proposal already refused. A crash between chunks leaves
 * settled SUPERSEDED versions with their entries, nothing half-done; a retry lists what is still open
 * and continues.
 *
 * Why racing proposals still end with at most one open proposal (PROPOSED or APPROVED): (1) versions
 * are numbered upwards (a new version is always the latest), and no move leads from a settled state
 * back to an open one, so once every version below n is settled, it stays settled; (2) the final
 * transaction of propose(n) commits only on the HEAD it read (every move of every version of the
 * artifact advances `audit_seq`), so in that one snapshot it moves n to PROPOSED and every open
 * version below n to SUPERSEDED: right after it, no version below n is open, and by (1) none ever will
 * be; (3) two proposals of m < n: if n's final commits first, m is SUPERSEDED and m's next transaction
 * is refused (ILLEGAL_TRANSITION); if m's final commits first, n's final sees m open below n and
 * supersedes it. Chunks only ever supersede versions below their target, which any proposal that wins
 * (the target or a newer one) supersedes too; the same version proposed twice: one wins, the other is
 * refused (PROPOSED → PROPOSED is not a move).
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
  const wanted = version === undefined ? undefined : validateVersionNumber(version);
  const budget = transactionBudget(ctx);
  for (;;) {
    let done: { target: VersionItem; ops: TransactOp[] } | undefined;
    await runAudited(ctx, [artifactId], async (heads) => {
      done = undefined;
      const head = heads[artifactId] as HeadItem;
      const versions = await listVersions(ctx.items, artifactId);
      const target = wanted === undefined ? versions[versions.length - 1] : versions.find((v) => v.version === wanted);
      if (!target) throw new InvalidInput(`artifact ${artifactId} has no version ${String(version)}`);
      const at = ctx.clock.now().toISOString();
      const proposal = await planProposal(ctx, head, target, actor, at, why);
      const older = versions.filter((v) => v.version < target.version && OPEN_STATES.includes(v.state));
      const supersede = (v: VersionItem) =>
        planMove(head, v, 'SUPERSEDED', 'supersede', actor, at, {
          reason: `superseded by version ${target.version}`,
          fields: { superseded_by: target.version },
        });
      const all = merge(proposal, ...older.map(supersede));
      if (cost(all, ctx) <= budget) {
        done = { target, ops: all.ops };
        return { chains: [{ artifactId, entries: all.entries }], ops: all.ops };
      }
      const chunk = fill(older.map(supersede), budget, ctx);
      return { chains: [{ artifactId, entries: chunk.entries }], ops: chunk.ops };
    });
    if (done) {
      const { target, ops } = done;
      // The committed state is worked out only when the read back fails (it costs an update's validation).
      return readBackOr(
        () => readVersion(ctx.items, artifactId, target.version),
        () => afterOps(target, ops),
      );
    }
  }
}

/**
 * Operations a plan may use in one audit transaction: the limit less what commitAudited adds
 * (AUDIT_RESERVED_OPS: HEAD, fence, one sink's counter) and one counter for every further sink.
 */
function transactionBudget(ctx: ServiceContext): number {
  return MAX_TRANSACT_OPS - AUDIT_RESERVED_OPS - Math.max(0, ctx.auditSinks.length - 1);
}

/** A plan's operations once committed: its ops, its entries and one sink record per entry per sink. */
function cost(plan: Planned, ctx: ServiceContext): number {
  return plan.ops.length + plan.entries.length * (1 + ctx.auditSinks.length);
}

/** The longest prefix of `moves` that fits the budget (at least one: a single move always fits). */
function fill(moves: Planned[], budget: number, ctx: ServiceContext): Planned {
  let out = merge();
  for (const m of moves) {
    const next = merge(out, m);
    if (out.entries.length > 0 && cost(next, ctx) > budget) break;
    out = next;
  }
  return out;
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
  // The proposer of the round: the installation policy may not count their own approval.
  const set = { proposal_round: target.proposal_round + 1, proposed_by: { id: actor.id, kind: actor.kind } };
  if (target.state !== 'APPROVED') return planMove(head, target, 'PROPOSED', 'manual', actor, at, { reason: why, set });
  const { counting, policy, met } = await quorumStatus(ctx, head, target, ctx.clock.now());
  const valid = counting.length;
  if (met) {
    throw new Conflict(
      `version ${target.version} is APPROVED with ${valid} valid approval(s) (quorum ${policy.quorum}); start its run instead`,
      {
        valid,
        quorum: policy.quorum,
      },
    );
  }
  const expired = `approvals expired: ${valid} of ${policy.quorum} still valid`;
  return planMove(head, target, 'PROPOSED', 'reproposal', actor, at, { reason: why ? `${expired}; ${why}` : expired, set });
}

/**
 * A manual move (`alp artifact transition --to`, `withdraw`, the HTTP transition route). PROPOSED goes
 * through propose(); a move to DRAFT is a withdrawal, recorded as "withdrawn" when no reason is given,
 * whichever entry point asked.
 */
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
  const why = reasonOf(reason ?? (to === 'DRAFT' ? 'withdrawn' : undefined));
  const n = validateVersionNumber(version);
  let read: VersionItem | undefined;
  let ops: TransactOp[] = [];
  await runAudited(ctx, [artifactId], async (heads) => {
    const head = heads[artifactId] as HeadItem;
    const v = await readVersion(ctx.items, artifactId, n);
    const plan = planMove(head, v, to, 'manual', actor, ctx.clock.now().toISOString(), { reason: why });
    read = v;
    ops = plan.ops;
    return { chains: [{ artifactId, entries: plan.entries }], ops: plan.ops };
  });
  return readBackOr(
    () => readVersion(ctx.items, artifactId, n),
    () => afterOps(read as VersionItem, ops),
  );
}

export function withdraw(
  ctx: ServiceContext,
  actor: Principal,
  artifactId: string,
  version: number,
  reason?: string,
): Promise<VersionItem> {
  return transition(ctx, actor, artifactId, version, 'DRAFT', reason);
}
