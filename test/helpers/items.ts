/** Every item of a table, through the contract's paginated scan (tests only: it holds them all). */
import type { Item, ItemStore } from '../../src/store/item-store.ts';

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
