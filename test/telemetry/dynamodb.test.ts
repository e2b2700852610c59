/**
 * The telemetry suite on a real Amazon DynamoDB Local started by this test process (a fresh table per
 * test), with the fs content store: the same tests as on SQLite, unchanged.
 */
import path from 'node:path';
import { after } from 'node:test';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { freshDynamoTable, stopSharedDynamoLocal } from '../helpers/dynamodb-local.ts';
import { tempDir } from '../helpers/tmp.ts';
import { telemetrySuite } from './suite.ts';

after(stopSharedDynamoLocal);

telemetrySuite({
  name: 'dynamodb',
  runs: 15,
  fullWalk: true,
  open: async () => {
    const items = await freshDynamoTable('telq');
    const dir = tempDir('alp-telq-ddb');
    return { items, content: await FsContentStore.open(path.join(dir, 'content')) };
  },
});
