/**
 * Direct build of a large installation for the RSS cases (10 k / 100 k / 1 M objects, all built the same
 * way so the figures compare): one template artifact is created through the library; its items (version,
 * HEAD, name, audit, telemetry, reference index entries …) are cloned with the artifact id and name
 * replaced and written with batchPut (one transaction per 5,000), and its two objects (content and
 * metadata.json) are copied byte for byte to the cloned keys (same digests as the cloned items record).
 * Orphans are 2 KiB files written directly, each with its reference index entry (refIndexItem), as the
 * write path records it. Not a lifecycle: nothing is fsynced and audit chains are not re-linked. The
 * per-state counters are not cloned (they are the installation's, not the artifact's): the clones'
 * versions are counted as they are written and added to them at the end, so the counts stay exact.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { FsContentStore } from '../src/content/fs/fs-content-store.ts';
import { ManualClock } from '../src/core/clock.ts';
import { newId } from '../src/core/ids.ts';
import { createArtifact } from '../src/lifecycle/artifacts.ts';
import { STATE_COUNTS_TYPE, StateRecount, stateCountOp } from '../src/lifecycle/state-counts.ts';
import { createContext, type ServiceContext } from '../src/runtime/context.ts';
import type { Item } from '../src/store/item-store.ts';
import { SqliteItemStore } from '../src/store/sqlite/sqlite-item-store.ts';
import { initInstallation } from '../src/system/installation.ts';
import { contentRootId, refIndexItem } from '../src/system/ref-index.ts';
import { allItems } from '../test/helpers/items.ts';

const agent = { id: 'bench', kind: 'agent' as const };
const BATCH = 5000;

async function listFiles(root: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fs.readdir(root, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(path.relative(root, path.join(e.parentPath, e.name)));
  }
  return out;
}

/** Builds `objects` objects (half referenced) into dir/alp.db + dir/content; returns what it wrote. */
export async function buildDirect(
  dir: string,
  objects: number,
  opts: { afterInit?: (ctx: ServiceContext) => Promise<void> } = {},
): Promise<{ items: number; files: number; ms: number }> {
  const started = Date.now();
  const items = new SqliteItemStore(path.join(dir, 'alp.db'), { synchronous: 'NORMAL' });
  const contentRoot = path.join(dir, 'content');
  const content = await FsContentStore.open(contentRoot);
  const clock = new ManualClock('2026-01-01T00:00:00Z');
  const ctx = createContext({ items, content, clock });
  await initInstallation(ctx);
  await opts.afterInit?.(ctx);
  const before = new Set((await allItems(items)).map((i) => `${i.PK}\u0000${i.SK}`));
  const filesBefore = new Set(await listFiles(contentRoot));
  const name = 'template-artifact';
  const { head } = await createArtifact(ctx, agent, { name, filename: 'f.txt', body: [Buffer.from('template '.padEnd(2048, '-'))] });
  const id = head.artifact_id;
  const created = (await allItems(items)).filter((i) => !before.has(`${i.PK}\u0000${i.SK}`));
  const template = JSON.stringify(created.filter((i) => i.type !== STATE_COUNTS_TYPE));
  const templateFiles = (await listFiles(contentRoot)).filter((f) => !filesBefore.has(f) && f.includes(id));
  const bodies = await Promise.all(templateFiles.map((f) => fs.readFile(path.join(contentRoot, f))));
  const versions = Math.floor(objects / 2 / templateFiles.length);
  let written = 0;
  const clonedVersions = new StateRecount();
  let pending: Item[] = [];
  const flush = async () => {
    if (pending.length) await items.batchPut(pending);
    written += pending.length;
    pending = [];
  };
  for (let v = 1; v < versions; v++) {
    clock.advance(1);
    const nid = newId(clock);
    const clone = JSON.parse(template.replaceAll(id, nid).replaceAll(name, `clone-${v}`)) as Item[];
    clonedVersions.add(clone);
    pending.push(...clone);
    await Promise.all(
      templateFiles.map(async (f, j) => {
        const file = path.join(contentRoot, f.replaceAll(id, nid));
        await fs.mkdir(path.dirname(file), { recursive: true });
        await fs.writeFile(file, bodies[j] as Buffer);
      }),
    );
    if (pending.length >= BATCH) await flush();
  }
  const root = contentRootId(content.location);
  const orphans = objects - versions * templateFiles.length;
  for (let i = 0; i < orphans; i++) {
    const key = `artifacts/orphan-${Math.floor(i / 1000)}/v1/o${i}`;
    const body = Buffer.from(`orphan ${i} `.padEnd(2048, '.'));
    const file = path.join(contentRoot, ...key.split('/'));
    if (i % 1000 === 0) await fs.mkdir(path.dirname(file), { recursive: true });
    await fs.writeFile(file, body);
    const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    pending.push(
      refIndexItem(root, ctx.layout.index_shards, { key, digest, size: body.length, digests: [], indexed_at: clock.now().toISOString() }),
    );
    if (pending.length >= BATCH) await flush();
  }
  await flush();
  for (const [shard, counts] of clonedVersions.byShard) await items.transactWrite([stateCountOp(shard, counts)]);
  await items.close();
  return { items: written, files: versions * templateFiles.length + orphans, ms: Date.now() - started };
}
