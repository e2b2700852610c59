/**
 * `alp reconcile [--activate]`: proves that the metadata and the content of this installation agree.
 *
 * - every object the items name (references.ts refsOfItem over a full scan of the base table) exists
 *   and re-hashes to its digest (verify-content.ts verifyObjects: streaming, verified reads);
 * - every artifact's audit chain verifies (audit/verify.ts verifyArtifactAudit);
 * - the per-state version counters equal a recount of the versions the same scan read
 *   (lifecycle/state-counts.ts compareStateCounts): a drifted counter is a finding; counters that moved
 *   during the scan (writers active) are reported `busy`, not judged;
 * - objects under artifacts/, executions/ and archive/ that no item names are listed as unexpected
 *   (report only: orphans of interrupted writes are normal, and only retention may reclaim them);
 * - for a held restore: the restore completed (RESTORED). When it did not, the backup is read to
 *   report exactly which items and objects are missing.
 *
 * Status VERIFIED when nothing is missing, corrupt, conflicting or broken; otherwise FAILED. The result
 * is persisted (bounded findings) under the held restore (RESTORE#{id} / RECONCILE#{id}) or, without a
 * hold, under SYS#installation / RECONCILE#{id}. Provenance documents (provenance/) are derived from
 * the verified PROV# chain and judged like `alp verify` judges them (provenance.ts
 * judgeProvenanceDocument): a stale one (what the committed steps derive) is reported as `derived`
 * and re-derived here (not under a held restore), never failing the result; a corrupt one fails it.
 *
 * Activation (`activateRestore`) accepts only the latest reconciliation of the held restore, only when
 * it is VERIFIED and of this installation, and in one transaction records the activation, deletes the
 * hold and advances the epoch (leases and fences stamped with the backup's epoch are stale from then on).
 */
import { ConditionFailed, Conflict, Forbidden, IntegrityError, MaintenanceInProgress, NotFound } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { reconcileKey, restorePk } from '../core/keys.ts';
import type { Principal } from '../lifecycle/model.ts';
import { compareStateCounts, readCounterReading, type StateCountCheck, stateCountsKey } from '../lifecycle/state-counts.ts';
import { cond, type Item, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertNotFenced, fenceCheck } from '../system/fence.ts';
import { INSTALLATION_ROW, installationIsCheck, readInstallation } from '../system/installation.ts';
import { activationKey } from '../system/restore-proof.ts';
import { clearRestoreHoldOp, epochAdvanceOps, readEpoch } from '../system/state.ts';
import type { PhaseProgress } from './backup.ts';
import {
  checkHeldRestore,
  FindingList,
  type ReconcileFinding,
  type RestoreSummary,
  scanBaseTable,
  unexpectedObjects,
  verifyChains,
  verifyObjectsPaged,
} from './reconcile-scan.ts';
import { heldRestore, type RestoreRecord, restoreKey } from './restore.ts';

export type ReconcileStatus = 'VERIFIED' | 'FAILED';

export { activationKey } from '../system/restore-proof.ts';

export { MAX_REPORTED_FINDINGS, type ReconcileFinding, verifyInBatches } from './reconcile-scan.ts';

export interface ReconcileReport {
  reconcile_id: string;
  status: ReconcileStatus;
  installation_id: string | null;
  restore_id: string | null;
  started_at: string;
  finished_at: string;
  by: string;
  items: number;
  objects: { referenced: number; verified: number; bytes: number; missing: number; corrupt: number; errors: number; conflicts: number };
  derived: { checked: number; mismatched: number };
  audit: { artifacts: number; entries: number; broken: number; findings: number };
  unexpected: { count: number };
  /** The state counters' check (`mismatches`: how many shard × state counts differ from the recount). */
  state_counts: { status: StateCountCheck['status']; mismatches: number };
  restore: RestoreSummary;
  /**
   * The findings in order, at most MAX_REPORTED_FINDINGS of them (bounded memory: a flood of missing
   * or unexpected objects is counted in full, in `findings_total` and the counts above, not listed);
   * the persisted copy keeps the first MAX_PERSISTED_FINDINGS.
   */
  findings: ReconcileFinding[];
  /** How many findings there were, listed or not. */
  findings_total: number;
  persisted: boolean;
}

export const MAX_PERSISTED_FINDINGS = 100;

export interface ReconcileOptions {
  actor: string;
  progress?: PhaseProgress;
  /** Objects (in batches) and audit chains verified at a time; default 4. */
  concurrency?: number;
}

const noProgress: PhaseProgress = () => ({});

/**
 * Reconciliation, in its phases: the preconditions (an installation, a held restore's record), one
 * scan of the base table (references, artifacts, items), a restore that did not complete (what the
 * backup says is missing), every named object re-hashed beside every audit chain, the append counter,
 * the unexpected objects (report only); then the report, persisted.
 */
export async function reconcile(ctx: ServiceContext, opts: ReconcileOptions): Promise<ReconcileReport> {
  const progress = opts.progress ?? noProgress;
  const startedAt = ctx.clock.now().toISOString();
  const reconcileId = newId(ctx.clock);
  const installation = await readInstallation(ctx);
  await assertNotFenced(ctx);
  const held = await heldRestore(ctx);
  const findings = new FindingList();
  findings.push(...preconditionFindings(Boolean(installation), held));

  const countersBefore = await readCounterReading(ctx);
  const scan = await scanBaseTable(ctx, progress('scan'), findings);
  try {
    const counts = await compareStateCounts(ctx, countersBefore, scan.states.byShard);
    findings.push(...stateCountFindings(counts));
    const restoreSummary = await checkHeldRestore(ctx, held?.record, scan.refs, findings);
    const concurrency = Math.max(1, opts.concurrency ?? DEFAULT_CONCURRENCY);
    // Objects and audit chains are verified side by side: the chains' reads fill the objects' I/O waits.
    const objectFindings = new FindingList();
    const auditList = new FindingList();
    const [objects, audit] = await Promise.all([
      verifyObjectsPaged(
        ctx,
        scan.refs,
        concurrency,
        (opts.progress ?? noProgress)('objects', scan.refs.size('verified')),
        Boolean(held),
        objectFindings,
      ),
      verifyChains(ctx, scan.artifacts, Math.max(1, concurrency >> 1), auditList),
    ]);
    findings.append(objectFindings);
    findings.append(auditList);
    // Unexpected objects (report only), the listing streamed against the set of named keys.
    progress('listing');
    const unexpected = await unexpectedObjects(ctx, scan.refs, findings);

    const status: ReconcileStatus = findings.failing === 0 && installation ? 'VERIFIED' : 'FAILED';
    const report: ReconcileReport = {
      reconcile_id: reconcileId,
      status,
      installation_id: installation?.installation_id ?? null,
      restore_id: held?.restoreId ?? null,
      started_at: startedAt,
      finished_at: ctx.clock.now().toISOString(),
      by: opts.actor,
      items: scan.itemCount,
      objects: {
        referenced: objects.referenced,
        verified: objects.verified,
        bytes: objects.bytes,
        missing: objects.missing,
        corrupt: objects.corrupt,
        errors: objects.errors,
        conflicts: scan.conflicts,
      },
      derived: { checked: objects.derivedChecked, mismatched: objects.derivedMismatched },
      audit: { artifacts: scan.artifacts.count, ...audit },
      unexpected: { count: unexpected },
      state_counts: { status: counts.status, mismatches: counts.mismatches.length },
      restore: restoreSummary,
      findings: findings.kept,
      findings_total: findings.total,
      persisted: false,
    };
    report.persisted = await persist(ctx, report, held?.record);
    return report;
  } finally {
    scan.close();
  }
}

type Held = Awaited<ReturnType<typeof heldRestore>>;

/** A counter that differs from the recount, when the check could judge (exact counters, writers quiet). */
function stateCountFindings(check: StateCountCheck): ReconcileFinding[] {
  if (check.status !== 'checked') return [];
  return check.mismatches.map((m) => ({
    kind: 'item',
    problem: 'count_mismatch',
    row: `${stateCountsKey(m.shard).PK} ${stateCountsKey(m.shard).SK}`,
    detail: `the counter says ${m.counter} ${m.state} version(s), the versions recount to ${m.recount}`,
  }));
}

/** No installation record, or a held restore without its record: findings before anything is read. */
function preconditionFindings(hasInstallation: boolean, held: Held): ReconcileFinding[] {
  const findings: ReconcileFinding[] = [];
  if (!hasInstallation) {
    findings.push({
      kind: 'restore',
      problem: 'missing',
      row: INSTALLATION_ROW,
      detail: held
        ? 'the installation record is missing: the restore has not written the items yet'
        : 'there is no installation here (nothing was restored, or the restore stopped before it began)',
    });
  }
  if (held && !held.record) {
    findings.push({
      kind: 'restore',
      problem: 'missing',
      row: `${restorePk(held.restoreId)} RESTORE`,
      detail: 'the held restore has no record',
    });
  }
  return findings;
}

const DEFAULT_CONCURRENCY = 4;

/**
 * Stores the result. An empty target (nothing restored yet) is left empty, so the restore can still
 * begin there: the result is only returned.
 */
async function persist(ctx: ServiceContext, report: ReconcileReport, restore: RestoreRecord | undefined): Promise<boolean> {
  if (!report.installation_id && !restore) return false;
  const { findings, findings_total: total, persisted: _p, ...summary } = report;
  const kept = findings.slice(0, MAX_PERSISTED_FINDINGS);
  const item: Item = {
    ...reconcileKey(report.reconcile_id, restore?.restore_id),
    type: 'reconcile',
    ...summary,
    findings: kept,
    findings_total: total,
    findings_truncated: total > kept.length,
  };
  // Persisting is a database write like any other: not while a maintenance holds the fence.
  const ops: TransactOp[] = [{ op: 'put', item, condition: cond.notExists() }, fenceCheck(ctx)];
  if (restore) {
    ops.push({
      op: 'update',
      key: restoreKey(restore.restore_id),
      update: {
        set: { last_reconcile_id: report.reconcile_id, last_reconcile_status: report.status, last_reconciled_at: report.finished_at },
      },
      condition: cond.exists(),
    });
  }
  try {
    await ctx.items.transactWrite(ops);
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 1) throw new MaintenanceInProgress();
    throw e;
  }
  return true;
}

export interface Activation {
  restore_id: string;
  reconcile_id: string;
  installation_id: string;
  activated_at: string;
  activated_by: string;
  epoch: number;
}

/**
 * Activates the held restore on the strength of reconciliation `reconcileId`: it must be the latest
 * reconciliation of that restore, VERIFIED, of this installation. One transaction: the restore record
 * becomes ACTIVATED, the hold is deleted, the epoch advances.
 */
export async function activateRestore(ctx: ServiceContext, reconcileId: string, by: Principal): Promise<Activation> {
  if (by.kind !== 'human') throw new Forbidden(`activating a restore needs a human operator, not ${by.kind} ${by.id}`);
  const actor = by.id;
  const held = await heldRestore(ctx);
  if (!held) throw new Conflict('no restore hold is set here: there is nothing to activate');
  const r = held.record;
  if (!r) throw new NotFound(`the held restore ${held.restoreId} has no record`);
  const recKey = reconcileKey(reconcileId, r.restore_id);
  const rec = await ctx.items.get(recKey, { consistent: true });
  if (!rec) throw new NotFound(`no reconciliation ${reconcileId} of restore ${r.restore_id}`);
  if (rec.status !== 'VERIFIED') {
    throw new IntegrityError(`reconciliation ${reconcileId} is ${String(rec.status)}: a FAILED reconciliation can never be activated`, {
      reconcile_id: reconcileId,
    });
  }
  if (r.last_reconcile_id !== reconcileId) {
    throw new Conflict(`reconciliation ${reconcileId} is not the latest of restore ${r.restore_id} (${String(r.last_reconcile_id)})`);
  }
  const installation = await readInstallation(ctx);
  if (!installation || installation.installation_id !== r.installation_id || rec.installation_id !== r.installation_id) {
    throw new Conflict(`reconciliation ${reconcileId} is not of this installation`);
  }
  const epoch = await readEpoch(ctx.items);
  const at = ctx.clock.now().toISOString();
  const ops: TransactOp[] = [
    { op: 'check', key: recKey, condition: cond.and(cond.eq('status', 'VERIFIED'), cond.eq('installation_id', r.installation_id)) },
    {
      op: 'update',
      key: restoreKey(r.restore_id),
      update: { set: { status: 'ACTIVATED', activated_at: at, activated_by: actor, activation_reconcile_id: reconcileId } },
      condition: cond.and(
        cond.eq('status', 'RESTORED'),
        cond.eq('last_reconcile_id', reconcileId),
        cond.eq('last_reconcile_status', 'VERIFIED'),
      ),
    },
    clearRestoreHoldOp(r.restore_id),
    installationIsCheck(r.installation_id),
    fenceCheck(ctx),
    {
      op: 'put',
      item: {
        ...activationKey,
        type: 'restore_activation',
        restore_id: r.restore_id,
        reconcile_id: reconcileId,
        installation_id: r.installation_id,
        activated_at: at,
        activated_by: actor,
      },
    },
    ...epochAdvanceOps(epoch, at, actor, `restore ${r.restore_id} activated`),
  ];
  try {
    await ctx.items.transactWrite(ops);
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 4) throw new MaintenanceInProgress();
    if (e instanceof ConditionFailed)
      throw new Conflict('the restore, its hold or the epoch changed during activation; reconcile again', { failedIndex: e.failedIndex });
    throw e;
  }
  return {
    restore_id: r.restore_id,
    reconcile_id: reconcileId,
    installation_id: r.installation_id,
    activated_at: at,
    activated_by: actor,
    epoch: epoch + 1,
  };
}

export { type RestoreProof, readRestoreProof } from '../system/restore-proof.ts';
