import type { ChainPlan, Heads } from '../audit/chain.ts';
import { Conflict } from '../core/errors.ts';
import type { TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import type { HeadItem, Principal } from './model.ts';
import { planMove } from './moves.ts';
import { readVersion } from './versions.ts';

/**
 * What the end of a compensation does to the version it compensates: success makes it COMPENSATED;
 * failure (failed execution, rejection) returns it to the state it was compensating from. `heads` must
 * hold the compensated artifact's HEAD (runAudited over both artifacts).
 */
export async function compensationOutcome(
  ctx: ServiceContext,
  heads: Heads,
  compHead: HeadItem,
  outcome: 'SUCCEEDED' | 'FAILED',
  actor: Principal,
  at: string,
): Promise<{ chain: ChainPlan; ops: TransactOp[] }> {
  const target = compHead.compensates;
  if (!target) throw new Conflict(`${compHead.artifact_id} is not a compensation artifact`);
  const origHead = heads[target.artifact_id];
  if (!origHead) throw new Conflict(`compensated artifact ${target.artifact_id} was not read`);
  const orig = await readVersion(ctx.items, target.artifact_id, target.version);
  if (orig.state !== 'COMPENSATING') {
    throw new Conflict(`version ${target.version} of ${target.artifact_id} is ${orig.state}, not COMPENSATING`);
  }
  const to = outcome === 'SUCCEEDED' ? 'COMPENSATED' : (orig.compensating_from ?? 'EXECUTED');
  const reason =
    outcome === 'SUCCEEDED' ? `compensated by ${compHead.artifact_id}` : `compensation ${compHead.artifact_id} did not complete`;
  const plan = planMove(origHead, orig, to, 'compensation', actor, at, {
    reason,
    remove: ['compensating_from'],
    fields: { compensation_artifact_id: compHead.artifact_id },
  });
  return { chain: { artifactId: target.artifact_id, entries: plan.entries }, ops: plan.ops };
}
