/**
 * The ItemStore contract of segmented scans and change marks (item-store.ts ScanOptions, changeMark,
 * scanChangedSince) as tests, run by every engine (test/store/*.test.ts pass their harness). The
 * suite works on a store of its own (a fresh table), so a whole-table sweep reads only its own items.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { InvalidInput } from '../../src/core/errors.ts';
import type { Item, ItemStore, Page, ScanOptions, TransactOp } from '../../src/store/item-store.ts';
import type { ItemStoreHarness } from './conformance.ts';

const id = (i: { PK: string; SK: string }) => `${i.PK}/${i.SK}`;

/** Every page of one scan (or change scan), following cursors; asserts no item comes twice. */
export async function sweep(read: (o: ScanOptions) => Promise<Page>, opts: ScanOptions = {}): Promise<Item[]> {
  const out: Item[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await read(cursor ? { ...opts, cursor } : opts);
    for (const item of page.items) {
      assert.ok(!seen.has(id(item)), `${id(item)} came twice in one scan`);
      seen.add(id(item));
      out.push(item);
    }
    cursor = page.cursor;
    assert.ok(++pages < 100_000, 'pagination does not terminate');
  } while (cursor);
  return out;
}

/**
 * Every segment of `total`, checking the segments are disjoint and that one partition lies in one
 * segment (DynamoDB's rule, and the SQLite hash's); answers their union.
 */
async function allSegments(store: ItemStore, total: number, limit: number, prefix: string, mark?: string): Promise<Item[]> {
  const owner = new Map<string, number>();
  const partition = new Map<string, number>();
  const union: Item[] = [];
  for (let segment = 0; segment < total; segment++) {
    const read = (o: ScanOptions) => (mark === undefined ? store.scan(o) : store.scanChangedSince(mark, o));
    for (const item of await sweep(read, { segment, totalSegments: total, limit })) {
      if (!item.PK.startsWith(prefix)) continue;
      const other = owner.get(id(item));
      assert.equal(other, undefined, `${id(item)} is in segments ${other} and ${segment} of ${total}`);
      assert.equal(partition.get(item.PK) ?? segment, segment, `partition ${item.PK} spans segments`);
      owner.set(id(item), segment);
      partition.set(item.PK, segment);
      union.push(item);
    }
  }
  return union;
}

/** Deletes a namespace's items, so the suite's table stays small (DynamoDB scans read all of it). */
async function clear(store: ItemStore, prefix: string): Promise<void> {
  const mine = (await sweep((o) => store.scan(o))).filter((i) => i.PK.startsWith(prefix));
  for (let i = 0; i < mine.length; i += 25) {
    await Promise.all(mine.slice(i, i + 25).map((item) => store.delete(item)));
  }
}

const byId = (items: Item[]) => [...items].sort((a, b) => (id(a) < id(b) ? -1 : id(a) > id(b) ? 1 : 0));

async function rejects(p: Promise<unknown>, what: string): Promise<void> {
  await assert.rejects(p, (e: unknown) => e instanceof InvalidInput, `${what}: expected InvalidInput`);
}

export function scanConformance(h: ItemStoreHarness): void {
  describe(`ItemStore segmented scans and change marks: ${h.name}`, () => {
    let store: ItemStore;
    const ns = () => `S${randomUUID().slice(0, 8)}`;
    before(async () => {
      store = await h.open();
    });
    after(async () => {
      await store.close();
    });

    it('refuses bad segment arguments, foreign cursors and foreign marks with InvalidInput', async () => {
      const n = ns();
      await store.batchPut(Array.from({ length: 40 }, (_, i) => ({ PK: `${n}#${i}`, SK: 's' })));
      const bad: ScanOptions[] = [
        { segment: 0 },
        { totalSegments: 2 },
        { segment: 0, totalSegments: 0 },
        { segment: 0, totalSegments: 1001 },
        { segment: 0, totalSegments: 1.5 },
        { segment: -1, totalSegments: 4 },
        { segment: 4, totalSegments: 4 },
        { segment: 0.5, totalSegments: 4 },
        { segment: Number.NaN, totalSegments: 4 },
      ];
      const mark = await store.changeMark();
      for (const o of bad) {
        await rejects(store.scan(o), `scan ${JSON.stringify(o)}`);
        await rejects(store.scanChangedSince(mark, o), `scanChangedSince ${JSON.stringify(o)}`);
      }
      const first = await store.scan({ segment: 0, totalSegments: 1, limit: 2 });
      assert.ok(first.cursor, 'a one-segment scan of 40 items has a next page');
      await rejects(store.scan({ segment: 0, totalSegments: 2, cursor: first.cursor }), 'a cursor of another total');
      await rejects(store.scan({ cursor: first.cursor }), 'a segment cursor in an unsegmented scan');
      const whole = await store.scan({ limit: 2 });
      await rejects(store.scan({ segment: 0, totalSegments: 1, cursor: whole.cursor as string }), 'a whole-table cursor in a segment');
      for (const m of ['', 'garbage', 'sqlite:x', 'dynamodb:', 'sqlite:abc:-1', 'dynamodb:all:x']) {
        await rejects(store.scanChangedSince(m), `mark ${JSON.stringify(m)}`);
      }
      await clear(store, `${n}#`);
    });

    it('the segments of a table are disjoint and cover it, for any total (property)', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: 40 }),
          fc.integer({ min: 1, max: 12 }),
          fc.integer({ min: 1, max: 9 }),
          fc.integer({ min: 1, max: 4 }),
          async (count, total, limit, perPartition) => {
            const n = ns();
            const items = Array.from({ length: count }, (_, i) => ({ PK: `${n}#${Math.floor(i / perPartition)}`, SK: `s${i}`, i }));
            if (items.length > 0) await store.batchPut(items);
            const union = await allSegments(store, total, limit, `${n}#`);
            assert.deepEqual(byId(union), byId(items));
            await clear(store, `${n}#`);
          },
        ),
        { numRuns: Math.max(5, Math.floor(h.runs / 6)) },
      );
    });

    it('1000 segments (the most allowed) are disjoint and cover the table too', async () => {
      const n = ns();
      const items = Array.from({ length: 60 }, (_, i) => ({ PK: `${n}#${i}`, SK: 's', i }));
      await store.batchPut(items);
      assert.deepEqual(byId(await allSegments(store, 1000, 1000, `${n}#`)), byId(items));
      await clear(store, `${n}#`);
    });

    it('a snapshot scans segments too: disjoint, covering the view', async () => {
      const n = ns();
      const items = Array.from({ length: 30 }, (_, i) => ({ PK: `${n}#${i % 9}`, SK: `s${i}`, i }));
      await store.batchPut(items);
      const snapshot = await store.snapshot();
      try {
        const union: Item[] = [];
        for (let segment = 0; segment < 4; segment++) {
          const got = await sweep((o) => snapshot.scan(o), { segment, totalSegments: 4, limit: 5 });
          union.push(...got.filter((i) => i.PK.startsWith(`${n}#`)));
        }
        assert.deepEqual(byId(union), byId(items));
        await rejects(snapshot.scan({ segment: 4, totalSegments: 4 }), 'a snapshot segment out of range');
      } finally {
        await snapshot.close();
      }
      await clear(store, `${n}#`);
    });

    changeConformance(() => store, ns, h.runs);
  });
}

type Step =
  | { kind: 'mark' }
  | { kind: 'put'; k: number; v: number }
  | { kind: 'update'; k: number; v: number }
  | { kind: 'delete'; k: number }
  | { kind: 'transact'; ks: number[]; v: number }
  | { kind: 'batchPut'; ks: number[]; v: number };

const KEYS = 12;
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.constant<Step>({ kind: 'mark' }),
  fc.record({ kind: fc.constant('put' as const), k: fc.nat(KEYS - 1), v: fc.nat(999) }),
  fc.record({ kind: fc.constant('update' as const), k: fc.nat(KEYS - 1), v: fc.nat(999) }),
  fc.record({ kind: fc.constant('delete' as const), k: fc.nat(KEYS - 1) }),
  fc.record({
    kind: fc.constant('transact' as const),
    ks: fc.uniqueArray(fc.nat(KEYS - 1), { minLength: 1, maxLength: 4 }),
    v: fc.nat(999),
  }),
  fc.record({ kind: fc.constant('batchPut' as const), ks: fc.array(fc.nat(KEYS - 1), { minLength: 1, maxLength: 5 }), v: fc.nat(999) }),
);

/** The item of key k in namespace n (two partitions, so segments split them). */
const keyOf = (n: string, k: number) => ({ PK: `${n}#${k % 3}`, SK: `k${k}` });

/** Applies one step; answers the keys it put or updated. */
async function apply(store: ItemStore, n: string, step: Step): Promise<number[]> {
  switch (step.kind) {
    case 'mark':
      return [];
    case 'put':
      await store.put({ ...keyOf(n, step.k), v: step.v, via: 'put' });
      return [step.k];
    case 'update':
      await store.update(keyOf(n, step.k), { set: { v: step.v }, add: { n: 1 } });
      return [step.k];
    case 'delete':
      await store.delete(keyOf(n, step.k));
      return [];
    case 'transact': {
      // Even keys are put, odd ones updated; one extra delete of a key outside the set rides along.
      const ops: TransactOp[] = step.ks.map((k) =>
        k % 2 === 0
          ? { op: 'put', item: { ...keyOf(n, k), v: step.v, via: 'tx' } }
          : { op: 'update', key: keyOf(n, k), update: { set: { v: step.v, via: 'tx' } } },
      );
      const spare = [...Array(KEYS).keys()].find((k) => !step.ks.includes(k));
      if (spare !== undefined) ops.push({ op: 'delete', key: keyOf(n, spare) });
      await store.transactWrite(ops);
      return step.ks;
    }
    case 'batchPut':
      await store.batchPut(step.ks.map((k) => ({ ...keyOf(n, k), v: step.v, via: 'batch' })));
      return step.ks;
  }
}

function changeConformance(store: () => ItemStore, ns: () => string, runs: number): void {
  it('every put or update after a mark is reported by scanChangedSince, as get returns it (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(stepArb, { minLength: 1, maxLength: 25 }),
        fc.integer({ min: 1, max: 7 }),
        fc.integer({ min: 1, max: 4 }),
        async (steps, limit, total) => {
          const n = ns();
          const marks: Array<{ mark: string; written: Set<number> }> = [{ mark: await store().changeMark(), written: new Set() }];
          for (const step of steps) {
            if (step.kind === 'mark') {
              marks.push({ mark: await store().changeMark(), written: new Set() });
              continue;
            }
            const wrote = await apply(store(), n, step);
            for (const m of marks) for (const k of wrote) m.written.add(k);
          }
          for (const { mark, written } of marks) {
            const whole = (await sweep((o) => store().scanChangedSince(mark, o), { limit })).filter((i) => i.PK.startsWith(`${n}#`));
            const segmented = await allSegments(store(), total, limit, `${n}#`, mark);
            for (const got of [whole, segmented]) {
              const ids = new Set(got.map(id));
              for (const k of written) {
                const current = await store().get(keyOf(n, k));
                if (current) assert.ok(ids.has(id(current)), `${id(current)} was written after the mark but is not reported`);
              }
              for (const item of got) assert.deepEqual(item, await store().get(item), 'a reported item is the item as get returns it');
            }
            assert.deepEqual(byId(segmented), byId(whole), 'the segments of a change scan are the change scan');
          }
          await clear(store(), `${n}#`);
        },
      ),
      { numRuns: Math.max(5, Math.floor(runs / 3)) },
    );
  });

  it('a mark taken after every write reports none of them on an engine that tracks changes, or all (conservative)', async () => {
    const n = ns();
    await store().batchPut(Array.from({ length: 8 }, (_, i) => ({ PK: `${n}#${i}`, SK: 's' })));
    const mark = await store().changeMark();
    const got = (await sweep((o) => store().scanChangedSince(mark, o))).filter((i) => i.PK.startsWith(`${n}#`));
    assert.ok(got.length === 0 || got.length === 8, `either none or all of the older items, got ${got.length}`);
    await store().put({ PK: `${n}#late`, SK: 's', late: true });
    const later = (await sweep((o) => store().scanChangedSince(mark, o))).filter((i) => i.PK.startsWith(`${n}#`));
    assert.ok(later.some((i) => i.late === true));
  });
}
