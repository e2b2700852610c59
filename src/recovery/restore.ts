/**
 * `alp restore --from DIR` into a new installation (the target storage of the runtime): same
 * installation id, the restore recorded under RESTORE#{restore_id}, and a restore hold
 * (SYS#installation / RESTORE_HOLD) set before anything else is written, so a partial restore can
 * never pass for a usable one: while held, retention and telemetry delivery are refused, and only a
 * VERIFIED reconciliation releases the hold (reconcile.ts).
 *
 * Order: the manifest and the files are verified; the hold and the RESTORING record are written in one
 * transaction (the target must be empty); content (--with-content backups) is copied first, verified,
 * because content precedes the metadata that names it; then the items, in chunks, each chunk read back
 * and compared; then the content-root record; then the record moves to RESTORED. A restore that was
 * interrupted is resumed by running it again with the same backup; `reconcile` in the meantime reports
 * exactly which items and objects are missing.
 *
 * The backup directory is only read. Restoring into the source's own content root never writes an
 * object that is already there intact.
 */
import path from 'node:path';
import type { ContentStore } from '../content/content-store.ts';
import { openContentStore } from '../content/open.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import { DigestAccumulator } from '../core/digest.ts';
import { ConditionFailed, Conflict, IntegrityError, NotFound } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { HEAD_SK, RESTORE_SK, restorePk } from '../core/keys.ts';
import { forEachLimited } from '../core/limit.ts';
import type { HeadItem } from '../lifecycle/model.ts';
import { publishProvenanceDocument } from '../lifecycle/provenance.ts';
import { cond, type Item, type ItemKey, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { noInstallationCheck } from '../system/installation.ts';
import { contentRootKey, readRestoreHold, setRestoreHoldOp } from '../system/state.ts';
import type { PhaseProgress } from './backup.ts';
import { type BackupManifest, type BackupObject, CONTENT_DIR, isNeverBackedUp, openBackup, type VerifiedBackup } from './backup-format.ts';

export type RestoreStatus = 'RESTORING' | 'RESTORED' | 'ACTIVATED';

export interface RestoreRecord {
  restore_id: string;
  status: RestoreStatus;
  installation_id: string;
  backup_id: string;
  backup_location: string;
  manifest_digest: string;
  backup_epoch: number;
  backup_snapshot_at: string;
  with_content: boolean;
  items_expected: number;
  objects_expected: number;
  source_metadata: string;
  source_content: string;
  target_metadata: string;
  target_content: string;
  content_root_changed: boolean;
  started_at: string;
  started_by: string;
  restored_at?: string;
  items_written?: number;
  objects_copied?: number;
  objects_present?: number;
  /** Where the objects came from: `backup`, a fetched content root, or `none (referenced)`. */
  content_from?: string;
  derived_rebuilt?: number;
  last_reconcile_id?: string;
  last_reconcile_status?: 'VERIFIED' | 'FAILED';
  last_reconciled_at?: string;
  activated_at?: string;
  activated_by?: string;
  activation_reconcile_id?: string;
}

export interface RestoreOptions {
  from: string;
  actor: string;
  progress?: PhaseProgress;
  /** Items per write (and read-back) chunk; default 200. */
  chunk?: number;
  concurrency?: number;
  /**
   * Fetch the immutable objects the backup names from this content store (the source's root, or a
   * replica) into the target, verified, instead of (or besides) the backup's own copies. Only read.
   */
  fetchFrom?: ContentStore;
}

export interface RestoreResult {
  record: RestoreRecord;
  resumed: boolean;
  manifest: BackupManifest;
}

export const restoreKey = (restoreId: string): ItemKey => ({ PK: restorePk(restoreId), SK: RESTORE_SK });

export async function readRestoreRecord(ctx: Pick<ServiceContext, 'items'>, restoreId: string): Promise<RestoreRecord | undefined> {
  const item = await ctx.items.get(restoreKey(restoreId), { consistent: true });
  if (!item) return undefined;
  const { PK: _pk, SK: _sk, type: _t, ...rest } = item;
  return rest as unknown as RestoreRecord;
}

/** The restore the hold names, if a hold is set. */
export async function heldRestore(
  ctx: Pick<ServiceContext, 'items'>,
): Promise<{ restoreId: string; record: RestoreRecord | undefined } | undefined> {
  const hold = await readRestoreHold(ctx.items);
  if (!hold) return undefined;
  const restoreId = hold.restore_id;
  return { restoreId, record: await readRestoreRecord(ctx, restoreId) };
}

const noProgress: PhaseProgress = () => ({});

export async function restoreBackup(ctx: ServiceContext, opts: RestoreOptions): Promise<RestoreResult> {
  const backup = await openBackup(opts.from);
  const m = backup.manifest;
  const progress = opts.progress ?? noProgress;
  const { record, resumed } = await beginRestore(ctx, backup, opts.actor);
  const restoreId = record.restore_id;

  // 1. Content first: the metadata must never name bytes that are not there.
  let copied = 0;
  let present = 0;
  if (m.with_content || opts.fetchFrom) {
    const r = await restoreContent(ctx, backup, opts.fetchFrom, progress, opts.concurrency ?? 4);
    copied = r.copied;
    present = r.present;
  }

  // 2. The items, in chunks; every chunk is read back and compared before the next.
  const chunkSize = opts.chunk ?? 200;
  const bar = progress('items', m.items.count);
  const acc = new DigestAccumulator();
  let lines = 0;
  let written = 0;
  let chunk: Item[] = [];
  const flush = async () => {
    if (chunk.length === 0) return;
    await ctx.items.batchPut(chunk);
    const back = await ctx.items.batchGet(chunk.map((i) => ({ PK: i.PK, SK: i.SK })));
    const byKey = new Map(back.map((i) => [`${i.PK}\u0000${i.SK}`, i]));
    for (const item of chunk) {
      const got = byKey.get(`${item.PK}\u0000${item.SK}`);
      if (!got || canonicalJson(got) !== canonicalJson(item)) {
        throw new IntegrityError(`restored item ${item.PK} ${item.SK} does not read back as written`, { PK: item.PK, SK: item.SK });
      }
    }
    written += chunk.length;
    bar.tick?.(chunk.length);
    chunk = [];
  };
  for await (const item of backup.items()) {
    const line = Buffer.from(`${canonicalJson(item)}\n`, 'utf8');
    acc.update(line);
    lines++;
    if (isNeverBackedUp(item)) continue;
    chunk.push(item);
    if (chunk.length >= chunkSize) await flush();
  }
  await flush();
  // The file was verified before; this proves the bytes written are the bytes the manifest vouches for.
  if (acc.digest() !== m.items.digest || lines !== m.items.count) {
    throw new IntegrityError(`${m.items.file} changed while it was being restored: run the restore again`, { dir: backup.dir });
  }

  // 3. Where the objects live now; a different root starts fresh grace periods for retention.
  const now = ctx.clock.now().toISOString();
  await ctx.items.put({
    ...contentRootKey,
    type: 'content_root',
    location: ctx.content.location,
    since: now,
    restore_id: restoreId,
    previous_location: m.source.content,
    changed: record.content_root_changed,
  });

  // 4. Derived documents (provenance/) are rebuilt from the restored items in a new content root; in
  // the source's own root they are left alone (they belong to the live installation).
  let rebuilt = 0;
  if (record.content_root_changed) rebuilt = await rebuildDerived(ctx, backup);

  const done = {
    status: 'RESTORED' as const,
    content_from: m.with_content ? 'backup' : opts.fetchFrom ? opts.fetchFrom.location : 'none (referenced)',
    restored_at: ctx.clock.now().toISOString(),
    items_written: written,
    objects_copied: copied,
    objects_present: present,
    derived_rebuilt: rebuilt,
  };
  await ctx.items.update(restoreKey(restoreId), { set: done }, { condition: cond.eq('status', 'RESTORING') });
  return { record: { ...record, ...done }, resumed, manifest: m };
}

/** Sets the hold and the RESTORING record on an empty target, or resumes an interrupted restore of the same backup. */
async function beginRestore(
  ctx: ServiceContext,
  backup: VerifiedBackup,
  actor: string,
): Promise<{ record: RestoreRecord; resumed: boolean }> {
  const m = backup.manifest;
  const held = await heldRestore(ctx);
  if (held) {
    const r = held.record;
    if (r && r.status === 'RESTORING' && r.manifest_digest === m.manifest_digest) return { record: r, resumed: true };
    throw new Conflict(
      r?.manifest_digest === m.manifest_digest
        ? `this backup was already restored here (restore ${held.restoreId}, ${r.status}): reconcile it (alp reconcile --activate)`
        : `the target holds restore ${held.restoreId} of another backup (${r?.backup_id ?? 'unknown'}): restore into an empty installation`,
      { restore_id: held.restoreId },
    );
  }
  const first = await ctx.items.scan({ limit: 1 });
  if (first.items.length > 0) {
    throw new Conflict(`the target ${ctx.items.location} is not empty: a restore creates a new installation, give it new storage`);
  }
  const restoreId = newId(ctx.clock);
  const record: RestoreRecord = {
    restore_id: restoreId,
    status: 'RESTORING',
    installation_id: m.installation_id,
    backup_id: m.backup_id,
    backup_location: backup.dir,
    manifest_digest: m.manifest_digest,
    backup_epoch: m.epoch,
    backup_snapshot_at: m.snapshot_at,
    with_content: m.with_content,
    items_expected: m.items.count,
    objects_expected: m.objects.count,
    source_metadata: m.source.metadata,
    source_content: m.source.content,
    target_metadata: ctx.items.location,
    target_content: ctx.content.location,
    content_root_changed: m.source.content !== ctx.content.location,
    started_at: ctx.clock.now().toISOString(),
    started_by: actor,
  };
  const ops: TransactOp[] = [
    setRestoreHoldOp(restoreId, record.started_at),
    { op: 'put', item: { ...restoreKey(restoreId), type: 'restore', ...record }, condition: cond.notExists() },
    noInstallationCheck(),
  ];
  try {
    await ctx.items.transactWrite(ops);
  } catch (e) {
    if (e instanceof ConditionFailed) throw new Conflict('another restore or installation started in the target at the same time');
    throw e;
  }
  return { record, resumed: false };
}

async function restoreContent(
  ctx: ServiceContext,
  backup: VerifiedBackup,
  fetchFrom: ContentStore | undefined,
  progress: PhaseProgress,
  concurrency: number,
): Promise<{ copied: number; present: number }> {
  const own = backup.manifest.with_content;
  const source = own ? await openContentStore({ engine: 'fs', root: path.join(backup.dir, CONTENT_DIR) }) : (fetchFrom as ContentStore);
  // The manifest's objects are streamed a page at a time (bounded memory, issue 17 A2).
  const bar = progress('content', backup.manifest.objects.count - backup.manifest.objects.mutable);
  let copied = 0;
  let present = 0;
  const one = async (o: BackupObject) => {
    const sized = o.size === undefined ? {} : { expectedSize: o.size };
    if (await intact(ctx, o, sized)) present++;
    else {
      let stream: Awaited<ReturnType<typeof source.get>>;
      try {
        stream = await source.get(o.key, o.digest, sized);
      } catch (e) {
        if (!(e instanceof NotFound)) throw e;
        if (own && fetchFrom) stream = await fetchFrom.get(o.key, o.digest, sized);
        else throw new IntegrityError(`${own ? 'the backup lacks its copy of' : 'the content source lacks'} ${o.key}`, { key: o.key });
      }
      await ctx.content.put(o.key, stream, { expectedDigest: o.digest, repair: true });
      copied++;
    }
    bar.tick?.(1);
  };
  try {
    let page: BackupObject[] = [];
    for await (const o of backup.objects()) {
      if (o.mutable) continue;
      page.push(o);
      if (page.length >= CONTENT_PAGE) {
        await forEachLimited(page, concurrency, one);
        page = [];
      }
    }
    await forEachLimited(page, concurrency, one);
  } finally {
    if (own) await source.close();
  }
  return { copied, present };
}

/** Whether the target already holds the object with the right bytes (then it is not written again). */
async function intact(ctx: ServiceContext, o: BackupObject, sized: { expectedSize?: number }): Promise<boolean> {
  if (!(await ctx.content.head(o.key))) return false;
  try {
    for await (const _ of await ctx.content.get(o.key, o.digest, sized)) {
    }
    return true;
  } catch {
    return false;
  }
}

/** Rebuilds each provenance document as its head is read from the backup (streaming). */
async function rebuildDerived(ctx: ServiceContext, backup: VerifiedBackup): Promise<number> {
  let n = 0;
  for await (const item of backup.items()) {
    if (item.SK === HEAD_SK && item.type === 'head' && (item as HeadItem).provenance_key !== undefined) {
      await publishProvenanceDocument(ctx, (item as HeadItem).artifact_id);
      n++;
    }
  }
  return n;
}

/** Objects restored concurrently per page of the manifest. */
const CONTENT_PAGE = 1000;
