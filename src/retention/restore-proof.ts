import { parseMetadataUrl } from '../core/config.ts';
import { NotFound } from '../core/errors.ts';
import { backupSk, SYS_PK } from '../core/keys.ts';
import { readRestoreProof } from '../recovery/reconcile.ts';
import type { ItemStore } from '../store/item-store.ts';
import { openItemStore } from '../store/open.ts';

/**
 * Checks that `ref` (a path to a restored SQLite database, or a metadata URL) is an actual restore of
 * this installation whose reconciliation was activated VERIFIED, made from a backup this installation
 * (`registry`, its own items) has not retired. Returns the reason it is not, or undefined when it is.
 */
export async function verifyRestoreReference(ref: unknown, installationId: string, registry: ItemStore): Promise<string | undefined> {
  if (typeof ref !== 'string' || ref.trim() === '') return 'the approval names no verified restore';
  let items: Awaited<ReturnType<typeof openItemStore>>;
  try {
    const config = /^(sqlite:|dynamodb:\/\/)/.test(ref) ? parseMetadataUrl(ref) : parseMetadataUrl(`sqlite:${ref}`);
    items = await openItemStore(config, { readOnly: true });
  } catch (e) {
    if (e instanceof NotFound) return `no restore database at ${ref}`;
    return `cannot open the restore ${ref}: ${e instanceof Error ? e.message : String(e)}`;
  }
  try {
    const proof = await readRestoreProof({ items });
    if (!proof) return `${ref} is not a restore whose reconciliation was activated VERIFIED`;
    if (proof.installation_id !== installationId)
      return `${ref} is a restore of installation ${proof.installation_id}, not ${installationId}`;
    return await retiredBasis(registry, ref, proof.backup_id);
  } catch (e) {
    return `cannot read the restore ${ref}: ${e instanceof Error ? e.message : String(e)}`;
  } finally {
    await items.close();
  }
}

/** A restore made from a retired backup proves nothing about the backups kept now. */
async function retiredBasis(registry: ItemStore, ref: string, backupId: string): Promise<string | undefined> {
  const b = await registry.get({ PK: SYS_PK, SK: backupSk(backupId) }, { consistent: true });
  if (b?.status !== 'RETIRED') return undefined;
  return `${ref} was restored from backup ${backupId}, retired by ${String(b.retired_by)} at ${String(b.retired_at)}: a retired backup can no longer be the basis of a restore proof; restore a current backup and reconcile it`;
}
