/**
 * The telemetry suite on a real Amazon DynamoDB Local started by this test process (a fresh table per
 * test), with the fs content store: the same tests as on SQLite, unchanged.
 */
import path from 'node:path';
import { after } from 'node:test';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { DynamoItemStore } from '../../src/store/dynamodb/dynamodb-item-store.ts';
import { type DynamoLocal, startDynamoLocal } from '../helpers/dynamodb-local.ts';
import { tempDir } from '../helpers/tmp.ts';
import { telemetrySuite } from './suite.ts';

let starting: Promise<DynamoLocal> | undefined;
const opened: DynamoItemStore[] = [];

after(async () => {
  for (const s of opened) await s.close();
  await (await starting)?.stop();
});

telemetrySuite({
  name: 'dynamodb',
  runs: 15,
  fullWalk: true,
  open: async () => {
    starting ??= startDynamoLocal();
    const l = await starting;
    const items = await DynamoItemStore.open(
      { engine: 'dynamodb', table: l.tableName('telq'), region: l.region, endpoint: l.endpoint },
      { credentials: l.credentials, baseDelayMs: 5, maxDelayMs: 100 },
    );
    opened.push(items);
    await items.ensureTable();
    const dir = tempDir('alp-telq-ddb');
    return { items, content: await FsContentStore.open(path.join(dir, 'content')) };
  },
});
