/** The seed-004 telemetry suite on DynamoDB Local with the outbox in 4 shards (issue 16 item 2). */
import path from 'node:path';
import { after } from 'node:test';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { freshDynamoTable, stopSharedDynamoLocal } from '../helpers/dynamodb-local.ts';
import { tempDir } from '../helpers/tmp.ts';
import { telemetrySuite } from './suite.ts';

after(stopSharedDynamoLocal);

telemetrySuite({
  name: 'dynamodb, 4 shards',
  runs: 5,
  // The full walk of every state runs unsharded on DynamoDB (dynamodb.test.ts) and sharded on SQLite.
  fullWalk: false,
  shards: 4,
  open: async () => {
    const items = await freshDynamoTable('telq4');
    return { items, content: await FsContentStore.open(path.join(tempDir('alp-telq4-ddb'), 'content')) };
  },
});
