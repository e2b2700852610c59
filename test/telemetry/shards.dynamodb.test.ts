/** The telemetry shards suite on a real Amazon DynamoDB Local (a fresh table per installation). */
import path from 'node:path';
import { after } from 'node:test';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { freshDynamoTable, stopSharedDynamoLocal } from '../helpers/dynamodb-local.ts';
import { tempDir } from '../helpers/tmp.ts';
import { shardsSuite } from './shards-suite.ts';

after(stopSharedDynamoLocal);

shardsSuite({
  name: 'dynamodb',
  runs: 6,
  open: async () => {
    const items = await freshDynamoTable('telqs');
    return { items, content: await FsContentStore.open(path.join(tempDir('alp-telqs-ddb'), 'content')) };
  },
});
