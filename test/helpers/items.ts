/** Test helpers over the ItemStore contract. */
import type { Item, ItemStore, TransactOp } from '../../src/store/item-store.ts';

/** Every item of a table, through the contract's paginated scan (tests only: it holds them all). */

export async function allItems(items: ItemStore): Promise<Item[]> {
  const out: Item[] = [];
  let cursor: string | undefined;
  do {
    const page = await items.scan(cursor ? { cursor } : {});
    out.push(...page.items);
    cursor = page.cursor;
  } while (cursor);
  return out;
}

/** Records every transaction's size; `crashAfter(k)` makes transaction k + 1 fail before it commits, as a crash would. */
export function watchTransactions(ctx: { items: ItemStore }): { sizes: number[]; crashAfter(k: number | undefined): void } {
  const store = ctx.items;
  const original = store.transactWrite.bind(store);
  const sizes: number[] = [];
  let limit: number | undefined;
  store.transactWrite = async (ops: TransactOp[], opts) => {
    if (limit !== undefined && sizes.length >= limit) throw new Error('simulated crash');
    sizes.push(ops.length);
    return original(ops, opts);
  };
  return {
    sizes,
    crashAfter: (k) => {
      limit = k;
    },
  };
}
