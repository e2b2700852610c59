/**
 * The restore proof: whether this installation's metadata store is an activated, VERIFIED restore
 * (SYS#installation / RESTORE_ACTIVATION naming a restore record and its reconciliation). Written by
 * recovery/reconcile.ts (activation); read here for retention's restore approvals.
 */
import {
  EPOCH_RECORD_SK_PREFIX,
  INSTALLATION_SK,
  RECONCILE_SK_PREFIX,
  RESTORE_ACTIVATION_SK,
  RESTORE_SK,
  reconcileSk,
  restorePk,
  SYS_PK,
} from '../core/keys.ts';
import type { ItemKey, ItemStore } from '../store/item-store.ts';
import { contentRootKey, epochKey, restoreHoldKey } from './state.ts';

/** SYS#installation / RESTORE_ACTIVATION: which restore (and reconciliation) this installation was activated from. */
export const activationKey: ItemKey = { PK: SYS_PK, SK: RESTORE_ACTIVATION_SK };

/**
 * Proof that this store is an activated, VERIFIED restore (what the retention approval points to):
 * no hold is set and the latest activated restore record names a VERIFIED reconciliation. Undefined
 * when the store is not such a restore.
 */
export interface RestoreProof {
  installation_id: string;
  restore_id: string;
  reconcile_id: string;
  activated_at: string;
  activated_by: string;
  backup_id: string;
  backup_epoch: number;
  backup_snapshot_at: string;
  manifest_digest: string;
  target_metadata: string;
  target_content: string;
}

export async function readRestoreProof(ctx: { items: ItemStore }): Promise<RestoreProof | undefined> {
  if (await ctx.items.get(restoreHoldKey, { consistent: true })) return undefined;
  const installation = await ctx.items.get({ PK: SYS_PK, SK: INSTALLATION_SK }, { consistent: true });
  if (!installation) return undefined;
  const activation = await ctx.items.get(activationKey, { consistent: true });
  if (!activation) return undefined;
  const restore = await ctx.items.get({ PK: restorePk(activation.restore_id as string), SK: RESTORE_SK }, { consistent: true });
  const rec = await ctx.items.get(
    { PK: restorePk(activation.restore_id as string), SK: reconcileSk(activation.reconcile_id as string) },
    { consistent: true },
  );
  if (restore?.status !== 'ACTIVATED' || rec?.status !== 'VERIFIED') return undefined;
  if (restore.installation_id !== installation.installation_id || rec.installation_id !== installation.installation_id) return undefined;
  return {
    installation_id: installation.installation_id as string,
    restore_id: restore.restore_id as string,
    reconcile_id: rec.reconcile_id as string,
    activated_at: restore.activated_at as string,
    activated_by: restore.activated_by as string,
    backup_id: restore.backup_id as string,
    backup_epoch: restore.backup_epoch as number,
    backup_snapshot_at: restore.backup_snapshot_at as string,
    manifest_digest: restore.manifest_digest as string,
    target_metadata: restore.target_metadata as string,
    target_content: restore.target_content as string,
  };
}

const sameKey = (a: ItemKey, b: ItemKey) => a.PK === b.PK && a.SK === b.SK;

/** Backup rows a restore and its activation legitimately rewrite: the epoch (advanced), the content root (the target's). */
export function isRewrittenByRestore(key: ItemKey): boolean {
  return sameKey(key, epochKey) || sameKey(key, contentRootKey);
}

/**
 * Whether `key` is a row the restore of `restoreId` (from a backup of epoch `backupEpoch`) itself wrote
 * or legitimately rewrote: its restore record and reconciliations, the activation, the epoch (advanced)
 * and its later records, the content root (the target's). recovery/restore-check.ts compares every
 * other row of a restore with its backup (issue 17 B7).
 */
export function isRestoreBookkeeping(key: ItemKey, restoreId: string, backupEpoch: number): boolean {
  if (key.PK === restorePk(restoreId)) return true;
  if (key.PK !== SYS_PK) return false;
  if ([activationKey, epochKey, contentRootKey].some((k) => sameKey(key, k))) return true;
  if (key.SK.startsWith(RECONCILE_SK_PREFIX)) return true;
  if (key.SK.startsWith(EPOCH_RECORD_SK_PREFIX)) return Number(key.SK.slice(EPOCH_RECORD_SK_PREFIX.length)) > backupEpoch;
  return false;
}
