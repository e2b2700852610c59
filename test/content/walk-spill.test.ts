/**
 * The fs listing's large directories (sorted-names.ts): keys sorted in runs spilled to temporary files
 * and merged come out in UTF-8 byte order, exactly once each, and leave no temporary file behind.
 * ALP_WALK_RUN_KEYS is set before the store is loaded so that small directories spill.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { tempDir } from '../helpers/tmp.ts';

const spillRoot = tempDir('alp-spill-tmp');
process.env.TMPDIR = spillRoot;
process.env.ALP_WALK_RUN_KEYS = '7';
const { SortedKeys, hasHighUnits } = await import('../../src/content/fs/sorted-names.ts');
const { FsContentStore } = await import('../../src/content/fs/fs-content-store.ts');

const byUtf8 = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
const spills = () => fs.readdirSync(spillRoot).filter((n) => n.startsWith('alp-walk-'));
const name = fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }).filter((s) => !s.includes('\u0000') && !/[\ud800-\udfff]/u.test(s));

describe('sorted runs of directory keys', () => {
  it('yields every key once in UTF-8 byte order, whatever the run size, and removes its runs', () => {
    fc.assert(
      fc.property(fc.uniqueArray(name, { maxLength: 120 }), fc.integer({ min: 1, max: 9 }), (keys, runKeys) => {
        const sorted = new SortedKeys(runKeys);
        for (const k of keys) sorted.add(k, hasHighUnits(k));
        const source = sorted.source();
        const out: string[] = [];
        for (let k = source.next(); k !== undefined; k = source.next()) out.push(k);
        source.close();
        assert.deepEqual(out, [...keys].sort(byUtf8));
        assert.deepEqual(spills(), []);
      }),
      { numRuns: 150 },
    );
  });

  it('closing a source part way removes its runs', () => {
    const sorted = new SortedKeys(3);
    for (let i = 0; i < 20; i++) sorted.add(`k${i}`, false);
    assert.equal(spills().length, 1);
    const source = sorted.source();
    assert.equal(source.next(), 'k0');
    source.close();
    assert.deepEqual(spills(), []);
  });
});

describe('fs listing of a directory larger than a run', () => {
  const root = tempDir('alp-fs-spill');
  const expected: string[] = [];
  const names = ['\u{1f600}', '\uff5e', 'z', '\u00e9', 'A', '0'];
  for (let i = 0; i < 60; i++) {
    const id = `${names[i % names.length]}${i}`;
    fs.mkdirSync(path.join(root, 'artifacts', id, 'v1'), { recursive: true });
    fs.writeFileSync(path.join(root, 'artifacts', id, 'v1', 'content'), id);
    expected.push(`artifacts/${id}/v1/content`);
  }
  expected.sort(byUtf8);

  it('list() and listPage() give every key once, in UTF-8 byte order, and leave no runs', async () => {
    const store = await FsContentStore.open(root);
    const listed: string[] = [];
    for await (const o of store.list('artifacts/')) listed.push(o.key);
    assert.deepEqual(listed, expected);
    const paged: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await store.listPage('artifacts/', cursor ? { cursor, limit: 11 } : { limit: 11 });
      paged.push(...page.objects.map((o) => o.key));
      cursor = page.cursor;
    } while (cursor);
    assert.deepEqual(paged, expected);
    assert.deepEqual(spills(), []);
  });

  it('a listing stopped early leaves no runs', async () => {
    const store = await FsContentStore.open(root);
    let n = 0;
    for await (const _ of store.list('artifacts/')) if (++n === 5) break;
    assert.equal(n, 5);
    assert.deepEqual(spills(), []);
  });
});
