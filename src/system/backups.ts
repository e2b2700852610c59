/**
 * The backup registry: one SYS#installation / BACKUP#{backup_id} record per backup this installation
 * made (PENDING, COMPLETE, RETIRED), a reference source for retention. Written by recovery/backup.ts.
 */
import { BACKUP_SK_PREFIX, backupSk, NATIVE_BACKUP_SK_PREFIX, nativeBackupSk, SYS_PK } from '../core/keys.ts';
import type { Item, ItemKey, ItemStore } from '../store/item-store.ts';

/** The registry record of `backupId`. */
export function backupRegistryKey(backupId: string): ItemKey {
  return { PK: SYS_PK, SK: backupSk(backupId) };
}

/** Where the registry's records are: their partition and sort-key prefix. */
export const BACKUP_REGISTRY = { pk: SYS_PK, skPrefix: BACKUP_SK_PREFIX } as const;

/** The registry record of `backupId`, when there is one (a consistent read). */
export async function readBackupRecord(items: ItemStore, backupId: string): Promise<Item | undefined> {
  return items.get(backupRegistryKey(backupId), { consistent: true });
}

/** The record of a DynamoDB-native backup (recovery/dynamodb-export.ts): beside the registry, never a backup record. */
export function nativeBackupKey(id: string): ItemKey {
  return { PK: SYS_PK, SK: nativeBackupSk(id) };
}

/** Where the native backups' records are: their partition and sort-key prefix. */
export const NATIVE_BACKUPS = { pk: SYS_PK, skPrefix: NATIVE_BACKUP_SK_PREFIX } as const;
