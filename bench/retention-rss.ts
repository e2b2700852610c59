/**
 * RSS high-water (VmHWM from /proc/self/status) of the retention plan — and of backup, restore and
 * reconcile — at 10 k / 100 k / 1 M objects, each case in its own child process over an installation
 * built directly (bench/retention-build.ts, the same way at every size; the build runs in a child of its
 * own so its memory is not counted). `plan` is a whole scan, `plan-cached` the plan after it (from the
 * cache the first saved). `idle` is the child opening the stores and doing nothing (the
 * baseline the others add to). ALP_BENCH_RSS_MODES=idle,plan limits the cases (e.g. at 1 M). Run as a
 * script, it is the child: `retention-rss.ts <mode> <dir> <objects>`.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { FsContentStore } from '../src/content/fs/fs-content-store.ts';
import { ManualClock } from '../src/core/clock.ts';
import { createBackup } from '../src/recovery/backup.ts';
import { reconcile } from '../src/recovery/reconcile.ts';
import { restoreBackup } from '../src/recovery/restore.ts';
import { ArtifactRetention } from '../src/retention/retention.ts';
import { createContext } from '../src/runtime/context.ts';
import { SqliteItemStore } from '../src/store/sqlite/sqlite-item-store.ts';
import { readEpoch } from '../src/system/state.ts';
import { buildDirect } from './retention-build.ts';
import { benchDir, fmt, header, row } from './util.ts';

const run = promisify(execFile);
const self = fileURLToPath(import.meta.url);
const MODES = ['idle', 'plan', 'plan-cached', 'backup', 'restore', 'reconcile'] as const;
type Mode = (typeof MODES)[number] | 'build';

function vmHwmKib(): number {
  const status = readFileSync('/proc/self/status', 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
}

async function child(mode: Mode, dir: string, objects: number): Promise<Record<string, unknown>> {
  if (mode === 'build') return buildDirect(dir, objects);
  const clock = new ManualClock('2026-02-01T00:00:00Z');
  const content = await FsContentStore.open(path.join(dir, 'content'));
  const db = mode === 'reconcile' ? 'restored.db' : 'alp.db';
  const items = new SqliteItemStore(path.join(dir, db), { synchronous: 'NORMAL' });
  const ctx = createContext({ items, content, clock });
  try {
    // plan: a whole scan (a new installation has no cache); plan-cached: the next one, from the cache it saved.
    if (mode === 'plan' || mode === 'plan-cached') {
      const retention = new ArtifactRetention(items, content, { clock, layout: ctx.layout });
      const plan = await retention.plan(await readEpoch(items), 'QUARANTINE', { maxArtifacts: 1000 });
      await retention.close();
      return {
        candidates: plan.plan.candidates.length,
        starts: plan.observe.starts,
        indexed: plan.scan.indexed,
        read: plan.scan.objectsRead,
      };
    }
    if (mode === 'backup') {
      const b = await createBackup(ctx, { out: path.join(dir, 'backup'), actor: 'os:bench' });
      return { items: b.manifest.items.count, objects: b.manifest.objects.count };
    }
    if (mode === 'restore') {
      const target = new SqliteItemStore(path.join(dir, 'restored.db'), { synchronous: 'NORMAL' });
      try {
        const r = await restoreBackup(createContext({ items: target, content, clock }), {
          from: path.join(dir, 'backup'),
          actor: 'os:bench',
        });
        return { status: r.record.status };
      } finally {
        await target.close();
      }
    }
    if (mode === 'reconcile') {
      const r = await reconcile(ctx, { actor: 'os:bench' });
      return { status: r.status, findings: r.findings.length };
    }
    return {};
  } finally {
    await items.close();
  }
}

async function spawnCase(mode: Mode, dir: string, objects: number): Promise<{ kib: number; ms: number; out: Record<string, unknown> }> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', self, mode, dir, String(objects)], {
    maxBuffer: 1 << 26,
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  });
  const line = stdout.trim().split('\n').at(-1) ?? '{}';
  return JSON.parse(line) as { kib: number; ms: number; out: Record<string, unknown> };
}

export async function benchRetentionRss(sizes: number[]): Promise<Record<string, number>> {
  const results: Record<string, number> = {};
  header('retention: RSS high-water (VmHWM) per case, one child process each, installation built directly (see bench/retention-build.ts)');
  for (const n of sizes) {
    const dir = benchDir(`rss-${n}`);
    try {
      const built = await spawnCase('build', dir, n);
      row(
        `${fmt(n)} objects: direct build`,
        `${fmt(built.ms / 1000, 1)} s`,
        `${fmt(Number(built.out.items))} items, ${fmt(Number(built.out.files))} files`,
      );
      const only = process.env.ALP_BENCH_RSS_MODES?.split(',');
      for (const mode of MODES.filter((m) => !only || only.includes(m))) {
        const c = await spawnCase(mode, dir, n).catch((e: Error & { stderr?: string }) => ({
          kib: Number.NaN,
          ms: Number.NaN,
          out: { error: (e.stderr ?? e.message).trim().split('\n').slice(-3).join(' ').slice(0, 300) },
        }));
        row(`${fmt(n)} objects: ${mode}`, `${fmt(c.kib / 1024, 1)} MiB`, `${fmt(c.ms / 1000, 1)} s ${JSON.stringify(c.out)}`);
        results[`rss_${mode}_${n}_mib`] = c.kib / 1024;
      }
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  }
  for (const mode of MODES.filter((m) => m !== 'idle')) {
    const figures = sizes.map((n) => results[`rss_${mode}_${n}_mib`]);
    // A mode left out (ALP_BENCH_RSS_MODES) or failed at some size has no growth to report.
    if (figures.length < 2 || figures.some((f) => f === undefined || Number.isNaN(f))) continue;
    const [first, last] = [figures[0] as number, figures.at(-1) as number];
    // The last tenfold step: what the installation's size still adds once V8's young generation and
    // SQLite's page caches have reached their fixed caps (they fill between 10,000 and 100,000 objects).
    const prior = figures.at(-2) as number;
    const lastStep = last - prior;
    row(
      `${mode}: RSS growth ${fmt(sizes[0] as number)} → ${fmt(sizes.at(-1) as number)}`,
      `${fmt(last - first, 1)} MiB`,
      `${fmt(sizes.at(-2) as number)} → ${fmt(sizes.at(-1) as number)}: ${fmt(lastStep, 1)} MiB; ${
        last - first <= 64 && lastStep <= 32 ? 'flat (≤ 64 MiB in all, ≤ 32 MiB over the last step)' : 'MISS: grows with the installation'
      }`,
    );
  }
  return results;
}

if (process.argv[1] === self) {
  const [mode, dir, objects] = process.argv.slice(2) as [Mode, string, string];
  const start = Date.now();
  const out = await child(mode, dir, Number(objects));
  console.log(JSON.stringify({ kib: vmHwmKib(), ms: Date.now() - start, out }));
  process.exit(0);
}
