/**
 * Shared pieces of the recovery tests: a populated installation, and exact before/after pictures of a
 * table (every item, canonical JSON) and of a content directory (every file and its sha256).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { canonicalJson } from '../../src/core/canonical-json.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { createToken } from '../../src/lifecycle/principals.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import type { Item, ItemStore } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { allItems } from '../helpers/items.ts';
import { bytesOf } from '../helpers/tmp.ts';

export { allItems };

import { agent, alice, approveAndRun, walkEveryState } from '../helpers/walk.ts';

/** Every item as canonical JSON lines, sorted: equal strings mean equal tables. */
export async function tableLines(items: ItemStore, skip: (i: Item) => boolean = () => false): Promise<string[]> {
  return (await allItems(items))
    .filter((i) => !skip(i))
    .map((i) => canonicalJson(i))
    .sort();
}

/** Every file below `root` (relative path → sha256 hex), sorted. */
export function dirState(root: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const walk = (dir: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw e;
    }
    for (const e of entries) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else out.push([path.relative(root, p), createHash('sha256').update(fs.readFileSync(p)).digest('hex')]);
    }
  };
  walk(root);
  return out.sort(([a], [b]) => (a < b ? -1 : 1));
}

export interface Embedded extends ServiceContext {
  clock: ManualClock;
  dir: string;
  dbPath: string;
  contentRoot: string;
  items: SqliteItemStore;
}

/** An embedded installation at DIR/alp.db + DIR/content (the layout of `--data DIR`). */
export async function embeddedAt(dir: string, start = '2026-03-01T12:00:00.000Z'): Promise<Embedded> {
  const dbPath = path.join(dir, 'alp.db');
  const contentRoot = path.join(dir, 'content');
  const items = new SqliteItemStore(dbPath);
  const content = await FsContentStore.open(contentRoot);
  const clock = new ManualClock(start);
  return Object.assign(createContext({ items, content, clock }), { clock, dir, dbPath, contentRoot, items });
}

/**
 * A populated installation: the every-state walk (archive copies, compensations, executions,
 * provenance), plus `extra` artifacts with two versions, one run with outputs, and a token.
 */
export async function populate(ctx: ServiceContext & { clock: ManualClock }, extra = 3): Promise<{ walked: string; ids: string[] }> {
  await initInstallation(ctx);
  const { id: walked } = await walkEveryState(ctx);
  const ids: string[] = [];
  for (let i = 0; i < extra; i++) {
    ctx.clock.advance(1000);
    const { version } = await createArtifact(ctx, agent, {
      name: `extra-${i}`,
      filename: `f${i}.sh`,
      body: bytesOf(`echo ${i}\n`.repeat(i + 1)),
    });
    ids.push(version.artifact_id);
    await addVersion(ctx, agent, version.artifact_id, { filename: `f${i}.sh`, body: bytesOf(`echo ${i} again\n`) });
    if (i === 0) await approveAndRun(ctx, version.artifact_id, 2, 'SUCCEEDED');
    await addProvenance(ctx, agent, version.artifact_id, { action: 'generate', model: 'm@1' });
  }
  await createToken(ctx, { principal: 'bot', kind: 'agent' }, alice);
  return { walked, ids };
}
