/**
 * The one planner every state change uses: a legal move of the table (state-machine.ts) becomes the
 * conditional version update, the per-state counters (state-counts.ts), its Transition entry and, for a
 * compensation artifact, its Compensation item kept in step. Below every operation (propose, approvals,
 * executions, compensation, archive).
 */
import type { AuditDraft } from '../audit/chain.ts';
import { artifactPk, compensationSk, compStateGsiPk, versionIndexShard } from '../core/keys.ts';
import { cond, type TransactOp } from '../store/item-store.ts';
import type { HeadItem, Principal, VersionItem } from './model.ts';
import { combineCountOps, moveCountOp } from './state-counts.ts';
import { requireMove, type TransitionVia, type VersionState } from './state-machine.ts';
import { stateChangeOp, transitionDraft } from './versions.ts';

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
  // Every index entry of the artifact goes to the shard its version items were created in.
  const shard = versionIndexShard(v);
  const ops: TransactOp[] = [stateChangeOp(v, to, at, o.set ?? {}, o.remove ?? []), moveCountOp(v, to)];
  if (head.compensates) {
    ops.push({
      op: 'update',
      key: { PK: artifactPk(head.compensates.artifact_id), SK: compensationSk(head.artifact_id) },
      update: { set: { state: to, GSI1PK: compStateGsiPk(to, shard), updated_at: at } },
      condition: cond.exists(),
    });
  }
  const fields = { version: v.version, from: v.state, to, actor, reason: o.reason, ...o.fields };
  const entries = [transitionDraft(head.artifact_id, fields, shard)];
  return { ops, entries };
}

/** Plans of one transaction as one; their counter ops folded into one per counter item (combineCountOps). */
export function merge(...parts: Planned[]): Planned {
  return { ops: combineCountOps(parts.flatMap((p) => p.ops)), entries: parts.flatMap((p) => p.entries) };
}
