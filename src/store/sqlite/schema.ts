/**
 * The SQLite engine's schema and its in-place migration.
 *
 * Version 1 (user_version 0): `items` (PK, SK, GSI1PK, GSI1SK, attrs) and the partial index GSI1.
 * Version 2 adds the bookkeeping of segmented scans and change marks (item-store.ts), in columns, so
 * no engine attribute ever reaches an item:
 * - `phash`: partitionHash(PK) (store/scan-options.ts), written with every row, indexed (phash, PK, SK):
 *   segment s of T is the hash range [s·2^32/T, (s+1)·2^32/T), read through the index;
 * - `wseq`: the write sequence number of the transaction that last put or updated the row, from the
 *   counter row `alp_meta('wseq')` that each write transaction increments once (under SQLite's write
 *   lock, so across processes too); indexed where not NULL. Rows from before the migration have NULL:
 *   never "changed since" a mark, which is always taken after the migration;
 * - `alp_meta('instance')`: a random id of this database, part of every mark, so a mark of another
 *   database (a replaced or restored file) is answered conservatively with every item.
 * The migration runs on open (never on a read-only store), in one IMMEDIATE transaction that checks
 * the version again under the write lock: idempotent, safe with several processes opening at once.
 */
import type Database from 'better-sqlite3';
import { randomToken } from '../../core/ids.ts';
import { partitionHash } from '../scan-options.ts';

export const SCHEMA_VERSION = 2;

const BASE_SCHEMA = `
CREATE TABLE IF NOT EXISTS items (
  PK TEXT NOT NULL,
  SK TEXT NOT NULL,
  GSI1PK TEXT,
  GSI1SK TEXT,
  attrs TEXT NOT NULL,
  PRIMARY KEY (PK, SK)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS GSI1 ON items (GSI1PK, GSI1SK, PK, SK) WHERE GSI1PK IS NOT NULL AND GSI1SK IS NOT NULL;
`;

const V2_INDEXES = `
CREATE TABLE IF NOT EXISTS alp_meta (name TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS items_phash ON items (phash, PK, SK);
CREATE INDEX IF NOT EXISTS items_wseq ON items (wseq) WHERE wseq IS NOT NULL;
`;

const HASH_FUNCTION = 'alp_partition_hash';

/** Whether the database has version 2's columns (a read-only store of an older file may not). */
export function hasChangeColumns(db: Database.Database): boolean {
  return (db.pragma('user_version', { simple: true }) as number) >= SCHEMA_VERSION;
}

/** Creates or migrates the schema of a writable database. */
export function prepareSchema(db: Database.Database): void {
  db.exec(BASE_SCHEMA);
  db.function(HASH_FUNCTION, { deterministic: true }, (pk: unknown) => partitionHash(String(pk)));
  if (!hasChangeColumns(db)) db.transaction(() => migrateToV2(db)).immediate();
  // A row without its hash (written by an older ALP after the migration) would be in no segment:
  // the index finds one in O(log n), and the backfill repairs every such row.
  const missing = db.prepare('SELECT 1 FROM items INDEXED BY items_phash WHERE phash IS NULL LIMIT 1').get();
  if (missing) db.transaction(() => backfillHashes(db)).immediate();
}

function migrateToV2(db: Database.Database): void {
  if (hasChangeColumns(db)) return; // another process migrated it while this one waited for the lock
  const columns = new Set((db.pragma('table_info(items)') as Array<{ name: string }>).map((c) => c.name));
  if (!columns.has('phash')) db.exec('ALTER TABLE items ADD COLUMN phash INTEGER');
  if (!columns.has('wseq')) db.exec('ALTER TABLE items ADD COLUMN wseq INTEGER');
  db.exec(V2_INDEXES);
  const insert = db.prepare('INSERT OR IGNORE INTO alp_meta (name, value) VALUES (?, ?)');
  insert.run('wseq', 0);
  insert.run('instance', randomToken(12));
  backfillHashes(db);
  db.pragma(`user_version = ${SCHEMA_VERSION}`);
}

function backfillHashes(db: Database.Database): void {
  db.prepare(`UPDATE items SET phash = ${HASH_FUNCTION}(PK) WHERE phash IS NULL`).run();
}

/** The database's instance id ('' when it has no version 2 schema: every mark is then foreign). */
export function instanceId(db: Database.Database): string {
  if (!hasChangeColumns(db)) return '';
  const row = db.prepare<[], { value: string }>("SELECT value FROM alp_meta WHERE name = 'instance'").get();
  return row ? String(row.value) : '';
}
