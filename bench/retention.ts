/**
 * Issue 8 figures: retention plan time (reference scan including the content scan) for 2,000 objects
 * of which 1,000 are referenced, and for 100,000 objects; content-scan rate; memory per tracked object.
 * Reference: the distribution registry's offline mark-and-sweep of 2,000 blobs takes 0.21–0.27 s on
 * this machine and does not scan content.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { FsContentStore } from '../src/content/fs/fs-content-store.ts';
import { ManualClock } from '../src/core/clock.ts';
import { createArtifact } from '../src/lifecycle/artifacts.ts';
import { scanReferences } from '../src/retention/references.ts';
import { createContext } from '../src/runtime/context.ts';
import { SqliteItemStore } from '../src/store/sqlite/sqlite-item-store.ts';
import { benchDir, fmt, header, row, timed } from './util.ts';

const agent = { id: 'bench', kind: 'agent' as const };

async function populate(objects: number) {
  const dir = benchDir('retention');
  const items = new SqliteItemStore(path.join(dir, 'alp.db'), { synchronous: 'NORMAL' });
  const content = await FsContentStore.open(path.join(dir, 'content'));
  const ctx = createContext({ items, content, clock: new ManualClock('2026-01-01T00:00:00Z') });
  // Each artifact version is two referenced objects (content + metadata.json); the rest are orphans.
  const referenced = Math.floor(objects / 2);
  for (let i = 0; i < referenced / 2; i++)
    await createArtifact(ctx, agent, { name: `a${i}`, filename: 'f.txt', body: [Buffer.from(`artifact ${i} `.padEnd(2048, '-'))] });
  for (let i = 0; i < objects - referenced; i++)
    await content.put(`artifacts/orphan${Math.floor(i / 100)}/v1/o${i}`, [Buffer.from(`orphan ${i} `.padEnd(2048, '.'))]);
  return { dir, ctx, items };
}

export async function benchRetention(opts: { small?: number; large?: number } = {}): Promise<Record<string, number>> {
  const results: Record<string, number> = {};
  for (const [label, n] of [
    ['small', opts.small ?? 2000],
    ['large', opts.large ?? 100_000],
  ] as const) {
    header(`retention: plan over ${fmt(n)} objects (${fmt(n / 2)} referenced), SQLite + fs`);
    const { dir, ctx, items } = await populate(n);
    try {
      global.gc?.();
      const heapBefore = process.memoryUsage().heapUsed;
      const scan = await timed(() => scanReferences(ctx));
      const heapAfter = process.memoryUsage().heapUsed;
      const s = scan.value.stats;
      row(
        'plan time (reference scan incl. content scan)',
        `${fmt(scan.ms / 1000, 3)} s`,
        label === 'small' ? 'target < 0.5 s (registry GC 0.21–0.27 s without content scan)' : '',
      );
      row('objects read / bytes read', `${fmt(s.objectsRead)} / ${fmt(s.bytesRead / 1024 / 1024, 1)} MiB`);
      row('content-scan rate', `${fmt(s.bytesRead / 1024 / 1024 / (scan.ms / 1000), 1)} MB/s`);
      row('candidates found', fmt(scan.value.candidates.length));
      row(
        'memory per tracked object (heap growth / objects)',
        `${fmt(Math.max(0, heapAfter - heapBefore) / n)} B`,
        'approximate, GC-dependent',
      );
      results[`${label}_plan_s`] = scan.ms / 1000;
    } finally {
      await items.close();
      await fs.rm(dir, { recursive: true, force: true });
    }
  }
  return results;
}
