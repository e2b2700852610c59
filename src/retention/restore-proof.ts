import fs from 'node:fs';
import path from 'node:path';
import { type MetadataConfig, parseMetadataUrl, resolveStorageConfig } from '../core/config.ts';
import { AlpError, InvalidInput, NotFound } from '../core/errors.ts';
import type { ItemStore } from '../store/item-store.ts';
import { openItemStore } from '../store/open.ts';
import { readBackupRecord } from '../system/backups.ts';
import { readRestoreProof } from '../system/restore-proof.ts';

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
 * items) has not retired. Returns the reason it is not, or undefined when it is.
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
  let backupId: string;
  try {
    const proof = await readRestoreProof({ items });
    if (!proof) return `${ref} is not a restore whose reconciliation was activated VERIFIED`;
    if (proof.installation_id !== installationId)
      return `${ref} is a restore of installation ${proof.installation_id}, not ${installationId}`;
    backupId = proof.backup_id;
  } catch (e) {
    if (e instanceof AlpError) return `cannot read the restore ${ref}: ${e.message}`;
    return `cannot read the restore ${ref}: it is not an ALP installation's metadata store (${codeOf(e)})`;
  } finally {
    await items.close();
  }
  // The installation's own registry, outside the catch: its storage failing is a failure of this run
  // (STORAGE, THROTTLED…), not a reason to refuse the restore.
  return retiredBasis(registry, ref, backupId);
}

function codeOf(e: unknown): string {
  const code = (e as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : e instanceof Error ? e.name : 'unreadable';
}

/** A restore made from a retired backup proves nothing about the backups kept now. */
async function retiredBasis(registry: ItemStore, ref: string, backupId: string): Promise<string | undefined> {
  const b = await readBackupRecord(registry, backupId);
  if (b?.status !== 'RETIRED') return undefined;
  return `${ref} was restored from backup ${backupId}, retired by ${String(b.retired_by)} at ${String(b.retired_at)}: a retired backup can no longer be the basis of a restore proof; restore a current backup and reconcile it`;
}
