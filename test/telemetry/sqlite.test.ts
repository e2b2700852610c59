/** The telemetry suite on SQLite (a fresh database file per test) with the fs content store. */
import path from 'node:path';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { tempDir } from '../helpers/tmp.ts';
import { telemetrySuite } from './suite.ts';

telemetrySuite({
  name: 'sqlite',
  runs: 40,
  fullWalk: true,
  open: async () => {
    const dir = tempDir('alp-telq');
    return { items: new SqliteItemStore(path.join(dir, 'alp.db')), content: await FsContentStore.open(path.join(dir, 'content')) };
  },
});
