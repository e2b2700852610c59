/**
 * `alp backup --out DIR [--with-content]`: a consistent snapshot of the metadata as JSON Lines plus a
 * digest-protected manifest of every object it references (backup-format.ts), for every engine alike.
 *
 * Consistency comes from the ItemStore's snapshot(): a point-in-time copy (SQLite online backup API;
 * writers are not blocked) is read as it is; a live scan (DynamoDB) is read under the maintenance
 * fence, so no publisher commits while it runs and the audit chains in the backup are whole (a
 * competing maintenance refuses the backup with MAINTENANCE).
 *
 * Content bytes are referenced, not copied; `withContent` copies every immutable object into the
 * backup through the verifying read path (a mismatch fails the backup). Provenance documents are
 * derived from the items and are rebuilt by a restore instead of being copied.
 *
 * Every backup is registered in the table (SYS#installation / BACKUP#{id}, PENDING then COMPLETE with
 * its location and manifest digest): the registry is where retention finds the manifests it must
 * honour as references. The directory is written under `.{name}.partial-{id}` beside DIR and renamed
 * when complete, so DIR exists only as a complete backup; an interrupted backup leaves the partial
 * directory and a PENDING registry record (with the writer's host and pid). `settleInterruptedBackups`
 * (run by every `alp start` / `init` / `serve` and by maintenance recovery) settles such records: a
 * backup whose directory was renamed into place before the writer died is COMPLETE; one whose writer
 * is provably dead (same host, process gone) never completed and is FAILED (its partial directory is
 * removed). `abandonBackup` (`alp backups --abandon ID`) is the operator's way for the rest.
 * `retireBackup` (`alp backups --retire ID`) retires a COMPLETE backup (a rotated-away directory).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Digest } from '../core/digest.ts';
import { ConditionFailed, Conflict, InvalidInput, MaintenanceInProgress, NotFound } from '../core/errors.ts';
import { fsyncDir } from '../core/fsync.ts';
import { newId } from '../core/ids.ts';
import { processAlive } from '../core/process.ts';
import type { Progress } from '../lifecycle/verify-content.ts';
import { cond, type Item, type TransactOp } from '../store/item-store.ts';
import { BACKUP_REGISTRY, backupRegistryKey } from '../system/backups.ts';
import type { ServiceContext } from '../system/context.ts';
import { type FenceInfo, fenceCheck, readFence, withMaintenance } from '../system/fence.ts';
import { readInstallation } from '../system/installation.ts';
import { readEpoch } from '../system/state.ts';
import { copyContent, type Exported, exportItems } from './backup-export.ts';
import { BACKUP_FORMAT, type BackupManifest, MANIFEST_FILE, manifestDigest, openBackup } from './backup-format.ts';
import { ObjectSet } from './object-set.ts';

/** Progress by phase: `items` (no total known), `content` (objects to copy). */
export type PhaseProgress = (phase: string, total?: number) => Progress;

export interface BackupOptions {
  out: string;
  withContent?: boolean;
  /** Who takes it (the operator), for the manifest and the registry. */
  actor: string;
  progress?: PhaseProgress;
  /** Copies of content run this many at a time (default 4). */
  concurrency?: number;
}

export interface BackupRecord {
  backup_id: string;
  status: 'PENDING' | 'COMPLETE' | 'FAILED' | 'RETIRED';
  location: string;
  installation_id: string;
  started_at: string;
  created_by: string;
  manifest_digest?: Digest;
  completed_at?: string;
  epoch?: number;
  items?: number;
  objects?: number;
  with_content?: boolean;
  error?: string;
  /** Who writes it: an interrupted backup is settled only when this process is provably gone. */
  host?: string;
  pid?: number;
  /** Set by `retireBackup`: the backup no longer protects its objects from retention. */
  retired_at?: string;
  retired_by?: string;
  retire_reason?: string;
}

export interface BackupResult {
  backup_id: string;
  location: string;
  manifest: BackupManifest;
}

const noProgress: PhaseProgress = () => ({});

export async function createBackup(ctx: ServiceContext, opts: BackupOptions): Promise<BackupResult> {
  const out = path.resolve(opts.out);
  const installation = await readInstallation(ctx);
  if (!installation) throw new NotFound('there is no installation here to back up (run alp init first)');
  if (await exists(out)) throw new Conflict(`${out} already exists: backups are write-once, choose a new directory`);
  await fs.mkdir(path.dirname(out), { recursive: true });
  const backupId = newId(ctx.clock);
  const partial = path.join(path.dirname(out), `.${path.basename(out)}.partial-${backupId}`);
  await fs.mkdir(partial, { mode: 0o750 });
  const registryKey = backupRegistryKey(backupId);
  const startedAt = ctx.clock.now().toISOString();
  const record: BackupRecord = {
    backup_id: backupId,
    status: 'PENDING',
    location: out,
    installation_id: installation.installation_id,
    started_at: startedAt,
    created_by: opts.actor,
    host: os.hostname(),
    pid: process.pid,
  };
  // A backup does not start while a maintenance holds the fence (it would compete with it).
  try {
    await ctx.items.transactWrite([
      { op: 'put', item: { ...registryKey, type: 'backup', ...record }, condition: cond.notExists() },
      fenceCheck(ctx),
    ]);
  } catch (e) {
    await fs.rm(partial, { recursive: true, force: true });
    if (e instanceof ConditionFailed && e.failedIndex === 1) throw fenceHeld(await readFence(ctx));
    throw e;
  }
  const progress = opts.progress ?? noProgress;
  let renamed = false;
  const objects = new ObjectSet('backup-objects');
  try {
    const takenAt = ctx.clock.now().toISOString();
    const snapshot = await ctx.items.snapshot({ dir: partial });
    let exported: Exported;
    try {
      // A point-in-time copy is of the instant it was taken; a fenced scan is of the time it runs.
      const read = () =>
        exportItems(
          snapshot,
          partial,
          registryKey,
          snapshot.pointInTime ? takenAt : ctx.clock.now().toISOString(),
          progress('items'),
          objects,
        );
      if (snapshot.pointInTime) exported = await read();
      else {
        // A live scan is consistent only while no publisher commits: read it under the fence.
        exported = await withMaintenance(ctx, await readEpoch(ctx.items), `backup ${backupId} by ${opts.actor}`, read, {
          purpose: 'backup (fenced scan)',
        });
      }
    } finally {
      await snapshot.close();
    }
    if (exported.installationId !== installation.installation_id) {
      throw new Conflict(`the snapshot names installation ${String(exported.installationId)}, not ${installation.installation_id}`);
    }
    let content: BackupManifest['content'];
    if (opts.withContent) content = await copyContent(ctx, partial, objects, progress, opts.concurrency ?? 4);
    const body: Omit<BackupManifest, 'manifest_digest'> = {
      format: BACKUP_FORMAT,
      backup_id: backupId,
      installation_id: installation.installation_id,
      epoch: exported.epoch,
      snapshot_at: exported.snapshotAt,
      completed_at: ctx.clock.now().toISOString(),
      created_by: opts.actor,
      source: { engine: ctx.items.engine, metadata: ctx.items.location, content: ctx.content.location },
      consistency: snapshot.pointInTime ? 'point-in-time' : 'fenced-scan',
      items: exported.items,
      objects: exported.objectsFile,
      with_content: opts.withContent === true,
      ...(content ? { content } : {}),
      source_restore_held: exported.restoreHeld,
      excluded: exported.excluded,
    };
    const manifest: BackupManifest = { ...body, manifest_digest: manifestDigest(body) };
    const manifestFile = path.join(partial, MANIFEST_FILE);
    await fs.writeFile(manifestFile, `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o640, flag: 'wx' });
    const fh = await fs.open(manifestFile, 'r');
    await fh.sync();
    await fh.close();
    await fsyncDir(partial);
    // The final name appears only now, atomically, with every byte on disk.
    await fs.rename(partial, out);
    await fsyncDir(path.dirname(out));
    renamed = true;
    await ctx.items.update(registryKey, { set: completeFields(manifest) }, { condition: cond.exists() });
    return { backup_id: backupId, location: out, manifest };
  } catch (e) {
    await fs.rm(partial, { recursive: true, force: true }).catch(() => {});
    // A complete directory whose registration failed must not stay behind looking like a backup
    // retention honours: it is removed with the rest (a backup either completes or leaves nothing).
    if (renamed) await fs.rm(out, { recursive: true, force: true }).catch(() => {});
    await ctx.items
      .update(
        registryKey,
        { set: { status: 'FAILED', error: String((e as Error).message ?? e).slice(0, 500) } },
        { condition: cond.exists() },
      )
      .catch(() => {});
    throw e;
  } finally {
    objects.close();
  }
}

function completeFields(manifest: BackupManifest): Record<string, unknown> {
  return {
    status: 'COMPLETE',
    manifest_digest: manifest.manifest_digest,
    completed_at: manifest.completed_at,
    epoch: manifest.epoch,
    items: manifest.items.count,
    objects: manifest.objects.count,
    with_content: manifest.with_content,
  };
}

/** Where an interrupted (PENDING) backup stands. */
export type PendingBackupState =
  /** Its directory was renamed into place (the writer died before registering it): a complete backup. */
  | { state: 'complete'; manifest: BackupManifest }
  /** Its writer is provably gone (same host, process not alive): it never completed. */
  | { state: 'dead' }
  /** It may still be running (another host, or its process is alive). */
  | { state: 'running' };

export async function pendingBackupState(record: BackupRecord): Promise<PendingBackupState> {
  if (await exists(record.location)) {
    try {
      const backup = await openBackup(record.location);
      if (backup.manifest.backup_id === record.backup_id) return { state: 'complete', manifest: backup.manifest };
    } catch {
      // Not this backup, or damaged: it does not count as complete.
    }
  }
  if (record.host === os.hostname() && typeof record.pid === 'number' && !processAlive(record.pid)) return { state: 'dead' };
  return { state: 'running' };
}

export interface SettleReport {
  completed: string[];
  failed: string[];
  running: string[];
}

/**
 * Settles the registry records of interrupted backups: COMPLETE when the directory made it into place,
 * FAILED (and the partial directory removed) when the writer died before; others are left PENDING.
 */
export async function settleInterruptedBackups(ctx: Pick<ServiceContext, 'items' | 'clock'>): Promise<SettleReport> {
  const report: SettleReport = { completed: [], failed: [], running: [] };
  for (const b of await listBackups(ctx)) {
    if (b.status !== 'PENDING') continue;
    const s = await pendingBackupState(b);
    const key = backupRegistryKey(b.backup_id);
    try {
      if (s.state === 'complete') {
        await ctx.items.update(key, { set: completeFields(s.manifest) }, { condition: cond.eq('status', 'PENDING') });
        report.completed.push(b.backup_id);
      } else if (s.state === 'dead') {
        await ctx.items.update(
          key,
          { set: { status: 'FAILED', error: `interrupted: process ${b.pid} on ${b.host} died before the backup completed` } },
          { condition: cond.eq('status', 'PENDING') },
        );
        await fs.rm(partialDir(b), { recursive: true, force: true }).catch(() => {});
        report.failed.push(b.backup_id);
      } else report.running.push(b.backup_id);
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
    }
  }
  return report;
}

/** The operator's settlement of a PENDING backup that will never complete (its writer is gone). */
export async function abandonBackup(ctx: Pick<ServiceContext, 'items'>, backupId: string, by: string): Promise<BackupRecord> {
  const key = backupRegistryKey(backupId);
  const item = await ctx.items.get(key, { consistent: true });
  if (!item) throw new NotFound(`no backup ${backupId} in the registry`);
  const record = toRecord(item);
  if (record.status !== 'PENDING') throw new Conflict(`backup ${backupId} is ${record.status}: only a PENDING backup can be abandoned`);
  const s = await pendingBackupState(record);
  if (s.state === 'complete')
    throw new Conflict(`backup ${backupId} completed at ${record.location}: it is registered by the next alp start or init`);
  try {
    const after = await ctx.items.update(
      key,
      { set: { status: 'FAILED', error: `abandoned by ${by}` } },
      { condition: cond.eq('status', 'PENDING') },
    );
    await fs.rm(partialDir(record), { recursive: true, force: true }).catch(() => {});
    return toRecord(after);
  } catch (e) {
    if (e instanceof ConditionFailed) throw new Conflict(`backup ${backupId} changed while it was being abandoned`);
    throw e;
  }
}

/** The command that retires a backup, for error messages. */
export const retireCommand = (backupId: string) => `alp backups --retire ${backupId} --reason TEXT`;

const MAX_REASON_LENGTH = 500;

/**
 * The operator's retirement of a COMPLETE backup (a rotated-away directory, a backup that is no longer
 * kept): the registry record becomes RETIRED with who, when and why, in one transaction that also
 * proves no maintenance (retention) is running and enqueues a `backup_retired` event through the audit
 * sinks (the telemetry outbox; a full queue counts a drop instead). From then on retention no longer
 * reads its manifest — so the backup no longer protects the objects it names — and a restore made from
 * it can no longer be the basis of a retention approval. Retirement is final.
 */
export async function retireBackup(ctx: ServiceContext, backupId: string, by: string, reason: string): Promise<BackupRecord> {
  const why = reason.trim();
  if (why === '' || why.length > MAX_REASON_LENGTH)
    throw new InvalidInput(`a retirement needs a reason of 1–${MAX_REASON_LENGTH} characters`);
  const key = backupRegistryKey(backupId);
  const item = await ctx.items.get(key, { consistent: true });
  if (!item) throw new NotFound(`no backup ${backupId} in the registry`);
  const record = toRecord(item);
  if (record.status === 'RETIRED')
    throw new Conflict(`backup ${backupId} was already retired by ${String(record.retired_by)} at ${String(record.retired_at)}`);
  if (record.status === 'PENDING')
    throw new Conflict(
      `backup ${backupId} is PENDING: settle it first (alp start), or \`alp backups --abandon ${backupId}\` if its writer is gone`,
    );
  if (record.status !== 'COMPLETE')
    throw new Conflict(`backup ${backupId} is ${record.status}: it names nothing, there is nothing to retire`);
  const at = ctx.clock.now().toISOString();
  const set = { status: 'RETIRED', retired_at: at, retired_by: by, retire_reason: why };
  const core: TransactOp[] = [{ op: 'update', key, update: { set }, condition: cond.eq('status', 'COMPLETE') }, fenceCheck(ctx)];
  const event = { event_id: `backup:${backupId}:retired`, type: 'backup_retired', aggregate_id: `backup:${backupId}`, timestamp: at };
  const sinks = await Promise.all(ctx.auditSinks.map((s) => s.opsFor([event])));
  try {
    try {
      await ctx.items.transactWrite([...core, ...sinks.flatMap((p) => p.ops)]);
    } catch (e) {
      // A sink that cannot take the event (a full queue) never blocks the retirement: it counts a drop.
      if (!(e instanceof ConditionFailed && e.failedIndex !== undefined && e.failedIndex >= core.length)) throw e;
      await ctx.items.transactWrite([...core, ...sinks.flatMap((p) => p.fallback)]);
    }
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    if (e.failedIndex === 1) throw fenceHeld(await readFence(ctx), 'retire the backup');
    throw new Conflict(`backup ${backupId} changed while it was being retired; look at \`alp backups\` and retry`);
  }
  return { ...record, ...(set as Partial<BackupRecord>) };
}

function partialDir(b: BackupRecord): string {
  return path.join(path.dirname(b.location), `.${path.basename(b.location)}.partial-${b.backup_id}`);
}

/** The backup registry, newest first (base table: SYS#installation / BACKUP#…). */
export async function listBackups(ctx: Pick<ServiceContext, 'items'>): Promise<BackupRecord[]> {
  const out: BackupRecord[] = [];
  let cursor: string | undefined;
  do {
    const page = await ctx.items.query({
      pk: BACKUP_REGISTRY.pk,
      sk: { beginsWith: BACKUP_REGISTRY.skPrefix },
      descending: true,
      consistent: true,
      ...(cursor ? { cursor } : {}),
    });
    for (const i of page.items) out.push(toRecord(i));
    cursor = page.cursor;
  } while (cursor);
  return out;
}

function toRecord(i: Item): BackupRecord {
  const { PK: _pk, SK: _sk, type: _t, ...rest } = i;
  return rest as unknown as BackupRecord;
}

async function exists(p: string): Promise<boolean> {
  try {
    await fs.lstat(p);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
}

function fenceHeld(f: FenceInfo | undefined, what = 'back up'): MaintenanceInProgress {
  return new MaintenanceInProgress(
    f ? `maintenance is in progress: ${f.holder} (${f.purpose}) holds the fence in epoch ${f.epoch}; ${what} when it ends` : undefined,
    f ? { holder: f.holder, epoch: f.epoch } : undefined,
  );
}
