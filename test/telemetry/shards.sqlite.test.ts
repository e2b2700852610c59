/** The telemetry shards suite on SQLite (a fresh database file per installation). */
import path from 'node:path';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { tempDir } from '../helpers/tmp.ts';
import { shardsSuite } from './shards-suite.ts';

shardsSuite({
  name: 'sqlite',
  runs: 25,
  open: async () => {
    const dir = tempDir('alp-telq-shards');
    return { items: new SqliteItemStore(path.join(dir, 'alp.db')), content: await FsContentStore.open(path.join(dir, 'content')) };
  },
});
