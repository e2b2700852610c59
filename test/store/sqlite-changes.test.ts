/**
 * The SQLite engine's own side of segmented scans and change marks (store/sqlite/schema.ts, scans.ts,
 * changes.ts): the in-place migration of a version 1 file and of the interim version 2 (idempotent,
 * several processes at once), the change log (one row per write transaction, across connections;
 * nothing per item), reads that return exactly the changed items, and the conservative answers (a
 * foreign mark, a mark ahead of the log, an old read-only file). Pruning and the fallbacks:
 * sqlite-changelog.test.ts.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { StorageFailure } from '../../src/core/errors.ts';
import type { Item, ScanOptions } from '../../src/store/item-store.ts';
import { partitionHash } from '../../src/store/scan-options.ts';
import { CHANGE_SQL } from '../../src/store/sqlite/changes.ts';
import { SCAN_SQL } from '../../src/store/sqlite/scans.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { tempDir } from '../helpers/tmp.ts';
import { sweep } from './conformance-scans.ts';

const V1 = `
CREATE TABLE items (PK TEXT NOT NULL, SK TEXT NOT NULL, GSI1PK TEXT, GSI1SK TEXT, attrs TEXT NOT NULL, PRIMARY KEY (PK, SK)) WITHOUT ROWID;
CREATE INDEX GSI1 ON items (GSI1PK, GSI1SK, PK, SK) WHERE GSI1PK IS NOT NULL AND GSI1SK IS NOT NULL;
`;

/** A database as ALP wrote it before schema version 2: `count` items over a few partitions. */
function versionOneFile(count: number): string {
  const file = path.join(tempDir('alp-sqlite-v1'), 'alp.db');
  const db = new Database(file);
  db.exec(V1);
  const insert = db.prepare('INSERT INTO items (PK, SK, GSI1PK, GSI1SK, attrs) VALUES (?, ?, ?, ?, ?)');
  for (let i = 0; i < count; i++) insert.run(`P#${i % 7}`, `s${i}`, i % 2 ? 'G' : null, i % 2 ? `g${i}` : null, JSON.stringify({ i }));
  db.close();
  return file;
}

const ids = (items: Item[]) => items.map((i) => `${i.PK}/${i.SK}`).sort();
/** The change log's rows after the sentinel that starts it: [seq, the keys as 'PK/SK'] */
const logRows = (store: SqliteItemStore) =>
  (store.db.prepare('SELECT seq, keys FROM alp_changes WHERE n > 0 ORDER BY seq').all() as Array<{ seq: number; keys: string }>).map(
    (r) => [r.seq, (JSON.parse(r.keys) as string[][]).map(([pk, sk]) => `${pk}/${sk}`)] as const,
  );
const head = (store: SqliteItemStore) => store.db.prepare('SELECT max(seq) FROM alp_changes').pluck().get() as number;
const columns = (store: SqliteItemStore) => (store.db.pragma('table_info(items)') as Array<{ name: string }>).map((c) => c.name);
const indexes = (store: SqliteItemStore) =>
  store.db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'items' AND sql IS NOT NULL ORDER BY name")
    .pluck()
    .all();
const segmentsOf = async (read: (o: ScanOptions) => Promise<{ items: Item[]; cursor?: string }>, total: number) => {
  const out: Item[] = [];
  for (let segment = 0; segment < total; segment++) out.push(...(await sweep(read, { segment, totalSegments: total, limit: 3 })));
  return out;
};

/** A file of the interim schema version 2 (phash/wseq columns, both indexed, counter at `counter`). */
function versionTwoFile(counter: number): string {
  const file = versionOneFile(20);
  const db = new Database(file);
  db.exec(`ALTER TABLE items ADD COLUMN phash INTEGER; ALTER TABLE items ADD COLUMN wseq INTEGER;
    CREATE TABLE alp_meta (name TEXT PRIMARY KEY, value) WITHOUT ROWID;
    CREATE INDEX items_phash ON items (phash, PK, SK); CREATE INDEX items_wseq ON items (wseq) WHERE wseq IS NOT NULL;`);
  db.prepare("INSERT INTO alp_meta VALUES ('wseq', ?), ('instance', 'v2inst')").run(counter);
  db.prepare("UPDATE items SET wseq = ? WHERE SK = 's1'").run(counter);
  db.pragma('user_version = 2');
  db.close();
  return file;
}

describe('SQLite change marks and segments: schema and migration', () => {
  it('migrates a version 1 file in place on open: a change log, no per-item column or index, items unchanged; reopening changes nothing', async () => {
    const file = versionOneFile(40);
    const store = new SqliteItemStore(file);
    assert.equal(store.db.pragma('user_version', { simple: true }), 3);
    assert.deepEqual(columns(store), ['PK', 'SK', 'GSI1PK', 'GSI1SK', 'attrs']);
    assert.deepEqual(indexes(store), ['GSI1']);
    assert.deepEqual(store.db.prepare('SELECT seq, n, keys FROM alp_changes').all(), [{ seq: 1, n: 0, keys: '[]' }]);
    const all = await sweep((o) => store.scan(o));
    assert.deepEqual(all[1], { PK: 'P#0', SK: 's14', i: 14 });
    assert.deepEqual(ids(await segmentsOf((o) => store.scan(o), 5)), ids(all));
    const mark = await store.changeMark();
    assert.deepEqual(
      await sweep((o) => store.scanChangedSince(mark, o)),
      [],
      'rows from before the migration are not changed since a mark',
    );
    await store.update({ PK: 'P#3', SK: 's3' }, { add: { i: 100 } });
    assert.deepEqual(await sweep((o) => store.scanChangedSince(mark, o)), [{ PK: 'P#3', SK: 's3', GSI1PK: 'G', GSI1SK: 'g3', i: 103 }]);
    const instance = store.db.prepare("SELECT value FROM alp_meta WHERE name = 'instance'").get();
    await store.close();
    const again = new SqliteItemStore(file);
    assert.deepEqual(again.db.prepare("SELECT value FROM alp_meta WHERE name = 'instance'").get(), instance);
    assert.deepEqual(logRows(again), [[2, ['P#3/s3']]]);
    assert.deepEqual(
      await sweep((o) => again.scanChangedSince(mark, o)),
      [{ PK: 'P#3', SK: 's3', GSI1PK: 'G', GSI1SK: 'g3', i: 103 }],
      'a mark survives a reopen',
    );
    await again.close();
  });

  it('migrates the interim version 2: its indexes dropped, the log starts after its counter, its marks answered or conservative', async () => {
    const file = versionTwoFile(57);
    const store = new SqliteItemStore(file);
    assert.equal(store.db.pragma('user_version', { simple: true }), 3);
    assert.deepEqual(indexes(store), ['GSI1']);
    assert.deepEqual(store.db.prepare('SELECT name FROM alp_meta').pluck().all(), ['instance']);
    assert.equal(head(store), 58);
    const all = ids(await sweep((o) => store.scan(o)));
    assert.deepEqual(ids(await segmentsOf((o) => store.scan(o), 3)), all);
    await store.put({ PK: 'N', SK: 'after' });
    const v2mark = (n: number) => `sqlite:v2inst:${n}`;
    assert.deepEqual(ids(await sweep((o) => store.scanChangedSince(v2mark(57), o))), ['N/after'], 'a mark at the counter: only the log');
    assert.deepEqual(
      ids(await sweep((o) => store.scanChangedSince(v2mark(56), o))),
      [...all, 'N/after'].sort(),
      'a mark before it (wseq 57 is not in the log): every item',
    );
    assert.deepEqual((await store.get({ PK: 'N', SK: 'after' })) ?? null, { PK: 'N', SK: 'after' });
    await store.close();
    const again = new SqliteItemStore(file);
    assert.equal(head(again), 59, 'reopening migrates nothing again');
    await again.close();
  });

  it('several processes opening a version 1 file at once migrate it once, and each one’s write is logged', async () => {
    const file = versionOneFile(200);
    const script = `
      const { SqliteItemStore } = await import(${JSON.stringify(path.resolve('src/store/sqlite/sqlite-item-store.ts'))});
      const s = new SqliteItemStore(process.argv[1]);
      await s.put({ PK: 'W#' + process.argv[2], SK: 's' });
      await s.close();`;
    const run = (n: number) =>
      new Promise<number>((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, file, String(n)], {
          stdio: 'inherit',
        });
        child.on('error', reject);
        child.on('exit', (code) => resolve(code ?? 1));
      });
    assert.deepEqual(await Promise.all([1, 2, 3, 4].map(run)), [0, 0, 0, 0]);
    const store = new SqliteItemStore(file);
    assert.equal(store.db.prepare('SELECT count(*) AS n FROM alp_meta').pluck().get(), 1, 'one instance id');
    const rows = logRows(store);
    assert.deepEqual(
      rows.map(([seq]) => seq),
      [2, 3, 4, 5],
    );
    assert.deepEqual(rows.flatMap(([, keys]) => keys).sort(), ['W#1/s', 'W#2/s', 'W#3/s', 'W#4/s']);
    await store.close();
  });

  it('a read-only store of a version 1 file still scans segments (filtered in order) and answers change scans with every item', async () => {
    const file = versionOneFile(30);
    const ro = new SqliteItemStore(file, { readonly: true });
    const all = await sweep((o) => ro.scan(o));
    assert.equal(all.length, 30);
    assert.deepEqual(ids(await segmentsOf((o) => ro.scan(o), 4)), ids(all));
    const mark = await ro.changeMark();
    assert.deepEqual(ids(await sweep((o) => ro.scanChangedSince(mark, o))), ids(all));
    await assert.rejects(ro.put({ PK: 'x', SK: 'y' }), StorageFailure);
    await ro.close();
    const raw = new Database(file, { readonly: true });
    assert.equal(raw.pragma('user_version', { simple: true }), 0, 'a read-only store never migrates');
    raw.close();
  });
});

describe('SQLite change marks and segments: the change log', () => {
  it('one row per write transaction (batchPut and transactWrite too); deletes, failed conditions and rollbacks add none', async () => {
    const store = new SqliteItemStore(path.join(tempDir('alp-sqlite'), 'alp.db'));
    await store.batchPut(Array.from({ length: 50 }, (_, i) => ({ PK: `B#${i}`, SK: 's' })));
    await store.transactWrite([
      { op: 'put', item: { PK: 'T', SK: 'a' } },
      { op: 'update', key: { PK: 'T', SK: 'b' }, update: { set: { v: 1 } } },
      { op: 'delete', key: { PK: 'B#0', SK: 's' } },
    ]);
    await store.delete({ PK: 'B#1', SK: 's' });
    await store.transactWrite([{ op: 'delete', key: { PK: 'B#2', SK: 's' } }]);
    await assert.rejects(store.put({ PK: 'T', SK: 'a' }, { condition: { kind: 'notExists' } }));
    await assert.rejects(
      store.transactWrite([
        { op: 'put', item: { PK: 'T', SK: 'c' } },
        { op: 'check', key: { PK: 'T', SK: 'zz' }, condition: { kind: 'exists' } },
      ]),
    );
    const rows = logRows(store);
    assert.equal(rows.length, 2);
    assert.equal(rows[0]?.[1].length, 50);
    assert.deepEqual(rows[1], [3, ['T/a', 'T/b']]);
    await store.close();
  });

  it('marks and writes of two connections on one file: a mark sees every later write of the other', async () => {
    const file = path.join(tempDir('alp-sqlite'), 'alp.db');
    const a = new SqliteItemStore(file);
    const b = new SqliteItemStore(file);
    await a.put({ PK: 'x', SK: '1' });
    const mark = await b.changeMark();
    await a.put({ PK: 'x', SK: '2' });
    await b.put({ PK: 'x', SK: '3' });
    await a.update({ PK: 'x', SK: '1' }, { set: { again: true } });
    assert.deepEqual(ids(await sweep((o) => b.scanChangedSince(mark, o))), ['x/1', 'x/2', 'x/3']);
    assert.deepEqual(ids(await sweep((o) => a.scanChangedSince(mark, o))), ['x/1', 'x/2', 'x/3']);
    await a.close();
    await b.close();
  });

  it('answers exactly the items written after the mark, once each, as they are now (deleted ones skipped); the log is read by seq range', async () => {
    const store = new SqliteItemStore(path.join(tempDir('alp-sqlite'), 'alp.db'));
    await store.batchPut(Array.from({ length: 500 }, (_, i) => ({ PK: `O#${i % 50}`, SK: `s${i}`, old: true })));
    const mark = await store.changeMark();
    const changed = Array.from({ length: 30 }, (_, i) => ({ PK: `O#${(i * 7) % 50}`, SK: `s${i * 13}`, fresh: i }));
    for (const item of changed) await store.put(item);
    for (const item of changed.slice(0, 10)) await store.update(item, { add: { fresh: 1000 } });
    await store.put({ PK: 'gone', SK: 's' });
    await store.delete({ PK: 'gone', SK: 's' });
    const got = await sweep((o) => store.scanChangedSince(mark, o), { limit: 4 });
    assert.deepEqual(ids(got), ids(changed));
    for (const item of got) assert.deepEqual(Object.keys(item).sort(), ['PK', 'SK', 'fresh']);
    for (const item of got) assert.deepEqual(item, await store.get(item));
    assert.deepEqual(ids(await segmentsOf((o) => store.scanChangedSince(mark, o), 3)), ids(changed));
    const plan = (sql: string, ...params: unknown[]) => JSON.stringify(store.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params));
    for (const ddl of CHANGE_SQL.create('plan_check')) store.db.exec(ddl);
    assert.match(
      plan(CHANGE_SQL.collect('plan_check'), 1),
      /SEARCH c USING INTEGER PRIMARY KEY \(rowid>\?\)/,
      'the log rows after the mark, by seq',
    );
    for (const sql of [CHANGE_SQL.page('plan_check', false), CHANGE_SQL.page('plan_check', true)]) {
      const p = plan(sql, ...Array(sql.split('?').length - 1).fill(1));
      assert.match(p, /SEARCH k USING (COVERING )?INDEX plan_check_w \(\(W,kp,ks\)>\(\?,\?,\?\)\)/, 'the set from the cursor on, in order');
      assert.match(p, /SEARCH i USING PRIMARY KEY \(PK=\? AND SK=\?\)/, 'each key’s item by its key');
      assert.doesNotMatch(p, /SCAN i\b|SCAN items|TEMP B-TREE/);
    }
    assert.match(plan(CHANGE_SQL.keysAfter, 1), /SEARCH alp_changes USING INTEGER PRIMARY KEY \(rowid>\?\)/);
    for (const sql of [CHANGE_SQL.oldest, CHANGE_SQL.newest]) assert.doesNotMatch(plan(sql), /SCAN/, 'a mark reads one end of the log');
    assert.match(plan(SCAN_SQL.segNext, 'a', 'b', 0, 9, 5), /SEARCH items USING PRIMARY KEY \(\(PK,SK\)>\(\?,\?\)\)/);
    for (const sql of Object.values(SCAN_SQL)) assert.doesNotMatch(plan(sql, ...Array(sql.split('?').length - 1).fill(0)), /TEMP B-TREE/);
    await store.close();
  });

  it('a mark of another database is answered with every item (conservative); a snapshot copy scans segments', async () => {
    const one = new SqliteItemStore(path.join(tempDir('alp-sqlite'), 'alp.db'));
    const two = new SqliteItemStore(path.join(tempDir('alp-sqlite'), 'alp.db'));
    await two.batchPut(Array.from({ length: 12 }, (_, i) => ({ PK: `Q#${i}`, SK: 's' })));
    const foreign = await one.changeMark();
    assert.equal((await sweep((o) => two.scanChangedSince(foreign, o))).length, 12);
    const snapshot = await two.snapshot();
    try {
      assert.deepEqual(ids(await segmentsOf((o) => snapshot.scan(o), 3)), ids(await sweep((o) => two.scan(o))));
    } finally {
      await snapshot.close();
    }
    await one.close();
    await two.close();
  });

  it('a mark ahead of the log (the file was replaced by an older copy of itself) is answered with every item', async () => {
    const file = path.join(tempDir('alp-sqlite'), 'alp.db');
    const first = new SqliteItemStore(file);
    await first.batchPut([{ PK: 'C', SK: '1' }]);
    await first.close();
    fs.copyFileSync(file, `${file}.old`);
    const later = new SqliteItemStore(file);
    for (let i = 2; i <= 5; i++) await later.put({ PK: 'C', SK: String(i) });
    const mark = await later.changeMark();
    await later.close();
    fs.renameSync(`${file}.old`, file);
    const older = new SqliteItemStore(file);
    await older.put({ PK: 'C', SK: 'after' });
    assert.deepEqual(ids(await sweep((o) => older.scanChangedSince(mark, o))), ['C/1', 'C/after']);
    await older.close();
  });
});

describe('SQLite change marks and segments: the partition hash', () => {
  it('is stable (stored in every row: these values must never change) and spreads keys evenly', () => {
    assert.deepEqual(
      ['', 'ART#01JABCDEFGHJKMNPQRSTVWXYZ', 'SYS#installation', 'REFIDX#r#3', 'ünï©ødé'].map(partitionHash),
      [2872998923, 3501090291, 3905486733, 2943597016, 2231039830],
    );
    const buckets = new Array(16).fill(0);
    for (let i = 0; i < 16_000; i++) buckets[Math.floor((partitionHash(`ART#${i}`) * 16) / 2 ** 32)]++;
    for (const b of buckets) assert.ok(b > 850 && b < 1150, `bucket of ${b} (1000 expected)`);
  });
});
