/**
 * Sorting the rows a view has loaded: a stable sort by one column (numbers as numbers, missing values
 * last) and the header's click cycle.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { nextSort, sortRows } from '../../src/web/app/lib/table.ts';

describe('web UI: sorting loaded rows', () => {
  it('sorts by one column, ascending or descending, numbers as numbers, names naturally', () => {
    const rows = [
      { n: 'note-10', size: 10 },
      { n: 'note-2', size: 2 },
      { n: 'Alpha', size: 300 },
    ];
    assert.deepEqual(
      sortRows(rows, (r) => r.n, 'asc').map((r) => r.n),
      ['Alpha', 'note-2', 'note-10'],
    );
    assert.deepEqual(
      sortRows(rows, (r) => r.size, 'desc').map((r) => r.size),
      [300, 10, 2],
    );
  });

  it('is a stable permutation that orders its keys, with missing values last in both directions', () => {
    // Each row's id is its input position, so comparing the two sets by id cannot depend on how ties in id order.
    const values = fc.array(fc.option(fc.integer({ min: -5, max: 5 }), { nil: undefined }), { maxLength: 30 });
    fc.assert(
      fc.property(values, fc.constantFrom('asc', 'desc' as const), (vs, dir) => {
        const rows = vs.map((v, id) => ({ id, v }));
        const sorted = sortRows(rows, (r) => r.v, dir);
        assert.equal(sorted.length, rows.length);
        assert.deepEqual(
          [...sorted].sort((a, b) => a.id - b.id),
          [...rows].sort((a, b) => a.id - b.id),
        );
        const defined = sorted.filter((r) => r.v !== undefined);
        assert.deepEqual(sorted.slice(0, defined.length), defined, 'missing values last');
        for (let i = 1; i < defined.length; i++) {
          const [a, b] = [defined[i - 1]?.v as number, defined[i]?.v as number];
          assert.ok(dir === 'asc' ? a <= b : a >= b);
          if (a === b)
            assert.ok(rows.indexOf(defined[i - 1] as (typeof rows)[number]) < rows.indexOf(defined[i] as (typeof rows)[number]), 'stable');
        }
      }),
    );
  });

  it('a click on a new column sorts it ascending; a second click on it reverses it', () => {
    assert.deepEqual(nextSort(undefined, 'name'), { key: 'name', dir: 'asc' });
    assert.deepEqual(nextSort({ key: 'name', dir: 'asc' }, 'name'), { key: 'name', dir: 'desc' });
    assert.deepEqual(nextSort({ key: 'name', dir: 'desc' }, 'name'), { key: 'name', dir: 'asc' });
    assert.deepEqual(nextSort({ key: 'name', dir: 'desc' }, 'size'), { key: 'size', dir: 'asc' });
  });
});
