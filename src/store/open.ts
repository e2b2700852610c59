import type { MetadataConfig } from '../core/config.ts';
import type { ItemStore } from './item-store.ts';

/** Opens the ItemStore engine a metadata URL names. Engines load lazily (the AWS SDK is large). */
export async function openItemStore(config: MetadataConfig): Promise<ItemStore> {
  if (config.engine === 'sqlite') {
    const { SqliteItemStore } = await import('./sqlite/sqlite-item-store.ts');
    return new SqliteItemStore(config.path, config.synchronous ? { synchronous: config.synchronous } : {});
  }
  const { DynamoItemStore } = await import('./dynamodb/dynamodb-item-store.ts');
  return DynamoItemStore.open(config);
}
