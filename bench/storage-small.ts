/**
 * Issue 18 item 1: 4 KiB creations through the library (createArtifact, then addVersion, on SQLite +
 * fs) with 1 and 4 callers, against the disk's single-fsync rate (4 KiB written and fsynced in a loop,
 * one caller) measured in interleaved rounds of the same run; medians. The fs write path alone (the
 * content and metadata.json of a creation staged and published, no transaction) is a diagnostic row.
 * Goal: 4 callers >= 1,000 creations/s and >= 45 % of the single-fsync rate.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ContentStore } from '../src/content/content-store.ts';
import { addVersion, createArtifact } from '../src/lifecycle/artifacts.ts';
import type { ServiceContext } from '../src/runtime/context.ts';
import { fmt, goal, header, row, timed } from './util.ts';

const agent = { id: 'bench', kind: 'agent' as const };
const SMALL = Buffer.alloc(4096, 7);
const GOAL_PER_S = 1000;
const GOAL_OF_FSYNC = 0.45;

export interface SmallCreationFigures {
  fsync_per_s: number;
  creations_1_per_s: number;
  creations_4_per_s: number;
  versions_4_per_s: number;
  fs_path_4_per_s: number;
  fs_in_place_4_per_s: number;
}

/** The reference: one caller writing 4 KiB and fsyncing it, over and over (the disk's single-fsync rate). */
async function fsyncRate(dir: string, n: number): Promise<number> {
  const f = await fs.open(path.join(dir, 'fsync-ref'), 'w');
  try {
    const t = await timed(async () => {
      for (let i = 0; i < n; i++) {
        await f.write(SMALL);
        await f.sync();
      }
    });
    return n / (t.ms / 1000);
  } finally {
    await f.close();
    await fs.rm(path.join(dir, 'fsync-ref'));
  }
}

/** `total` operations spread over `callers` concurrent loops; operations per second. */
async function concurrent(total: number, callers: number, op: (caller: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const t = await timed(() =>
    Promise.all(
      Array.from({ length: callers }, async (_, caller) => {
        while (next++ < total) await op(caller);
      }),
    ),
  );
  return total / (t.ms / 1000);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

export async function benchSmallCreations(
  ctx: ServiceContext,
  content: ContentStore,
  dir: string,
  opts: { perRound: number; rounds: number },
): Promise<SmallCreationFigures> {
  header(`storage: 4 KiB creations through the library (SQLite + fs), 1 and 4 callers, ${opts.rounds} interleaved rounds, medians`);
  const runs: Record<keyof SmallCreationFigures, number[]> = {
    fsync_per_s: [],
    creations_1_per_s: [],
    creations_4_per_s: [],
    versions_4_per_s: [],
    fs_path_4_per_s: [],
    fs_in_place_4_per_s: [],
  };
  let seq = 0;
  const create = () => createArtifact(ctx, agent, { name: `small-${seq++}`, filename: 'f.txt', body: [SMALL] });
  const targets = await Promise.all(Array.from({ length: 4 }, () => create()));
  const meta = Buffer.from(`${JSON.stringify({ size: SMALL.length, pad: 'x'.repeat(300) })}\n`);
  await concurrent(40, 4, () => create());
  for (let r = 0; r < opts.rounds; r++) {
    runs.fsync_per_s.push(await fsyncRate(dir, opts.perRound));
    runs.creations_1_per_s.push(await concurrent(opts.perRound, 1, () => create()));
    runs.creations_4_per_s.push(await concurrent(opts.perRound * 2, 4, () => create()));
    runs.versions_4_per_s.push(
      await concurrent(opts.perRound * 2, 4, (caller) =>
        addVersion(ctx, agent, (targets[caller] as { head: { artifact_id: string } }).head.artifact_id, {
          filename: 'f.txt',
          body: [SMALL],
        }),
      ),
    );
    for (const [figures, fresh] of [
      [runs.fs_path_4_per_s, false],
      [runs.fs_in_place_4_per_s, true],
    ] as const) {
      figures.push(
        await concurrent(opts.perRound * 2, 4, async () => {
          const id = `fs-${seq++}`;
          const a = await content.stage(`artifacts/${id}/v1/f.txt`, [SMALL], { fresh });
          const m = await content.stage(`artifacts/${id}/v1/metadata.json`, [meta], { fresh });
          await content.publish([a, m]);
        }),
      );
    }
  }
  const f = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, median(v)])) as unknown as SmallCreationFigures;
  const share = (perS: number) => `${fmt((100 * perS) / f.fsync_per_s)}% of the single-fsync rate`;
  row('reference: 4 KiB write + fsync, one caller', `${fmt(f.fsync_per_s)} /s`, 'the disk’s single-fsync rate');
  row('4 KiB createArtifact, 1 caller', `${fmt(f.creations_1_per_s)} /s`, share(f.creations_1_per_s));
  row('4 KiB createArtifact, 4 callers', `${fmt(f.creations_4_per_s)} /s`, share(f.creations_4_per_s));
  goal({
    workload: '4 KiB creations, library, 4 callers',
    goal: `>= ${fmt(GOAL_PER_S)}/s and >= ${100 * GOAL_OF_FSYNC} % of the disk's single-fsync rate`,
    measured: `${fmt(f.creations_4_per_s)}/s = ${share(f.creations_4_per_s)}`,
    reference: `4 KiB write + fsync, one caller ${fmt(f.fsync_per_s)}/s`,
    pass: f.creations_4_per_s >= GOAL_PER_S && f.creations_4_per_s >= GOAL_OF_FSYNC * f.fsync_per_s,
  });
  row('4 KiB addVersion, 4 callers (4 artifacts)', `${fmt(f.versions_4_per_s)} /s`, share(f.versions_4_per_s));
  row('fs write path alone, staged aside (temp + link, two rounds), 4 callers', `${fmt(f.fs_path_4_per_s)} /s`, share(f.fs_path_4_per_s));
  row(
    'fs write path alone, fresh keys in place (one round, what a creation uses), 4 callers',
    `${fmt(f.fs_in_place_4_per_s)} /s`,
    share(f.fs_in_place_4_per_s),
  );
  return f;
}
