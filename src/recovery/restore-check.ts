/**
 * Re-checks a restore against the backup it names (issue 17 item B7, seed 004 "It must point to an
 * actual same-installation restore database whose slice 3 reconciliation was activated as VERIFIED"):
 * rows that claim an ACTIVATED restore and a VERIFIED reconciliation prove nothing by themselves (a copy
 * of the live database with three inserted rows carries them), so the restore's actual items and
 * objects are compared with the backup's — the backup the LIVE installation registered, opened from its
 * registry's location and verified against its registry's manifest digest, never from what the restore
 * says about it.
 *
 * Items: the restore must hold every item of the backup, byte-for-byte (canonical JSON), and nothing
 * else beyond the rows a restore, its reconciliations and its activation write (REWRITTEN and
 * bookkeeping() below). A restore written to after its activation is no longer what was verified: it
 * is refused, naming the first row that differs. Objects: every immutable object the manifest names is
 * present in the restore's content root with the manifest's size (and, where the engine keeps one, the
 * storage's own SHA-256 equal to the manifest's digest); re-hashing every byte was done by the
 * reconciliation and is not repeated on every approval.
 *
 * Both comparisons stream: the two item sets go into a scratch working set on disk (system/scratch.ts)
 * and are compared by SQL joins; the manifest's objects are read line by line. Memory stays flat.
 */

import type { ContentStore } from '../content/content-store.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import { digestHex, sha256 } from '../core/digest.ts';
import type { Item, ItemStore } from '../store/item-store.ts';
import { isRestoreBookkeeping, isRewrittenByRestore } from '../system/restore-proof.ts';
import { openScratch } from '../system/scratch.ts';
import { isNeverBackedUp, type VerifiedBackup } from './backup-format.ts';

const BATCH = 1000;

/** Rows in the restore that are not in the backup and that the restore itself wrote (system/restore-proof.ts). */
const bookkeeping = isRestoreBookkeeping;

const row = (pk: string, sk: string) => `${pk} ${sk}`;

/**
 * Whether the restore's items are the backup's items (plus its own bookkeeping). Returns the reason
 * they are not (naming the first row that differs and how many do), or undefined.
 */
export async function compareRestoredItems(
  restore: ItemStore,
  backup: VerifiedBackup,
  restoreId: string,
  backupEpoch: number,
): Promise<string | undefined> {
  const scratch = openScratch('restore-check');
  try {
    const db = scratch.db;
    db.exec('CREATE TABLE b (pk TEXT NOT NULL, sk TEXT NOT NULL, h TEXT NOT NULL, PRIMARY KEY (pk, sk)) WITHOUT ROWID');
    db.exec('CREATE TABLE r (pk TEXT NOT NULL, sk TEXT NOT NULL, h TEXT NOT NULL, PRIMARY KEY (pk, sk)) WITHOUT ROWID');
    const insertB = db.prepare('INSERT OR REPLACE INTO b (pk, sk, h) VALUES (?, ?, ?)');
    const insertR = db.prepare('INSERT OR REPLACE INTO r (pk, sk, h) VALUES (?, ?, ?)');
    const load = (stmt: typeof insertB, rows: Item[]) =>
      db.transaction((list: Item[]) => {
        for (const i of list) stmt.run(i.PK, i.SK, digestHex(sha256(canonicalJson(i))));
      })(rows);
    let chunk: Item[] = [];
    for await (const item of backup.items()) {
      if (isNeverBackedUp(item)) continue;
      chunk.push(item);
      if (chunk.length >= BATCH) {
        load(insertB, chunk);
        chunk = [];
      }
    }
    load(insertB, chunk);
    let cursor: string | undefined;
    do {
      const page = await restore.scan(cursor ? { cursor } : {});
      load(
        insertR,
        page.items.filter((i) => !isNeverBackedUp(i)),
      );
      cursor = page.cursor;
    } while (cursor);
    return differences(db, backup.manifest.backup_id, restoreId, backupEpoch);
  } finally {
    scratch.close();
  }
}

type Db = ReturnType<typeof openScratch>['db'];

function differences(db: Db, backupId: string, restoreId: string, backupEpoch: number): string | undefined {
  const rewritten = (pk: string, sk: string) => isRewrittenByRestore({ PK: pk, SK: sk });
  let changed = 0;
  let firstChanged: string | undefined;
  const lost = db.prepare('SELECT b.pk, b.sk, r.h AS rh FROM b LEFT JOIN r ON r.pk = b.pk AND r.sk = b.sk WHERE r.h IS NULL OR r.h <> b.h');
  for (const d of lost.iterate() as Iterable<{ pk: string; sk: string; rh: string | null }>) {
    if (d.rh !== null && rewritten(d.pk, d.sk)) continue;
    changed++;
    firstChanged ??= `${row(d.pk, d.sk)} ${d.rh === null ? 'is missing' : 'differs'}`;
  }
  let extra = 0;
  let firstExtra: string | undefined;
  const added = db.prepare('SELECT r.pk, r.sk FROM r LEFT JOIN b ON b.pk = r.pk AND b.sk = r.sk WHERE b.pk IS NULL');
  for (const d of added.iterate() as Iterable<{ pk: string; sk: string }>) {
    if (bookkeeping({ PK: d.pk, SK: d.sk }, restoreId, backupEpoch)) continue;
    extra++;
    firstExtra ??= row(d.pk, d.sk);
  }
  if (changed === 0 && extra === 0) return undefined;
  const parts: string[] = [];
  if (changed) parts.push(`${changed} item(s) of the backup missing or different (first: ${firstChanged})`);
  if (extra) parts.push(`${extra} item(s) the backup does not hold (first: ${firstExtra})`);
  return `its items do not match backup ${backupId}: ${parts.join('; ')} — it is not the restore of that backup as it was activated`;
}

/**
 * Whether the restore's content root holds every immutable object the manifest names, with the
 * manifest's size (and digest, where the storage keeps one). Returns the reason it does not, or undefined.
 */
export async function compareRestoredContent(content: ContentStore, backup: VerifiedBackup): Promise<string | undefined> {
  let bad = 0;
  let first: string | undefined;
  for await (const o of backup.objects()) {
    if (o.mutable || o.retained) continue;
    const info = await content.head(o.key);
    const problem = !info
      ? 'is missing'
      : o.size !== undefined && info.size !== o.size
        ? `has ${info.size} bytes, not ${o.size}`
        : info.sha256 !== undefined && info.sha256 !== o.digest
          ? 'has another digest'
          : undefined;
    if (problem === undefined) continue;
    bad++;
    first ??= `${o.key} ${problem}`;
  }
  if (bad === 0) return undefined;
  return `its content root ${content.location} does not hold the objects of backup ${backup.manifest.backup_id}: ${bad} object(s) missing or different (first: ${first})`;
}
