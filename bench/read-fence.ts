/**
 * Issue 17 item 3 (readers fenced): the read path's cost of `assertReadable`, one eventually consistent
 * get of the artifact's fence shard per read. Downloads per second of a 4 KiB version, SQLite +
 * directory, through the library: the fenced read (`openVersionContent`, which calls assertReadable
 * first) against the same read without the check (resolveVersion + the verified content stream,
 * exactly what openVersionContent did before), alternating read by read in one run, each read drained
 * to its end (digest verified). Run: `node --import tsx bench/read-fence.ts [reads per round]`.
 */
import path from 'node:path';
import { FsContentStore } from '../src/content/fs/fs-content-store.ts';
import { systemClock } from '../src/core/clock.ts';
import { getOriginalOrArchived } from '../src/lifecycle/archived-read.ts';
import { createArtifact, openVersionContent, resolveVersion } from '../src/lifecycle/artifacts.ts';
import { createContext, type ServiceContext } from '../src/runtime/context.ts';
import { SqliteItemStore } from '../src/store/sqlite/sqlite-item-store.ts';
import { assertReadable } from '../src/system/fence.ts';
import { initInstallation } from '../src/system/installation.ts';
import { benchDir, fmt, header, row, timed } from './util.ts';

const agent = { id: 'bench', kind: 'agent' as const };

async function drain(s: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of s) {
  }
}

async function unfenced(ctx: ServiceContext, id: string): Promise<void> {
  const v = await resolveVersion(ctx, id, 1);
  const keys = { original: v.content_key, archive: v.archive_key as string | undefined };
  await drain(await getOriginalOrArchived(ctx.content, keys, v.content_hash, { expectedSize: v.size }));
}

async function fenced(ctx: ServiceContext, id: string): Promise<void> {
  await drain((await openVersionContent(ctx, id, 1)).stream);
}

export async function benchReadFence(opts: { reads?: number; rounds?: number } = {}): Promise<Record<string, number>> {
  const reads = opts.reads ?? 500;
  const rounds = opts.rounds ?? 20;
  const dir = benchDir('read-fence');
  const items = new SqliteItemStore(path.join(dir, 'alp.db'));
  const content = await FsContentStore.open(path.join(dir, 'content'));
  const ctx = createContext({ items, content, clock: systemClock });
  await initInstallation(ctx);
  const { version } = await createArtifact(ctx, agent, { name: 'r', filename: 'r.bin', body: [Buffer.alloc(4096, 7)] });
  const id = version.artifact_id;
  header(`read fence: ${fmt(reads)} reads × ${rounds} rounds of a 4 KiB version, SQLite + directory`);
  for (let i = 0; i < 200; i++) await Promise.all([unfenced(ctx, id), fenced(ctx, id)]); // warm-up
  // Alternating read by read (each timed on its own), so the machine's load falls on both alike.
  const ms = { before: 0, after: 0 };
  const per = { before: [] as number[], after: [] as number[] };
  for (let i = 0; i < reads * rounds; i++) {
    for (const [kind, read] of (i % 2 === 0
      ? [
          ['before', unfenced],
          ['after', fenced],
        ]
      : [
          ['after', fenced],
          ['before', unfenced],
        ]) as Array<['before' | 'after', typeof fenced]>) {
      const t = process.hrtime.bigint();
      await read(ctx, id);
      const took = Number(process.hrtime.bigint() - t) / 1e6;
      ms[kind] += took;
      per[kind].push(took);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  const check = await timed(async () => {
    for (let i = 0; i < reads * rounds; i++) await assertReadable(ctx, { kind: 'artifacts', ids: [id] });
  });
  const before = (reads * rounds) / (ms.before / 1000);
  const after = (reads * rounds) / (ms.after / 1000);
  row('before: read without the readers check', `${fmt(before)} /s (${((ms.before * 1000) / (reads * rounds)).toFixed(1)} µs/read)`);
  row('after: assertReadable + read', `${fmt(after)} /s (${((ms.after * 1000) / (reads * rounds)).toFixed(1)} µs/read)`);
  row(
    'cost of the check',
    `${(((ms.after - ms.before) * 1000) / (reads * rounds)).toFixed(1)} µs/read (${(100 * (1 - after / before)).toFixed(1)} % fewer reads/s)`,
  );
  row('median read: before / after', `${(median(per.before) * 1000).toFixed(1)} / ${(median(per.after) * 1000).toFixed(1)} µs`);
  row('the check alone (assertReadable)', `${((check.ms * 1000) / (reads * rounds)).toFixed(1)} µs/call`);
  await items.close();
  await content.close();
  return { before_per_s: before, after_per_s: after };
}

if (import.meta.url === `file://${process.argv[1]}`) await benchReadFence({ reads: Number(process.argv[2] ?? 500) });
