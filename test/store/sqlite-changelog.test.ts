/**
 * The SQLite change log's horizon and fallbacks (store/sqlite/changes.ts): pruning by count and by age
 * (injected clock) keeps a contiguous suffix and always the newest row; a mark before the kept rows,
 * or followed by more changes than a change scan groups, is answered with the whole table and then the
 * changes since the scan began; a key written again mid-scan comes again; and, as a property over
 * random writes, prunes and page sizes, every item written after the mark is in the pages as it is now.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Item, ScanOptions } from '../../src/store/item-store.ts';
import type { ChangeLogOptions } from '../../src/store/sqlite/changes.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { tempDir } from '../helpers/tmp.ts';
import { sweep } from './conformance-scans.ts';

const open = (changeLog: ChangeLogOptions) => new SqliteItemStore(path.join(tempDir('alp-changelog'), 'alp.db'), { changeLog });
const ids = (items: Item[]) => items.map((i) => `${i.PK}/${i.SK}`).sort();
const bounds = (s: SqliteItemStore) =>
  s.db.prepare('SELECT min(seq) AS lo, max(seq) AS hi, count(*) AS n FROM alp_changes').get() as { lo: number; hi: number; n: number };

/** Every page of a change scan, duplicates allowed (a key written again mid-scan comes again). */
async function pages(store: SqliteItemStore, mark: string, opts: ScanOptions, between?: (page: number) => Promise<void>): Promise<Item[]> {
  const out: Item[] = [];
  let cursor: string | undefined;
  let n = 0;
  do {
    const page = await store.scanChangedSince(mark, cursor ? { ...opts, cursor } : opts);
    out.push(...page.items);
    cursor = page.cursor;
    if (between) await between(n);
    assert.ok(++n < 10_000, 'pagination does not terminate');
  } while (cursor);
  return out;
}

describe('SQLite change log: pruning', () => {
  it('by count: a contiguous suffix of bounded length; a mark before it gets every item, a mark inside it exactly the changes', async () => {
    const store = open({ keepRows: 10, pruneEvery: 4, pruneBatch: 8 });
    const early = await store.changeMark();
    for (let i = 0; i < 60; i++) await store.put({ PK: `P#${i % 9}`, SK: `s${i}` });
    const b = bounds(store);
    assert.equal(b.hi - b.lo + 1, b.n, 'contiguous');
    assert.ok(b.n <= 14, `${b.n} rows kept`);
    assert.deepEqual(ids(await sweep((o) => store.scanChangedSince(early, o))), ids(await sweep((o) => store.scan(o))));
    const recent = await store.changeMark();
    await store.put({ PK: 'late', SK: '1' });
    await store.update({ PK: 'P#0', SK: 's0' }, { set: { v: 1 } });
    assert.deepEqual(ids(await sweep((o) => store.scanChangedSince(recent, o))), ['P#0/s0', 'late/1']);
    await store.close();
  });

  it('by age (injected clock), never the newest row', async () => {
    let now = 1_000_000;
    const store = open({ keepMs: 1000, pruneEvery: 1, now: () => now });
    for (let i = 0; i < 5; i++) await store.put({ PK: 'A', SK: `${i}` });
    assert.deepEqual(bounds(store), { lo: 2, hi: 6, n: 5 }, 'the first row (at 0) pruned, the five writes young');
    const mark = await store.changeMark();
    now += 5000;
    await store.put({ PK: 'B', SK: 'x' });
    // This write's prune saw every older row aged out: only the newest row (this write) is left.
    assert.deepEqual(bounds(store), { lo: 7, hi: 7, n: 1 });
    assert.deepEqual(ids(await sweep((o) => store.scanChangedSince(mark, o))), ['B/x'], 'the mark is just before the kept row');
    const older = (await store.changeMark()).replace(/:\d+$/, ':3');
    assert.deepEqual(
      ids(await sweep((o) => store.scanChangedSince(older, o))),
      ['A/0', 'A/1', 'A/2', 'A/3', 'A/4', 'B/x'],
      'pruned: every item',
    );
    await store.close();
  });
});

describe('SQLite change log: fallbacks and writes during the pages', () => {
  it('more changes than a scan groups: the whole table (segments too), then the writes made while it was read', async () => {
    const store = open({ maxChangedKeys: 5 });
    await store.batchPut(Array.from({ length: 12 }, (_, i) => ({ PK: `old#${i}`, SK: 's' })));
    const mark = await store.changeMark();
    for (let i = 0; i < 8; i++) await store.put({ PK: `new#${i}`, SK: 's' });
    const table = ids(await sweep((o) => store.scan(o)));
    assert.deepEqual(ids(await sweep((o) => store.scanChangedSince(mark, o), { limit: 5 })), table);
    const union: Item[] = [];
    for (let segment = 0; segment < 3; segment++)
      union.push(...(await sweep((o) => store.scanChangedSince(mark, o), { segment, totalSegments: 3, limit: 2 })));
    assert.deepEqual(ids(union), table);
    // A key the full pass has already passed, written while the pages are read, comes again at the end.
    const got = await pages(store, mark, { limit: 4 }, async (n) => {
      if (n === 1) await store.put({ PK: 'new#0', SK: 's', again: true });
    });
    assert.deepEqual(got.at(-1), { PK: 'new#0', SK: 's', again: true });
    await store.close();
  });

  it('60,000 keys changed since the mark (more than one scan used to group) are answered from the log, each once', async () => {
    const store = open({});
    await store.batchPut(Array.from({ length: 500 }, (_, i) => ({ PK: `OLD#${i % 10}`, SK: `s${i}` })));
    const mark = await store.changeMark();
    for (let b = 0; b < 60; b++) {
      await store.batchPut(Array.from({ length: 1000 }, (_, i) => ({ PK: `NEW#${i % 97}`, SK: `s${b * 1000 + i}`, b })));
    }
    assert.equal(await store.changesAnswerable(mark), true);
    const got = await pages(store, mark, { limit: 1000 });
    assert.equal(got.length, 60_000);
    assert.equal(new Set(ids(got)).size, 60_000, 'each key once');
    assert.ok(
      got.every((i) => i.PK.startsWith('NEW#')),
      'nothing written before the mark',
    );
    await store.close();
  });

  it('two change scans of different marks interleaved, and a cursor carried to a second store on the file, each see exactly their changes', async () => {
    const file = path.join(tempDir('alp-changelog'), 'alp.db');
    const a = new SqliteItemStore(file);
    const m1 = await a.changeMark();
    for (let i = 0; i < 6; i++) await a.put({ PK: 'A', SK: `s${i}` });
    const m2 = await a.changeMark();
    for (let i = 0; i < 4; i++) await a.put({ PK: 'B', SK: `s${i}` });
    const first1 = await a.scanChangedSince(m1, { limit: 3 });
    const all2 = await pages(a, m2, { limit: 2 });
    const b = new SqliteItemStore(file);
    const rest1 = await pages(b, m1, { limit: 3, cursor: first1.cursor as string });
    assert.deepEqual(
      ids([...first1.items, ...rest1]),
      ids([
        ...Array.from({ length: 6 }, (_, i) => ({ PK: 'A', SK: `s${i}` })),
        ...Array.from({ length: 4 }, (_, i) => ({ PK: 'B', SK: `s${i}` })),
      ]),
    );
    assert.deepEqual(ids(all2), ['B/s0', 'B/s1', 'B/s2', 'B/s3']);
    await a.close();
    await b.close();
  });

  it('the log pruned past the cursor while the pages are read: the rest is the whole table, then the changes', async () => {
    const store = open({ keepRows: 3, pruneEvery: 1 });
    const mark = await store.changeMark();
    for (let i = 0; i < 3; i++) await store.put({ PK: `M#${i}`, SK: 's' });
    const got = await pages(store, mark, { limit: 1 }, async (n) => {
      if (n === 0) for (let i = 0; i < 6; i++) await store.put({ PK: `L#${i}`, SK: 's' });
    });
    const table = ids(await sweep((o) => store.scan(o)));
    assert.deepEqual([...new Set(ids(got))].sort(), table, 'every item written after the mark, and the rest of the table');
    await store.close();
  });

  it('a key written again after the cursor passed it comes again, as it is now', async () => {
    const store = open({});
    const mark = await store.changeMark();
    for (const sk of ['a', 'b', 'c']) await store.put({ PK: 'K', SK: sk, v: 1 });
    const got = await pages(store, mark, { limit: 1 }, async (n) => {
      if (n === 0) await store.update({ PK: 'K', SK: 'a' }, { set: { v: 2 } });
    });
    assert.deepEqual(
      got.map((i) => `${i.SK}${i.v}`),
      ['a1', 'b1', 'c1', 'a2'],
    );
    await store.close();
  });
});

type Op = { kind: 'put' | 'update' | 'delete' | 'tx'; k: number; k2: number };
const opArb: fc.Arbitrary<Op> = fc.record({ kind: fc.constantFrom('put', 'update', 'delete', 'tx'), k: fc.nat(11), k2: fc.nat(11) });

async function apply(store: SqliteItemStore, op: Op, n: number): Promise<string[]> {
  const key = (k: number) => ({ PK: `P#${k % 4}`, SK: `s${k}` });
  if (op.kind === 'put') await store.put({ ...key(op.k), n });
  else if (op.kind === 'update') await store.update(key(op.k), { set: { n } });
  else if (op.kind === 'delete') await store.delete(key(op.k));
  else if (op.k !== op.k2) {
    await store.transactWrite([
      { op: 'put', item: { ...key(op.k), n } },
      { op: 'delete', key: key(op.k2) },
    ]);
    return [`P#${op.k % 4}/s${op.k}`];
  }
  return op.kind === 'put' || op.kind === 'update' ? [`P#${op.k % 4}/s${op.k}`] : [];
}

describe('SQLite change log: property', () => {
  it('every item put or updated after the mark is in the pages as it is now; nothing absent is returned', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { maxLength: 25 }),
        fc.array(opArb, { maxLength: 25 }),
        fc.record({
          keepRows: fc.integer({ min: 1, max: 30 }),
          pruneEvery: fc.integer({ min: 1, max: 5 }),
          maxChangedKeys: fc.integer({ min: 1, max: 40 }),
        }),
        fc.integer({ min: 1, max: 6 }),
        fc.constantFrom(undefined, 2, 3),
        async (before, after, changeLog, limit, total) => {
          const store = open({ ...changeLog, pruneBatch: 4 });
          try {
            let n = 0;
            for (const op of before) await apply(store, op, n++);
            const mark = await store.changeMark();
            const written = new Set<string>();
            for (const op of after) for (const k of await apply(store, op, n++)) written.add(k);
            const got: Item[] = [];
            for (let segment = 0; segment < (total ?? 1); segment++) {
              got.push(
                ...(await sweep((o) => store.scanChangedSince(mark, o), total ? { segment, totalSegments: total, limit } : { limit })),
              );
            }
            for (const item of got) assert.deepEqual(item, await store.get(item), 'as it is now');
            const present = new Set(ids(await sweep((o) => store.scan(o))));
            const returned = new Set(ids(got));
            for (const k of written) if (present.has(k)) assert.ok(returned.has(k), `${k} written after the mark is missing`);
          } finally {
            await store.close();
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});
