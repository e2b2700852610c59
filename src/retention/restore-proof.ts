import fs from 'node:fs';
import path from 'node:path';
import type { ContentStore } from '../content/content-store.ts';
import { openContentStore } from '../content/open.ts';
import { type MetadataConfig, parseContentUrl, parseMetadataUrl, resolveStorageConfig } from '../core/config.ts';
import { AlpError, InvalidInput, NotFound } from '../core/errors.ts';
import { openBackup, type VerifiedBackup } from '../recovery/backup-format.ts';
import { compareRestoredContent, compareRestoredItems } from '../recovery/restore-check.ts';
import type { ItemStore } from '../store/item-store.ts';
import { openItemStore } from '../store/open.ts';
import { readBackupRecord } from '../system/backups.ts';
import { type RestoreProof, readRestoreProof } from '../system/restore-proof.ts';

const SQLITE_HEADER = 'SQLite format 3\0';
const ACCEPTED = 'give the data directory `alp restore --data DIR` created, its alp.db, sqlite:PATH or dynamodb://TABLE?region=R';

/**
 * The metadata store a restore reference (`alp retention run --restore`) names: a data directory
 * (DIR/alp.db beside DIR/content, what `alp restore --data DIR` creates — resolved like the global
 * --data), a SQLite database file, a `sqlite:` URL, or a `dynamodb://` URL (what `alp restore
 * --metadata` names). Anything else — missing, a directory that is no installation, not a SQLite
 * database, unreadable — is NOT_FOUND or INVALID naming the path, never a raw SQLite error.
 */
export function resolveRestoreReference(ref: string, cwd = process.cwd()): MetadataConfig {
  const text = ref.trim();
  if (text === '') throw new InvalidInput(`the approval names no verified restore: ${ACCEPTED}`);
  if (text.startsWith('dynamodb://')) return parseMetadataUrl(text, cwd);
  let file = text.startsWith('sqlite:') ? (parseMetadataUrl(text, cwd) as { path: string }).path : path.resolve(cwd, text);
  if (statOf(file, text)?.isDirectory()) {
    const db = (resolveStorageConfig({ data: file }, {}, cwd).metadata as { path: string }).path;
    if (!statOf(db, text)?.isFile())
      throw new NotFound(`the restore ${file} is a directory but not an installation's data directory (no alp.db in it): ${ACCEPTED}`, {
        path: file,
      });
    file = db;
  }
  const st = statOf(file, text);
  if (!st) throw new NotFound(`no restore at ${file}: ${ACCEPTED}`, { path: file });
  if (!st.isFile()) throw new InvalidInput(`the restore ${file} is not a regular file: ${ACCEPTED}`, { path: file });
  if (readHeader(file) !== SQLITE_HEADER)
    throw new InvalidInput(`the restore ${file} is not a SQLite database: ${ACCEPTED}`, { path: file });
  return { engine: 'sqlite', path: file };
}

function statOf(file: string, ref: string): fs.Stats | undefined {
  try {
    return fs.statSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw new InvalidInput(`cannot read the restore ${ref} (${file}): ${String(code)}`, { path: file, errno: code });
  }
}

function readHeader(file: string): string {
  let fd: number | undefined;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    const buf = Buffer.alloc(SQLITE_HEADER.length);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    return buf.subarray(0, n).toString('latin1');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new InvalidInput(`cannot read the restore ${file}: ${String(code)}`, { path: file, errno: code });
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/**
 * Checks that `ref` (see resolveRestoreReference) is an actual restore of this installation whose
 * reconciliation was activated VERIFIED, made from a backup this installation (`registry`, its own
 * items) recorded as COMPLETE with the manifest digest the restore names (a retired backup is
 * refused), and that the restore's items and objects are that backup's (recovery/restore-check.ts):
 * rows claiming an activation prove nothing by themselves (issue 17 item B7). Returns the reason it is
 * not, or undefined when it is.
 */
export async function verifyRestoreReference(ref: unknown, installationId: string, registry: ItemStore): Promise<string | undefined> {
  if (typeof ref !== 'string' || ref.trim() === '') return 'the approval names no verified restore';
  let items: Awaited<ReturnType<typeof openItemStore>>;
  try {
    items = await openItemStore(resolveRestoreReference(ref), { readOnly: true });
  } catch (e) {
    if (e instanceof AlpError) return e.message;
    return `cannot open the restore ${ref}: ${codeOf(e)}`;
  }
  try {
    let proof: RestoreProof | undefined;
    try {
      proof = await readRestoreProof({ items });
    } catch (e) {
      if (e instanceof AlpError) return `cannot read the restore ${ref}: ${e.message}`;
      return `cannot read the restore ${ref}: it is not an ALP installation's metadata store (${codeOf(e)})`;
    }
    if (!proof) return `${ref} is not a restore whose reconciliation was activated VERIFIED`;
    if (proof.installation_id !== installationId)
      return `${ref} is a restore of installation ${proof.installation_id}, not ${installationId}`;
    // The installation's own registry, outside the catch: its storage failing is a failure of this run
    // (STORAGE, THROTTLED…), not a reason to refuse the restore.
    const basis = await registeredBasis(registry, ref, proof, installationId);
    if (typeof basis === 'string') return basis;
    return await matchesBackup(ref, items, proof, basis);
  } finally {
    await items.close();
  }
}

/**
 * The registry record of the backup the restore names: present, this installation's, COMPLETE (a
 * retired backup proves nothing about the backups kept now), with the manifest digest the restore
 * names. Returns the reason it is not, or the backup's location and manifest digest as recorded.
 */
async function registeredBasis(
  registry: ItemStore,
  ref: string,
  proof: RestoreProof,
  installationId: string,
): Promise<{ location: string; manifestDigest: string } | string> {
  const b = await readBackupRecord(registry, proof.backup_id);
  if (!b)
    return `${ref} names backup ${proof.backup_id}, which this installation never recorded (no such backup in its registry): a restore proof must come from a backup the installation itself made`;
  if (b.status === 'RETIRED')
    return `${ref} was restored from backup ${proof.backup_id}, retired by ${String(b.retired_by)} at ${String(b.retired_at)}: a retired backup can no longer be the basis of a restore proof; restore a current backup and reconcile it`;
  if (b.status !== 'COMPLETE')
    return `${ref} names backup ${proof.backup_id}, which this installation recorded as ${String(b.status)}, not COMPLETE`;
  if (b.installation_id !== installationId) return `${ref} names backup ${proof.backup_id}, which is not of installation ${installationId}`;
  if (b.manifest_digest !== proof.manifest_digest)
    return `${ref} names backup ${proof.backup_id} with manifest digest ${proof.manifest_digest}, but this installation recorded ${String(b.manifest_digest)}`;
  return { location: String(b.location), manifestDigest: b.manifest_digest as string };
}

/** The restore's items and objects against the backup as the registry recorded it (opened and verified here). */
async function matchesBackup(
  ref: string,
  items: ItemStore,
  proof: RestoreProof,
  basis: { location: string; manifestDigest: string },
): Promise<string | undefined> {
  let backup: VerifiedBackup;
  try {
    backup = await openBackup(basis.location, { expectedManifestDigest: basis.manifestDigest });
  } catch (e) {
    if (!(e instanceof AlpError)) throw e;
    return `${ref} names backup ${proof.backup_id}, whose directory ${basis.location} cannot be verified against the registry: ${e.message}`;
  }
  if (backup.manifest.backup_id !== proof.backup_id || backup.manifest.installation_id !== proof.installation_id)
    return `${ref} names backup ${proof.backup_id}, but ${basis.location} holds backup ${backup.manifest.backup_id}`;
  const itemsWhy = await compareRestoredItems(items, backup, proof.restore_id, backup.manifest.epoch);
  if (itemsWhy) return `${ref}: ${itemsWhy}`;
  let content: ContentStore;
  try {
    content = await openContentStore(parseContentUrl(proof.target_content));
  } catch (e) {
    if (!(e instanceof AlpError)) throw e;
    return `${ref}: cannot open its content root ${proof.target_content}: ${e.message}`;
  }
  try {
    const contentWhy = await compareRestoredContent(content, backup);
    return contentWhy ? `${ref}: ${contentWhy}` : undefined;
  } finally {
    await content.close();
  }
}

function codeOf(e: unknown): string {
  const code = (e as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : e instanceof Error ? e.name : 'unreadable';
}
