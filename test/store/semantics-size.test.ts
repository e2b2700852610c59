/**
 * The item size rule (semantics.ts validateItem): the size of an item is the UTF-8 length of its JSON,
 * keys included, although the store serialises only the attributes other than the keys (once, shared
 * with the SQLite row through attrsJson).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Item } from '../../src/store/item-store.ts';
import { attrsJson, validateItem } from '../../src/store/semantics.ts';

const text = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 });
const value = fc.oneof(text, fc.integer(), fc.boolean(), fc.constant(null), fc.array(text, { maxLength: 3 }));
const itemArb = fc
  .record(
    {
      PK: text,
      SK: text,
      GSI1PK: text,
      GSI1SK: text,
      attrs: fc.dictionary(
        text.filter((k) => !['PK', 'SK', 'GSI1PK', 'GSI1SK', '__proto__'].includes(k)),
        value,
        { maxKeys: 5 },
      ),
    },
    { requiredKeys: ['PK', 'SK', 'attrs'] },
  )
  .map(({ attrs, ...keys }) => ({ ...keys, ...attrs }) as Item);

describe('item size', () => {
  it('is the UTF-8 length of the whole item as JSON, and attrsJson is the JSON of the rest', () => {
    fc.assert(
      fc.property(itemArb, (item) => {
        assert.equal(validateItem(item), Buffer.byteLength(JSON.stringify(item), 'utf8'));
        const { PK: _pk, SK: _sk, GSI1PK: _gpk, GSI1SK: _gsk, ...rest } = item;
        assert.deepEqual(JSON.parse(attrsJson(item)), rest);
        assert.deepEqual(JSON.parse(attrsJson(item)), rest, 'taken twice: serialised again');
      }),
      { numRuns: 500 },
    );
  });

  it('an item changed after validation is stored as it is now, not as validated', () => {
    const item: Item = { PK: 'P', SK: 'S', a: 1 };
    validateItem(item);
    assert.equal(attrsJson(item), '{"a":1}');
    item.a = 2;
    assert.equal(attrsJson(item), '{"a":2}');
  });
});
