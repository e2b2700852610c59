import { parseMetadataUrl } from '../core/config.ts';
import { NotFound } from '../core/errors.ts';
import { readRestoreProof } from '../recovery/reconcile.ts';
import { openItemStore } from '../store/open.ts';

/**
 * Checks that `ref` (a path to a restored SQLite database, or a metadata URL) is an actual restore of
 * this installation whose reconciliation was activated VERIFIED. Returns the reason it is not, or
 * undefined when it is.
 */
export async function verifyRestoreReference(ref: unknown, installationId: string): Promise<string | undefined> {
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
    return undefined;
  } catch (e) {
    return `cannot read the restore ${ref}: ${e instanceof Error ? e.message : String(e)}`;
  } finally {
    await items.close();
  }
}
