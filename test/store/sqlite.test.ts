import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { tempDir } from '../helpers/tmp.ts';
import { type ItemStoreHarness, itemStoreConformance } from './conformance.ts';
import { scanConformance } from './conformance-scans.ts';

const harness: ItemStoreHarness = {
  name: 'sqlite',
  runs: 60,
  open: async () => {
    const dir = tempDir('alp-sqlite');
    return new SqliteItemStore(path.join(dir, 'alp.db'));
  },
  readOnly: async () => {
    const file = path.join(tempDir('alp-sqlite'), 'alp.db');
    await new SqliteItemStore(file).close();
    return new SqliteItemStore(file, { readonly: true });
  },
};
itemStoreConformance(harness);
scanConformance(harness);

describe('SQLite engine specifics', () => {
  it('stores items in one table whose key columns carry the DESIGN names, in WAL mode with synchronous=FULL', async () => {
    const dir = tempDir('alp-sqlite');
    const file = path.join(dir, 'alp.db');
    const store = new SqliteItemStore(file);
    await store.put({ PK: 'ART#x', SK: 'V#0000000001', GSI1PK: 'STATE#DRAFT', GSI1SK: '#t#x', state: 'DRAFT' });
    assert.equal(store.db.pragma('journal_mode', { simple: true }), 'wal');
    assert.equal(store.db.pragma('synchronous', { simple: true }), 2);
    await store.close();
    const raw = new Database(file, { readonly: true });
    const row = raw.prepare('SELECT PK, SK, GSI1PK, GSI1SK, attrs FROM items').get() as Record<string, string>;
    raw.close();
    assert.deepEqual(row, { PK: 'ART#x', SK: 'V#0000000001', GSI1PK: 'STATE#DRAFT', GSI1SK: '#t#x', attrs: '{"state":"DRAFT"}' });
  });

  it('a second connection sees committed writes and conditions hold across connections', async () => {
    const dir = tempDir('alp-sqlite');
    const file = path.join(dir, 'alp.db');
    const a = new SqliteItemStore(file);
    const b = new SqliteItemStore(file);
    await a.put({ PK: 'p', SK: 's', v: 1 }, { condition: { kind: 'notExists' } });
    await assert.rejects(b.put({ PK: 'p', SK: 's', v: 2 }, { condition: { kind: 'notExists' } }));
    assert.equal((await b.get({ PK: 'p', SK: 's' }))?.v, 1);
    await a.close();
    await b.close();
  });
});
