/**
 * What a listing page costs on SQLite (issue 18, list by state): the statements the store runs for a
 * GSI1 page — the first page and the page after a cursor, both directions — read the index as one
 * range from the page's start (GSI1PK = ? and the cursor's row-value bound) in index order: no sort
 * (TEMP B-TREE) and no scan, so a page costs its rows whatever the size of the partition or table.
 * The statements are captured as the store prepares them, so this follows the engine's query builder.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import type { Item, QueryInput } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { tempDir } from '../helpers/tmp.ts';

/** The SQL of every statement prepared (on any connection) while `fn` runs. */
async function preparedDuring(fn: () => Promise<unknown>): Promise<string[]> {
  const proto = Database.prototype as unknown as { prepare: (sql: string) => unknown };
  const original = proto.prepare;
  const seen: string[] = [];
  proto.prepare = function (this: unknown, sql: string) {
    seen.push(sql);
    return original.call(this, sql);
  };
  try {
    await fn();
  } finally {
    proto.prepare = original;
  }
  return seen;
}

describe('SQLite listing pages read one index range', () => {
  it('first and cursor pages of a GSI1 partition, ascending and descending: SEARCH on GSI1, no sort, no scan', async () => {
    const store = new SqliteItemStore(path.join(tempDir('alp-listing-plan'), 'alp.db'));
    try {
      const items: Item[] = Array.from({ length: 30 }, (_, i) => ({
        PK: `ART#${String(i).padStart(3, '0')}`,
        SK: 'V#1',
        GSI1PK: i % 3 ? 'STATE#EXECUTED' : 'STATE#DRAFT',
        GSI1SK: `#2026-01-01T00:00:${String(i).padStart(2, '0')}Z#${i}`,
      }));
      await store.batchPut(items);
      const sqls = new Set<string>();
      for (const descending of [true, false]) {
        const q: QueryInput = { index: 'GSI1', pk: 'STATE#EXECUTED', descending, limit: 5 };
        let cursor: string | undefined;
        const seen: string[] = [];
        for (const sql of await preparedDuring(async () => {
          do {
            const page = await store.query({ ...q, ...(cursor ? { cursor } : {}) });
            seen.push(...page.items.map((i) => i.PK));
            cursor = page.cursor;
          } while (cursor);
        }))
          if (/INDEXED BY GSI1|GSI1PK\s*=/.test(sql)) sqls.add(sql);
        assert.equal(seen.length, 20, 'every item of the partition, once');
        assert.deepEqual(
          seen,
          [...seen].sort((a, b) => (descending ? b.localeCompare(a) : a.localeCompare(b))),
        );
      }
      assert.ok(sqls.size >= 2, `a first-page and a cursor statement were prepared: ${[...sqls].join(' | ')}`);
      for (const sql of sqls) {
        const params = Array(sql.split('?').length - 1).fill('x');
        const plan = JSON.stringify(store.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params));
        assert.match(plan, /SEARCH items USING (COVERING )?INDEX GSI1 \(GSI1PK=\?/, `${sql}: ${plan}`);
        assert.doesNotMatch(plan, /TEMP B-TREE|SCAN items/, `${sql}: ${plan}`);
      }
    } finally {
      await store.close();
    }
  });
});
