/**
 * What a run does under the fence, and only that (issue 17 item 3, docs/design.md §3 "short fence"):
 * fold in every change since the plan's mark, drop the candidates referenced since the plan (their
 * resets conditioned on the states the plan saw; the plan's own observation writes were committed
 * before the fence, run-observe.ts), act
 * (quarantine; purge: PREPARED, verify the digest, unlink, PURGED) and journal.
 */
import { ConditionFailed, RestoreHeld } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { retentionPk, retentionRunSk } from '../core/keys.ts';
import { cond, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { isRestoreHeld } from '../system/state.ts';
import { keyOfObservation, type Observation, type RetentionAction, type RetentionApproval } from './model.ts';
import { normalisePins, storedDigest, unlinkUnpinned } from './purge.ts';
import { LISTED_KEYS, type PlanSession, referencedAfterPurge, referencedWhy } from './run-plan.ts';
import { refreshScan } from './run-scan.ts';
import { type ObservationUpdate, updateOp } from './run-workset.ts';

/** The writer a run commits through: every transaction also proves the fence and the epoch. */
export interface MaintenanceCommitter {
  commit(ops: TransactOp[]): Promise<void>;
}

/** What the run tells its caller (the key lists hold the first LISTED_KEYS; `counts` is complete). */
export interface ActOutcome {
  quarantined: string[];
  purged: string[];
  reset: string[];
  observed: string[];
  skipped: Array<{ key: string; reason: string }>;
  counts: { observed: number; reset: number; skipped: number; dropped: number };
}

export const BATCH = 80;

export class ObservationsChanged extends Error {}

/** Counts a committed observation write in the outcome (a grace start or a reset). */
export function countUpdate(out: ActOutcome, u: Pick<ObservationUpdate, 'kind' | 'key'>): void {
  if (u.kind === 'start') {
    out.counts.observed++;
    listed(out.observed, u.key);
  } else {
    out.counts.reset++;
    listed(out.reset, u.key);
  }
}

export const listed = (list: string[], key: string) => {
  if (list.length < LISTED_KEYS) list.push(key);
};

/**
 * Re-validates the plan against every change since its mark and commits its observation writes.
 * Returns the candidates still to act on. ObservationsChanged when an observation is not in the state
 * the plan saw (another run committed since): the plan no longer stands.
 */
export async function revalidateAndObserve(
  ctx: ServiceContext,
  s: PlanSession,
  m: MaintenanceCommitter,
  out: ActOutcome,
): Promise<Observation[]> {
  if (await isRestoreHeld(ctx.items)) throw new RestoreHeld();
  await refreshScan(ctx, s.scan, { pins: s.pins });
  const keep: Observation[] = [];
  for (const o of s.chosen) {
    const why = referencedWhy(s.scan, o) ?? s.scan.digestWhy(o.digest, o.key);
    if (why && o.state === 'PREPARED' && !s.scan.object(o.key)) throw referencedAfterPurge(o, why);
    if (!why) {
      keep.push(o);
      continue;
    }
    out.counts.dropped++;
    out.skipped.push({ key: o.key, reason: `referenced since the plan (${why})` });
    s.work.reset(o, 'referenced');
  }
  try {
    await commitUpdates(s, m, out);
  } catch (e) {
    if (e instanceof ConditionFailed) throw new ObservationsChanged(e.message);
    throw e;
  }
  return keep;
}

async function commitUpdates(s: PlanSession, m: MaintenanceCommitter, out: ActOutcome): Promise<void> {
  let ops: TransactOp[] = [];
  for (const page of s.work.updates()) {
    for (const u of page) {
      // A grace start whose object became referenced since the plan: nothing to observe.
      if (u.kind === 'start' && (s.scan.referencedWhy(u.key) || s.scan.digestWhy(u.item?.digest ?? '', u.key))) {
        if (u.prior === null) continue;
        ops.push(updateOp({ ...u, kind: 'reset' }));
        out.counts.reset++;
        listed(out.reset, u.key);
      } else {
        ops.push(updateOp(u));
        countUpdate(out, u);
      }
      if (ops.length >= BATCH) {
        await m.commit(ops);
        ops = [];
      }
    }
  }
  if (ops.length) await m.commit(ops);
}

/**
 * GRACE → QUARANTINED for every chosen observation, under the approval, in batches (each key listed in
 * `out.quarantined` once its batch committed). ObservationsChanged when one is no longer the GRACE
 * observation the plan chose (another run changed it after the plan).
 */
export async function quarantine(
  m: MaintenanceCommitter,
  chosen: Observation[],
  { at, digest, approved }: { at: string; digest: string; approved: RetentionApproval },
  out: ActOutcome,
): Promise<void> {
  for (let i = 0; i < chosen.length; i += BATCH) {
    const batch = chosen.slice(i, i + BATCH);
    const ops: TransactOp[] = batch.map((o) => ({
      op: 'update',
      key: keyOfObservation(o),
      update: {
        set: {
          state: 'QUARANTINED',
          quarantined_at: at,
          plan_digest: digest,
          approved_by: approved.principal,
          evidence_ref: approved.evidence_ref,
        },
      },
      condition: cond.and(cond.eq('state', 'GRACE'), cond.eq('digest', o.digest)),
    }));
    try {
      await m.commit(ops);
    } catch (e) {
      if (e instanceof ConditionFailed)
        throw new ObservationsChanged(`${batch[e.failedIndex ?? 0]?.key ?? '?'} is no longer the observation the plan chose`);
      throw e;
    }
    for (const o of batch) out.quarantined.push(o.key);
  }
}

/** PREPARED (with the pins in force) before touching bytes; verify the digest; delete durably; then PURGED. */
export async function purgeOne(
  ctx: ServiceContext,
  m: MaintenanceCommitter,
  o: Observation,
  { planDigest, approval, pins }: { planDigest: string; approval: RetentionApproval; pins: string[] },
  out: ActOutcome,
): Promise<void> {
  const key = keyOfObservation(o);
  const at = () => ctx.clock.now().toISOString();
  // The seed's recheck right before unlinking: the bytes are hashed again under the fence.
  const actual = await storedDigest(ctx.content, o.key);
  if (actual === undefined && o.state !== 'PREPARED') {
    // A missing file is accepted only for a previously prepared purge.
    out.skipped.push({ key: o.key, reason: 'missing, but no purge of it was prepared: left for an operator to investigate' });
    return;
  }
  if (actual !== undefined && actual !== o.digest) {
    out.skipped.push({ key: o.key, reason: `its bytes changed (${actual}, observed ${o.digest}): not purged, observation reset` });
    await m.commit([{ op: 'delete', key, condition: cond.eq('state', o.state) }]);
    return;
  }
  // A retried PREPARED record keeps the pins of its first attempt and adds this run's.
  const inForce = normalisePins(o.pins, pins);
  const prepared = await m
    .commit([
      o.state === 'PREPARED'
        ? { op: 'update', key, update: { set: { pins: inForce } }, condition: cond.eq('state', 'PREPARED') }
        : {
            op: 'update',
            key,
            update: {
              set: {
                state: 'PREPARED',
                prepared_at: at(),
                plan_digest: planDigest,
                approved_by: approval.principal,
                evidence_ref: approval.evidence_ref,
                pins: inForce,
              },
            },
            condition: cond.and(cond.eq('state', 'QUARANTINED'), cond.eq('digest', o.digest)),
          },
    ])
    .then(
      () => true,
      (e: unknown) => {
        if (e instanceof ConditionFailed) return false;
        throw e;
      },
    );
  if (!prepared) {
    out.skipped.push({ key: o.key, reason: 'its observation changed since the plan (another run): not purged' });
    return;
  }
  if (actual !== undefined) await unlinkUnpinned(ctx.content, o.key, o.digest, new Set(inForce));
  try {
    await m.commit([{ op: 'update', key, update: { set: { state: 'PURGED', purged_at: at() } }, condition: cond.eq('state', 'PREPARED') }]);
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    out.skipped.push({ key: o.key, reason: 'its journal record changed during the purge' });
    return;
  }
  out.purged.push(o.key);
}

/** One journal record of a run (RET#{root}/RUN#…): the decision, the approval it rests on, the outcome. */
export async function journal(
  ctx: ServiceContext,
  m: MaintenanceCommitter,
  r: { root: string; action: RetentionAction; digest: string; epoch: number; approval: RetentionApproval | undefined },
  outcome: Record<string, unknown>,
): Promise<void> {
  const at = ctx.clock.now().toISOString();
  await m.commit([
    {
      op: 'put',
      item: {
        PK: retentionPk(r.root),
        SK: retentionRunSk(at, newId(ctx.clock)),
        type: 'retention_run',
        action: r.action,
        epoch: r.epoch,
        plan_digest: r.digest,
        at,
        ...(r.approval ? { approved_by: r.approval.principal, evidence_ref: r.approval.evidence_ref, restore: r.approval.restore } : {}),
        ...outcome,
      },
    },
  ]);
}
