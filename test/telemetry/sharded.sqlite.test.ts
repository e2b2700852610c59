/** The seed-004 telemetry suite on SQLite with the outbox in 4 shards (issue 16 item 2). */
import path from 'node:path';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { tempDir } from '../helpers/tmp.ts';
import { telemetrySuite } from './suite.ts';

telemetrySuite({
  name: 'sqlite, 4 shards',
  runs: 25,
  fullWalk: true,
  shards: 4,
  open: async () => {
    const dir = tempDir('alp-telq4');
    return { items: new SqliteItemStore(path.join(dir, 'alp.db')), content: await FsContentStore.open(path.join(dir, 'content')) };
  },
});
