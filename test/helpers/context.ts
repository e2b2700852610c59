import path from 'node:path';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import type { Layout } from '../../src/system/layout.ts';
import { tempDir } from './tmp.ts';

export interface TestContext extends ServiceContext {
  clock: ManualClock;
  dir: string;
  dbPath: string;
  contentRoot: string;
  items: SqliteItemStore;
}

/** An embedded installation in a temp directory with a manual clock. */
export async function embeddedContext(start = '2026-03-01T12:00:00.000Z', opts: { layout?: Layout } = {}): Promise<TestContext> {
  const dir = tempDir('alp-ctx');
  const dbPath = path.join(dir, 'alp.db');
  const contentRoot = path.join(dir, 'content');
  const items = new SqliteItemStore(dbPath);
  const content = await FsContentStore.open(contentRoot);
  const clock = new ManualClock(start);
  const ctx = createContext({ items, content, clock, ...(opts.layout ? { layout: opts.layout } : {}) });
  return Object.assign(ctx, { clock, dir, dbPath, contentRoot, items });
}
