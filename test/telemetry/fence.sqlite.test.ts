/** The telemetry fence and exhausted-capacity suite on SQLite (a fresh database file per test). */
import path from 'node:path';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { tempDir } from '../helpers/tmp.ts';
import { telemetryFenceSuite } from './fence-suite.ts';

telemetryFenceSuite({
  name: 'sqlite',
  open: async () => {
    const dir = tempDir('alp-telq-fence');
    return { items: new SqliteItemStore(path.join(dir, 'alp.db')), content: await FsContentStore.open(path.join(dir, 'content')) };
  },
});
