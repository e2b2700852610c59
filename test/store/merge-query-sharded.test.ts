/**
 * store/merge-query.ts on both engines (SQLite and a real DynamoDB Local): a listing over the index
 * shards of one logical partition gives the single partition's order and pages, behind a composite
 * cursor that is validated. The property: for any items spread over n shards and any page size, the
 * merged pages concatenated equal the single-partition order (and its pages).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { InvalidInput } from '../../src/core/errors.ts';
import { type Item, type ItemStore, type Page, queryAll } from '../../src/store/item-store.ts';
import { queryAllMerged, queryMerged } from '../../src/store/merge-query.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { freshDynamoTable, stopSharedDynamoLocal } from '../helpers/dynamodb-local.ts';
import { tempDir } from '../helpers/tmp.ts';

after(() => stopSharedDynamoLocal());

/**
 * `ties`: whether entries may share a GSI1SK. SQLite orders equal GSI1SKs by (PK, SK); DynamoDB leaves
 * the order of equal index sort keys unspecified (DynamoDB Local varies it between partitions), so there
 * a reference partition could differ from a shard for reasons that are not the merge's: no ties.
 */
const engines: Array<{ name: string; open: () => Promise<ItemStore>; runs: number; ties: boolean }> = [
  { name: 'sqlite', open: async () => new SqliteItemStore(path.join(tempDir('merge'), 'alp.db')), runs: 60, ties: true },
  { name: 'dynamodb', open: () => freshDynamoTable('merge'), runs: 15, ties: false },
];

interface Spec {
  /** Which artifact (0–7): it decides the shard, as in the lifecycle (every entry of one artifact in one shard). */
  a: number;
  /** Event time: equal times of one artifact tie on GSI1SK (several entries of one commit). */
  t: number;
}

let run = 0;

/** Writes every spec twice: into one partition (the reference) and into n shard partitions. */
async function load(store: ItemStore, specs: Spec[], n: number, ties = true): Promise<{ single: string; shards: string[] }> {
  const p = `m${run++}-${Math.random().toString(36).slice(2, 8)}`;
  const single = `${p}#single`;
  const shards = Array.from({ length: n }, (_, s) => `${p}#shard#${s}`);
  const items: Item[] = [];
  specs.forEach((x, i) => {
    const sk = `#${String(x.t).padStart(4, '0')}#a${x.a}${ties ? '' : `#${i}`}`;
    const entry = { SK: `E#${String(i).padStart(4, '0')}`, GSI1SK: sk, payload: `${x.a}/${i}` };
    items.push({ PK: `${p}#S#ART#a${x.a}`, GSI1PK: single, ...entry });
    items.push({ PK: `${p}#M#ART#a${x.a}`, GSI1PK: shards[x.a % n] as string, ...entry });
  });
  for (let i = 0; i < items.length; i += 25) await store.batchPut(items.slice(i, i + 25));
  return { single, shards };
}

async function pagesOf(next: (cursor: string | undefined) => Promise<Page>): Promise<string[][]> {
  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const page = await next(cursor);
    pages.push(page.items.map((i) => i.payload as string));
    cursor = page.cursor;
    assert.ok(pages.length < 1000, 'paging must end');
  } while (cursor);
  return pages;
}

for (const engine of engines) {
  describe(`merged query over index shards (${engine.name})`, () => {
    let store: ItemStore | undefined;
    const open = async () => {
      store ??= await engine.open();
      return store;
    };
    after(async () => {
      if (engine.name === 'sqlite') await store?.close();
    });

    it('property: the merged pages are the single partition’s pages, for any spread, page size and order', async () => {
      const items = await open();
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.record({ a: fc.integer({ min: 0, max: 7 }), t: fc.integer({ min: 0, max: 12 }) }), { maxLength: 40 }),
          fc.constantFrom(2, 3, 8),
          fc.integer({ min: 1, max: 7 }),
          fc.boolean(),
          async (specs, n, limit, descending) => {
            const { single, shards } = await load(items, specs, n, engine.ties);
            const expected = await pagesOf((cursor) =>
              items.query({ index: 'GSI1', pk: single, limit, descending, ...(cursor ? { cursor } : {}) }),
            );
            const merged = await pagesOf((cursor) => queryMerged(items, { index: 'GSI1', pks: shards, limit, descending, cursor }));
            assert.deepEqual(merged, expected);
            const all = (await queryAllMerged(items, { index: 'GSI1', pks: shards, descending })).map((i) => i.payload);
            assert.deepEqual(all, expected.flat());
          },
        ),
        { numRuns: engine.runs },
      );
    });

    it('one partition is the engine’s own query: same page, same cursor', async () => {
      const items = await open();
      const { single } = await load(
        items,
        [
          { a: 1, t: 1 },
          { a: 2, t: 2 },
          { a: 3, t: 3 },
        ],
        2,
      );
      const direct = await items.query({ index: 'GSI1', pk: single, limit: 2 });
      const merged = await queryMerged(items, { index: 'GSI1', pks: [single], limit: 2 });
      assert.deepEqual(merged, direct);
    });

    it('a cursor resumes with another page size; a cursor of another query or a forged one is InvalidInput', async () => {
      const items = await open();
      const specs = Array.from({ length: 12 }, (_, i) => ({ a: i % 5, t: i }));
      const { single, shards } = await load(items, specs, 3);
      const want = (await queryAll(items, { index: 'GSI1', pk: single })).map((i) => i.payload);
      const first = await queryMerged(items, { index: 'GSI1', pks: shards, limit: 5 });
      const rest = await queryMerged(items, { index: 'GSI1', pks: shards, limit: 100, cursor: first.cursor });
      assert.deepEqual(
        [...first.items, ...rest.items].map((i) => i.payload),
        want,
      );
      assert.equal(rest.cursor, undefined);
      const cursor = first.cursor as string;
      const forged = Buffer.from(JSON.stringify({ v: 1, q: 'x', s: [null, null, null] })).toString('base64url');
      const bad = [
        () => queryMerged(items, { index: 'GSI1', pks: shards, limit: 5, cursor: 'not-a-cursor' }),
        () => queryMerged(items, { index: 'GSI1', pks: shards, limit: 5, descending: true, cursor }),
        () => queryMerged(items, { index: 'GSI1', pks: shards.slice(0, 2), limit: 5, cursor }),
        () => queryMerged(items, { index: 'GSI1', pks: shards, limit: 5, cursor: forged }),
      ];
      for (const call of bad) await assert.rejects(call, InvalidInput);
    });

    it('base-table partitions merge by SK (consistent reads: the retention observation shards)', async () => {
      const items = await open();
      const p = `base${run++}-${Math.random().toString(36).slice(2, 8)}`;
      const keys = ['OBS#c', 'OBS#a', 'OBS#e', 'OBS#b', 'OBS#d', 'RUN#x'];
      await items.batchPut(keys.map((sk, i) => ({ PK: `${p}#${i % 3}`, SK: sk })));
      const pks = [0, 1, 2].map((s) => `${p}#${s}`);
      const page = await queryMerged(items, { pks, sk: { beginsWith: 'OBS#' }, consistent: true, limit: 3 });
      const rest = await queryMerged(items, { pks, sk: { beginsWith: 'OBS#' }, consistent: true, limit: 3, cursor: page.cursor });
      assert.deepEqual(
        [...page.items, ...rest.items].map((i) => i.SK),
        ['OBS#a', 'OBS#b', 'OBS#c', 'OBS#d', 'OBS#e'],
      );
      assert.equal(rest.cursor, undefined);
    });
  });
}
