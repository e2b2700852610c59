import type { MetadataConfig } from '../../core/config.ts';
import { InternalError } from '../../core/errors.ts';
import type { ItemStore } from '../item-store.ts';

// Placeholder until the DynamoDB engine lands (issue 5).
export const DynamoItemStore = {
  async open(_config: Extract<MetadataConfig, { engine: 'dynamodb' }>): Promise<ItemStore> {
    throw new InternalError('the DynamoDB engine is not built yet');
  },
};
