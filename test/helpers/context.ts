import path from 'node:path';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import { installationKeySource } from '../../src/runtime/signing.ts';
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
  // The embedded key file as the CLI would use it (DIR/keys/…, created on first signature), whatever ALP_SIGNING_KEY says.
  const signingKey = installationKeySource(
    { metadata: { engine: 'sqlite', path: dbPath }, content: { engine: 'fs', root: contentRoot } },
    {},
  );
  const ctx = createContext({
    items,
    content,
    clock,
    ...(signingKey ? { signingKey } : {}),
    ...(opts.layout ? { layout: opts.layout } : {}),
  });
  return Object.assign(ctx, { clock, dir, dbPath, contentRoot, items });
}
