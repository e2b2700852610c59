/**
 * Installations for the retention bench: SQLite + directory, built through the library (versions by
 * createArtifact, orphans by ctx.content.put, so the write path indexes both), a verified restore taken
 * while the installation is empty (what an approval names), and the "written before the index existed"
 * variant (every reference index entry of the content root deleted).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { FsContentStore } from '../src/content/fs/fs-content-store.ts';
import { ManualClock } from '../src/core/clock.ts';
import { createArtifact } from '../src/lifecycle/artifacts.ts';
import { createBackup } from '../src/recovery/backup.ts';
import { activateRestore, reconcile } from '../src/recovery/reconcile.ts';
import { restoreBackup } from '../src/recovery/restore.ts';
import { createContext, type ServiceContext } from '../src/runtime/context.ts';
import { SqliteItemStore } from '../src/store/sqlite/sqlite-item-store.ts';
import { initInstallation } from '../src/system/installation.ts';
import { allRefIndexEntries, contentRootId, deleteRefIndexEntry } from '../src/system/ref-index.ts';
import { benchDir } from './util.ts';

export const operator = { id: 'os:bench', kind: 'human' as const };
const agent = { id: 'bench', kind: 'agent' as const };

export interface BenchInstallation {
  dir: string;
  ctx: ServiceContext & { clock: ManualClock };
  items: SqliteItemStore;
  /** The restored database an approval names (taken when the installation was empty). */
  restore: string;
  /** Objects written so far (referenced + orphans). */
  objects: number;
  close(): Promise<void>;
}

export async function verifiedRestore(ctx: ServiceContext, dir: string): Promise<string> {
  const out = path.join(dir, 'backup');
  const file = path.join(dir, 'restore', 'alp.db');
  await fs.mkdir(path.dirname(file), { recursive: true });
  await createBackup(ctx, { out, actor: operator.id });
  const items = new SqliteItemStore(file);
  const target = createContext({ items, content: ctx.content, clock: ctx.clock });
  await restoreBackup(target, { from: out, actor: operator.id });
  const report = await reconcile(target, { actor: operator.id });
  if (report.status !== 'VERIFIED') throw new Error(`bench restore did not verify: ${JSON.stringify(report.findings.slice(0, 3))}`);
  await activateRestore(target, report.reconcile_id, operator);
  await items.close();
  return file;
}

export async function openBenchInstallation(label: string): Promise<BenchInstallation> {
  const dir = benchDir(label);
  const items = new SqliteItemStore(path.join(dir, 'alp.db'), { synchronous: 'NORMAL' });
  const content = await FsContentStore.open(path.join(dir, 'content'));
  const clock = new ManualClock('2026-01-01T00:00:00Z');
  const ctx = Object.assign(createContext({ items, content, clock }), { clock });
  await initInstallation(ctx);
  const restore = await verifiedRestore(ctx, dir);
  return {
    dir,
    ctx,
    items,
    restore,
    objects: 0,
    close: async () => {
      await items.close();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Adds `objects` objects: half referenced (each version is its content + metadata.json, created through
 * the library), half orphans (ctx.content.put under artifacts/, 2 KiB each). 4 writers at a time.
 */
export async function addObjects(inst: BenchInstallation, objects: number, tag: string): Promise<void> {
  const versions = Math.floor(objects / 4);
  const orphans = objects - versions * 2;
  let next = 0;
  const body = (i: number) => Buffer.from(`artifact ${tag} ${i} `.padEnd(2048, '-'));
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < versions) {
        const i = next++;
        await createArtifact(inst.ctx, agent, { name: `a-${tag}-${i}`, filename: 'f.txt', body: [body(i)] });
      }
    }),
  );
  let o = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (o < orphans) {
        const i = o++;
        await inst.ctx.content.put(`artifacts/orphan-${tag}-${Math.floor(i / 100)}/v1/o${i}`, [
          Buffer.from(`orphan ${tag} ${i} `.padEnd(2048, '.')),
        ]);
      }
    }),
  );
  inst.objects += objects;
}

/** Deletes every reference index entry of the installation's content root: objects as written before the index. */
export async function dropReferenceIndex(inst: BenchInstallation): Promise<number> {
  const root = contentRootId(inst.ctx.content.location);
  const shards = inst.ctx.layout.index_shards;
  const keys: string[] = [];
  for await (const e of allRefIndexEntries(inst.items, root, shards)) keys.push(e.key);
  for (const k of keys) await deleteRefIndexEntry(inst.items, root, shards, k);
  return keys.length;
}
