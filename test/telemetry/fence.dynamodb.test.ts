/** The telemetry fence and exhausted-capacity suite on a real Amazon DynamoDB Local (a fresh table per test). */
import path from 'node:path';
import { after } from 'node:test';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { freshDynamoTable, stopSharedDynamoLocal } from '../helpers/dynamodb-local.ts';
import { tempDir } from '../helpers/tmp.ts';
import { telemetryFenceSuite } from './fence-suite.ts';

after(stopSharedDynamoLocal);

telemetryFenceSuite({
  name: 'dynamodb',
  open: async () => {
    const items = await freshDynamoTable('telqf');
    return { items, content: await FsContentStore.open(path.join(tempDir('alp-telqf-ddb'), 'content')) };
  },
});
