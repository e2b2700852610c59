/**
 * Heap of the reference scan at 10,000 vs 100,000 objects (issue 17 item 2, bounded memory): not a
 * test file (too slow for `npm test`), run by hand:
 *
 *   node --expose-gc --import tsx test/retention/scan-memory.ts 10000 100000
 *
 * Each size runs in its own process. The installation is BUILT DIRECTLY (SQLite + directory): N files
 * of ~60 bytes written into the content root, N/2 version-like items naming half of them (content_key +
 * content_hash), each object's bytes naming the digest of the next (so the closure has depth), and —
 * for the indexed scan — N reference-index entries put in batches. Two scans: the first with no entry
 * (reads every object and writes its entry: the backfill), the second reading the index (0 bytes).
 * Reported: wall time, objects/bytes read, the heap the open scan retains (after a forced GC), the
 * peak heap growth during the scan (sampled every 20 ms; GC-dependent), and peak RSS.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { sha256 } from '../../src/core/digest.ts';
import { scanReferences } from '../../src/retention/references.ts';
import { embeddedContext } from '../helpers/context.ts';

async function one(n: number): Promise<Record<string, number>> {
  const ctx = await embeddedContext();
  const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
  const items = [];
  let prev = '';
  for (let i = 0; i < n; i++) {
    const key = `artifacts/A${String(Math.floor(i / 100)).padStart(5, '0')}/v1/f${i % 100}`;
    const body = `object ${i}${prev && i % 2 === 1 ? ` names ${prev}` : ''}\n`;
    const file = path.join(ctx.contentRoot, key);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, body);
    prev = sha256(body);
    if (i % 4 === 0) {
      items.push({
        PK: `ART#A${i}`,
        SK: 'V#0000000001',
        type: 'version',
        artifact_id: `A${i}`,
        version: 1,
        content_key: key,
        content_hash: prev,
        size: Buffer.byteLength(body),
      });
    }
    if (items.length === 500) await ctx.items.batchPut(items.splice(0));
  }
  await ctx.items.batchPut(items.splice(0));
  const out: Record<string, number> = { objects: n };
  for (const label of ['first', 'second']) {
    gc();
    const base = process.memoryUsage().heapUsed;
    let peak = base;
    let rss = 0;
    const timer = setInterval(() => {
      const m = process.memoryUsage();
      peak = Math.max(peak, m.heapUsed);
      rss = Math.max(rss, m.rss);
    }, 20);
    const started = performance.now();
    const scan = await scanReferences(ctx);
    const ms = performance.now() - started;
    clearInterval(timer);
    // What the open scan itself holds: the heap after a full GC, the scan still open.
    gc();
    out[`${label}_heap_retained_mib`] = Math.round(((process.memoryUsage().heapUsed - base) / 1048576) * 10) / 10;
    const m = process.memoryUsage();
    peak = Math.max(peak, m.heapUsed);
    rss = Math.max(rss, m.rss);
    out[`${label}_ms`] = Math.round(ms);
    out[`${label}_objects_read`] = scan.stats.objectsRead;
    out[`${label}_bytes_read`] = scan.stats.bytesRead;
    out[`${label}_indexed`] = scan.stats.indexed;
    out[`${label}_referenced`] = scan.referencedCount();
    out[`${label}_heap_peak_growth_mib`] = Math.round(((peak - base) / 1048576) * 10) / 10;
    out[`${label}_rss_peak_mib`] = Math.round(rss / 1048576);
    scan.close();
  }
  await ctx.items.close();
  fs.rmSync(ctx.dir, { recursive: true, force: true });
  return out;
}

const sizes = process.argv.slice(2).map(Number);
if (process.env.ALP_SCAN_MEMORY_CHILD) {
  console.log(JSON.stringify(await one(sizes[0] as number)));
} else {
  for (const n of sizes.length ? sizes : [10_000, 100_000]) {
    const r = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', import.meta.filename, String(n)], {
      env: { ...process.env, ALP_SCAN_MEMORY_CHILD: '1' },
      encoding: 'utf8',
    });
    process.stdout.write(r.stdout || r.stderr);
  }
}
