import fs from 'node:fs';
import type { MetadataConfig } from '../core/config.ts';
import { NotFound } from '../core/errors.ts';
import type { ItemStore } from './item-store.ts';

/**
 * Opens the ItemStore engine a metadata URL names. Engines load lazily (the AWS SDK is large).
 * `readOnly`: an existing store is only read (a SQLite file that does not exist is NOT_FOUND, never
 * created); the DynamoDB engine never creates its table on open either way.
 */
export async function openItemStore(config: MetadataConfig, opts: { readOnly?: boolean } = {}): Promise<ItemStore> {
  if (config.engine === 'sqlite') {
    if (opts.readOnly && !fs.existsSync(config.path)) throw new NotFound(`no database at ${config.path}`);
    const { SqliteItemStore } = await import('./sqlite/sqlite-item-store.ts');
    return new SqliteItemStore(config.path, {
      ...(config.synchronous ? { synchronous: config.synchronous } : {}),
      ...(opts.readOnly ? { readonly: true } : {}),
    });
  }
  const { DynamoItemStore } = await import('./dynamodb/dynamodb-item-store.ts');
  return DynamoItemStore.open(config);
}
