/**
 * The SQLite engine's schema and its in-place migration.
 *
 * Version 1 (user_version 0): `items` (PK, SK, GSI1PK, GSI1SK, attrs) and the partial index GSI1.
 * Version 3 adds the bookkeeping of change marks (item-store.ts changeMark / scanChangedSince) beside
 * the items, never in them, and nothing per item:
 * - `alp_changes(seq INTEGER PRIMARY KEY, at, n, keys)`: an append-only change log, one row per write
 *   transaction that put or updated anything — `keys` the JSON array of the [PK, SK] it wrote, `n` their
 *   number, `at` the time (ms) — appended in the same transaction (a rolled-back one adds nothing). The
 *   rowid is max + 1 under SQLite's write lock, across processes too; rows are pruned only from the
 *   left and the newest row is always kept, so the log is always one contiguous range of seq and a
 *   mark m is answerable exactly when m ≥ min(seq) − 1 (sqlite/changes.ts). It is never empty: a
 *   first row without keys starts it.
 * - `alp_meta('instance')`: a random id of this database, part of every mark, so a mark of another
 *   database (a replaced or restored file) is answered conservatively with every item.
 * Segments need no column: membership is the partition hash computed as the table is read (scans.ts).
 * Version 2 (an interim layout of this release, never shipped: per-row `phash` and `wseq` columns,
 * each indexed, and a counter row `alp_meta('wseq')`) migrates by dropping both indexes (the columns
 * stay, unused) and starting the log after the counter, so a mark of version 2 either is answered by
 * the log (nothing it missed) or falls before it (every item). Version 1 goes straight to version 3.
 * The migration runs on open (never on a read-only store), in one IMMEDIATE transaction that checks
 * the version again under the write lock: idempotent, safe with several processes opening at once.
 */
import type Database from 'better-sqlite3';
import { randomToken } from '../../core/ids.ts';
import { partitionHash } from '../scan-options.ts';

export const SCHEMA_VERSION = 3;

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

const V3_SCHEMA = `
CREATE TABLE IF NOT EXISTS alp_meta (name TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS alp_changes (seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, n INTEGER NOT NULL, keys TEXT NOT NULL);
DROP INDEX IF EXISTS items_phash;
DROP INDEX IF EXISTS items_wseq;
`;

/**
 * The SQL function `alp_in_hash_range(PK, lo, hi)`: whether partitionHash(PK) (store/scan-options.ts)
 * lies in [lo, hi), i.e. the row is in that segment; registered on every connection.
 */
export const HASH_FUNCTION = 'alp_in_hash_range';

/** Whether the database has version 3's change log (a read-only store of an older file may not). */
export function hasChangeLog(db: Database.Database): boolean {
  return (db.pragma('user_version', { simple: true }) as number) >= SCHEMA_VERSION;
}

/** Registers the segment test as a deterministic SQL function (read-only connections too). */
export function registerFunctions(db: Database.Database): void {
  db.function(HASH_FUNCTION, { deterministic: true }, (pk: unknown, lo: unknown, hi: unknown) => {
    const h = partitionHash(String(pk));
    return h >= Number(lo) && h < Number(hi) ? 1 : 0;
  });
}

/** Creates or migrates the schema of a writable database. */
export function prepareSchema(db: Database.Database): void {
  db.exec(BASE_SCHEMA);
  if (!hasChangeLog(db)) db.transaction(() => migrateToV3(db)).immediate();
}

function migrateToV3(db: Database.Database): void {
  if (hasChangeLog(db)) return; // another process migrated it while this one waited for the lock
  const hadMeta = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alp_meta'").get() !== undefined;
  db.exec(V3_SCHEMA);
  const counter = hadMeta ? (db.prepare<[], { value: number }>("SELECT value FROM alp_meta WHERE name = 'wseq'").get()?.value ?? 0) : 0;
  db.prepare("INSERT OR IGNORE INTO alp_meta (name, value) VALUES ('instance', ?)").run(randomToken(12));
  db.prepare("DELETE FROM alp_meta WHERE name = 'wseq'").run();
  // The log starts after version 2's counter: its marks (≤ counter) stay answerable or fall before it.
  if (db.prepare('SELECT 1 FROM alp_changes LIMIT 1').get() === undefined) {
    db.prepare("INSERT INTO alp_changes (seq, at, n, keys) VALUES (?, 0, 0, '[]')").run(Number(counter) + 1);
  }
  db.pragma(`user_version = ${SCHEMA_VERSION}`);
}

/** The database's instance id ('' when it has no version 3 schema: every mark is then foreign). */
export function instanceId(db: Database.Database): string {
  if (!hasChangeLog(db)) return '';
  const row = db.prepare<[], { value: string }>("SELECT value FROM alp_meta WHERE name = 'instance'").get();
  return row ? String(row.value) : '';
}
