/**
 * `alp reconcile [--activate]`: proves that the metadata and the content of this installation agree.
 *
 * - every object the items name (references.ts refsOfItem over a full scan of the base table) exists
 *   and re-hashes to its digest (verify-content.ts verifyObjects: streaming, verified reads);
 * - every artifact's audit chain verifies (audit/verify.ts verifyArtifactAudit);
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
import { checkAuditCounter } from '../audit/counter.ts';
import { type ChainReport, verifyArtifactAudit } from '../audit/verify.ts';
import { listAll } from '../content/content-store.ts';
import { ConditionFailed, Conflict, Forbidden, IntegrityError, MaintenanceInProgress, NotFound } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { reconcileKey, restorePk } from '../core/keys.ts';
import { forEachLimited } from '../core/limit.ts';
import { IMMUTABLE_PREFIXES, isImmutableKey } from '../core/object-keys.ts';
import type { Principal } from '../lifecycle/model.ts';
import { provenanceArtifactId, publishProvenanceDocument } from '../lifecycle/provenance.ts';
import type { ObjectRef } from '../lifecycle/references.ts';
import { refsOfItem } from '../lifecycle/references.ts';
import { type Progress, type VerifyReport, verifyObjects } from '../lifecycle/verify-content.ts';
import { cond, type Item, type ItemKey, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertNotFenced, fenceCheck } from '../system/fence.ts';
import { INSTALLATION_ROW, installationIsCheck, readInstallation } from '../system/installation.ts';
import { activationKey } from '../system/restore-proof.ts';
import { clearRestoreHoldOp, epochAdvanceOps, readEpoch } from '../system/state.ts';
import { stateKey } from '../telemetry/queue.ts';
import type { PhaseProgress } from './backup.ts';
import { isNeverBackedUp, openBackup, type VerifiedBackup } from './backup-format.ts';
import { heldRestore, type RestoreRecord, restoreKey } from './restore.ts';

export type ReconcileStatus = 'VERIFIED' | 'FAILED';

export { activationKey } from '../system/restore-proof.ts';

export interface ReconcileFinding {
  kind: 'object' | 'derived' | 'audit' | 'restore' | 'item' | 'unexpected';
  problem: string;
  key?: string;
  digest?: string;
  source?: string;
  row?: string;
  detail: string;
}

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
  restore: { status: string; items_expected: number; items_missing: number | null; backup_readable: boolean } | null;
  /** Every finding (the persisted copy keeps the first MAX_PERSISTED_FINDINGS). */
  findings: ReconcileFinding[];
  persisted: boolean;
}

export const MAX_PERSISTED_FINDINGS = 100;
const MAX_DETAIL = 300;

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
  const findings: ReconcileFinding[] = preconditionFindings(Boolean(installation), held);

  // The listing (for unexpected objects) waits on the content store, not on the CPU: it runs meanwhile.
  const listing = listImmutable(ctx);
  listing.catch(() => {});

  const scan = await scanBaseTable(ctx, progress('scan'));
  findings.push(...scan.conflicts);
  const { restoreSummary, extraRefs } = await checkHeldRestore(ctx, held?.record, scan.refs, findings);

  const all = [...scan.refs.values(), ...extraRefs];
  const objects = await verifyObjectsAndChains(ctx, all, scan.artifacts, opts, Boolean(held), findings);
  const audit = await auditFindings(ctx, objects.chains, findings);

  // Unexpected objects (report only).
  progress('listing');
  const named = new Set(all.map((r) => r.key));
  const unexpectedList = (await listing).filter((o) => !named.has(o.key));
  for (const o of unexpectedList)
    findings.push({ kind: 'unexpected', problem: 'unexpected', key: o.key, detail: `${o.size} bytes that no item names` });

  const failing = findings.filter((f) => f.kind !== 'derived' && f.kind !== 'unexpected');
  const status: ReconcileStatus = failing.length === 0 && installation ? 'VERIFIED' : 'FAILED';
  const { verified, derivedReport, immutable, derived } = objects;
  const count = (p: string) => verified.findings.filter((f) => f.problem === p).length;
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
      referenced: immutable.length,
      verified: verified.ok,
      bytes: verified.bytes,
      missing: count('missing'),
      corrupt: count('corrupt'),
      errors: count('error'),
      conflicts: scan.conflicts.length,
    },
    derived: { checked: derived.length, mismatched: derivedReport.findings.length + derivedReport.stale.length },
    audit: { artifacts: scan.artifacts.size, ...audit },
    unexpected: { count: unexpectedList.length },
    restore: restoreSummary,
    findings,
    persisted: false,
  };
  report.persisted = await persist(ctx, report, held?.record);
  return report;
}

type Held = Awaited<ReturnType<typeof heldRestore>>;

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

interface TableScan {
  refs: Map<string, ObjectRef>;
  /** A key named with two digests. */
  conflicts: ReconcileFinding[];
  artifacts: Set<string>;
  itemCount: number;
}

/** One pass over the base table: references, artifacts, item count. */
async function scanBaseTable(ctx: ServiceContext, bar: Progress): Promise<TableScan> {
  const out: TableScan = { refs: new Map(), conflicts: [], artifacts: new Set(), itemCount: 0 };
  let cursor: string | undefined;
  do {
    const page = await ctx.items.scan(cursor ? { cursor } : {});
    for (const item of page.items) {
      out.itemCount++;
      if (item.PK.startsWith('ART#')) out.artifacts.add(item.PK.slice('ART#'.length));
      for (const r of refsOfItem(item)) {
        const seen = out.refs.get(r.key);
        if (!seen) out.refs.set(r.key, r);
        else if (seen.digest !== r.digest) {
          out.conflicts.push({
            kind: 'object',
            problem: 'conflict',
            key: r.key,
            digest: r.digest,
            source: r.source,
            detail: `named with ${r.digest} here and with ${seen.digest} by ${seen.source}`,
          });
        }
      }
    }
    bar.tick?.(page.items.length);
    cursor = page.cursor;
  } while (cursor);
  return out;
}

/** A restore that did not complete: what exactly is missing, from the backup; the objects only it names. */
async function checkHeldRestore(
  ctx: ServiceContext,
  r: RestoreRecord | undefined,
  refs: Map<string, ObjectRef>,
  findings: ReconcileFinding[],
): Promise<{ restoreSummary: ReconcileReport['restore']; extraRefs: ObjectRef[] }> {
  const extraRefs: ObjectRef[] = [];
  if (!r) return { restoreSummary: null, extraRefs };
  const restoreSummary = {
    status: r.status,
    items_expected: r.items_expected,
    items_missing: null as number | null,
    backup_readable: false,
  };
  if (r.status === 'RESTORED') return { restoreSummary, extraRefs };
  findings.push({
    kind: 'restore',
    problem: 'incomplete',
    row: `${restorePk(r.restore_id)} RESTORE`,
    detail: `restore ${r.restore_id} is ${r.status}: it was interrupted; run the restore again to complete it`,
  });
  let backup: VerifiedBackup | undefined;
  try {
    backup = await openBackup(r.backup_location, { expectedManifestDigest: r.manifest_digest });
    restoreSummary.backup_readable = true;
  } catch (e) {
    findings.push({ kind: 'restore', problem: 'unreadable', detail: `backup ${r.backup_location}: ${clip((e as Error).message)}` });
  }
  if (!backup) return { restoreSummary, extraRefs };
  const missing = await missingItems(ctx, backup);
  restoreSummary.items_missing = missing.length;
  for (const k of missing)
    findings.push({ kind: 'item', problem: 'missing', row: `${k.PK} ${k.SK}`, detail: 'in the backup, not restored' });
  for await (const o of backup.objects()) {
    if (!refs.has(o.key)) {
      extraRefs.push({
        key: o.key,
        digest: o.digest,
        ...(o.size !== undefined ? { size: o.size } : {}),
        ...(o.retained ? { retained: true as const } : {}),
        source: 'backup manifest',
      });
    }
  }
  return { restoreSummary, extraRefs };
}

interface ObjectsAndChains {
  immutable: ObjectRef[];
  derived: ObjectRef[];
  verified: VerifyReport;
  derivedReport: VerifyReport;
  /** Sorted by artifact id. */
  chains: ChainReport[];
}

/**
 * Objects: re-hash everything named. Immutable objects and the judgement of derived documents decide
 * the status; quarantined objects are reported, never deciding it. A stale derived document is
 * re-derived unless a restore is held.
 */
async function verifyObjectsAndChains(
  ctx: ServiceContext,
  all: ObjectRef[],
  artifacts: Set<string>,
  opts: ReconcileOptions,
  restoreHeld: boolean,
  findings: ReconcileFinding[],
): Promise<ObjectsAndChains> {
  const immutable = all.filter((r) => isImmutableKey(r.key) && !r.retained);
  const derived = all.filter((r) => !isImmutableKey(r.key) || r.retained);
  const concurrency = Math.max(1, opts.concurrency ?? DEFAULT_CONCURRENCY);
  // Objects and audit chains are verified side by side: the chains' reads fill the objects' I/O waits.
  const objBar = (opts.progress ?? noProgress)('objects', immutable.length);
  const chains: ChainReport[] = [];
  const [verified, derivedReport] = await Promise.all([
    verifyInBatches(ctx, immutable, concurrency, objBar),
    verifyInBatches(ctx, derived, 1, {}),
    forEachLimited([...artifacts], Math.max(1, concurrency >> 1), async (id) => {
      chains.push(await verifyArtifactAudit(ctx, id));
    }),
  ]);
  for (const f of verified.findings) findings.push({ kind: 'object', ...f, detail: clip(f.detail) });
  for (const f of derivedReport.findings) {
    // A quarantined object is only reported; a derived document that is neither current nor stale is corrupt.
    const retained = derived.some((r) => r.key === f.key && r.retained);
    findings.push({ kind: retained ? 'derived' : 'object', ...f, detail: clip(f.detail) });
  }
  for (const d of derivedReport.stale) {
    const repaired = restoreHeld ? false : await repairDerived(ctx, d.key);
    findings.push({
      kind: 'derived',
      problem: 'stale',
      key: d.key,
      digest: d.digest,
      source: d.source,
      detail: clip(`${d.detail}${repaired ? '; re-derived now' : ''}`),
    });
  }
  chains.sort((a, b) => (a.artifact_id < b.artifact_id ? -1 : 1));
  return { immutable, derived, verified, derivedReport, chains };
}

/** The chains' findings, then tail truncation: the chains' lengths against the append counter. */
async function auditFindings(
  ctx: ServiceContext,
  chains: ChainReport[],
  findings: ReconcileFinding[],
): Promise<{ entries: number; broken: number; findings: number }> {
  let entries = 0;
  let broken = 0;
  let count = 0;
  for (const report of chains) {
    entries += report.entries;
    if (!report.ok) broken++;
    count += report.findings.length;
    for (const f of report.findings) findings.push({ kind: 'audit', problem: 'broken', row: f.row, detail: clip(f.problem) });
  }
  const counter = await checkAuditCounter(ctx);
  if (!counter.ok) {
    broken++;
    count++;
    findings.push({ kind: 'audit', problem: 'truncated', row: `${stateKey.PK} ${stateKey.SK}`, detail: clip(counter.detail) });
  }
  return { entries, broken, findings: count };
}

const DEFAULT_CONCURRENCY = 4;

/** Re-derives a stale provenance document; false when that did not happen (reported, not fatal). */
async function repairDerived(ctx: ServiceContext, key: string): Promise<boolean> {
  const artifactId = provenanceArtifactId(key);
  if (artifactId === undefined) return false;
  return publishProvenanceDocument(ctx, artifactId).then(
    () => true,
    () => false,
  );
}

/** Every object under the immutable prefixes, in key order. */
async function listImmutable(ctx: ServiceContext): Promise<Array<{ key: string; size: number }>> {
  const out: Array<{ key: string; size: number }> = [];
  for (const prefix of IMMUTABLE_PREFIXES) for await (const o of listAll(ctx.content, prefix)) out.push({ key: o.key, size: o.size });
  return out;
}
const VERIFY_BATCH = 32;

/**
 * verifyObjects over batches of references, `concurrency` batches at a time: the reads of one object
 * overlap the hashing of another (and, on S3, the round trips). Findings come back sorted by key.
 */
export async function verifyInBatches(ctx: ServiceContext, refs: ObjectRef[], concurrency: number, bar: Progress): Promise<VerifyReport> {
  // Cold archive copies (S3 GLACIER) are checked by S3's checksum, never read (verifyObjects).
  const total: VerifyReport = { objects: refs.length, bytes: 0, ok: 0, findings: [], stale: [] };
  const batches: ObjectRef[][] = [];
  for (let i = 0; i < refs.length; i += VERIFY_BATCH) batches.push(refs.slice(i, i + VERIFY_BATCH));
  await forEachLimited(batches, concurrency, async (batch) => {
    // Policies are checked with the audit chains (verifyArtifactAudit), once per artifact.
    const r = await verifyObjects(ctx, batch, { tick: (n) => bar.tick?.(n) }, { policies: false });
    total.bytes += r.bytes;
    total.ok += r.ok;
    total.findings.push(...r.findings);
    total.stale.push(...r.stale);
  });
  total.findings.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return total;
}

/** Items of the backup that the target does not hold (read in chunks of 100). */
async function missingItems(ctx: ServiceContext, backup: VerifiedBackup): Promise<ItemKey[]> {
  const missing: ItemKey[] = [];
  let chunk: ItemKey[] = [];
  const check = async () => {
    const found = await ctx.items.batchGet(chunk);
    const have = new Set(found.map((i) => `${i.PK}\u0000${i.SK}`));
    for (const k of chunk) if (!have.has(`${k.PK}\u0000${k.SK}`)) missing.push(k);
    chunk = [];
  };
  for await (const item of backup.items()) {
    if (isNeverBackedUp(item)) continue;
    chunk.push({ PK: item.PK, SK: item.SK });
    if (chunk.length >= 100) await check();
  }
  if (chunk.length) await check();
  return missing;
}

/**
 * Stores the result. An empty target (nothing restored yet) is left empty, so the restore can still
 * begin there: the result is only returned.
 */
async function persist(ctx: ServiceContext, report: ReconcileReport, restore: RestoreRecord | undefined): Promise<boolean> {
  if (!report.installation_id && !restore) return false;
  const { findings, persisted: _p, ...summary } = report;
  const kept = findings.slice(0, MAX_PERSISTED_FINDINGS);
  const item: Item = {
    ...reconcileKey(report.reconcile_id, restore?.restore_id),
    type: 'reconcile',
    ...summary,
    findings: kept,
    findings_total: findings.length,
    findings_truncated: findings.length > kept.length,
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

function clip(s: string): string {
  return s.length > MAX_DETAIL ? `${s.slice(0, MAX_DETAIL)}…` : s;
}
