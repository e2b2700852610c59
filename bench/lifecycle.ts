/**
 * Issue 18 figures: transitions per second through the library on SQLite (synchronous=FULL), each a
 * full transaction with its audit entry and HEAD update, for 1, 4 and 16 concurrent callers on
 * distinct artifacts, with the CPU per transition (process.cpuUsage, whole process). Reference of the
 * same run: bare better-sqlite3 transactions of the transition's own shape (its operations captured
 * from one transition; the rows pre-serialised, no reads, no conditions) on a file of the same schema
 * — one transaction per COMMIT for one caller, and for N callers N of them in one COMMIT, a savepoint
 * each (what group commit can reach at best). Rounds are interleaved and each figure is a median.
 * Goals: one caller ≥ 3,000/s and ≥ 65 % of the bare transaction; 16 callers ≥ 3× one caller.
 */

import fs from 'node:fs/promises';
import path from 'node:path';
import Database from 'better-sqlite3';
import { FsContentStore } from '../src/content/fs/fs-content-store.ts';
import { systemClock } from '../src/core/clock.ts';
import { createArtifact } from '../src/lifecycle/artifacts.ts';
import { propose, transition } from '../src/lifecycle/transitions.ts';
import { createContext } from '../src/runtime/context.ts';
import type { Item, TransactOp } from '../src/store/item-store.ts';
import { prepareSchema } from '../src/store/sqlite/schema.ts';
import { SqliteItemStore } from '../src/store/sqlite/sqlite-item-store.ts';
import { benchDir, fmt, goal, header, median, row } from './util.ts';

const agent = { id: 'bench', kind: 'agent' as const };
const CALLERS = [1, 4, 16];
const ROUNDS = 5;

type Ctx = ReturnType<typeof createContext>;
interface Figure {
  rate: number;
  cpuUs: number;
}

/** Runs `n` units of work and answers units/s and CPU µs per unit. */
async function measure(n: number, fn: () => Promise<void>): Promise<Figure> {
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  await fn();
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  const used = process.cpuUsage(cpu);
  return { rate: n / (ms / 1000), cpuUs: (used.user + used.system) / n };
}

const medianOf = (fs: Figure[]): Figure => ({ rate: median(fs.map((f) => f.rate)), cpuUs: median(fs.map((f) => f.cpuUs)) });

/** The operations of one real transition's transaction (captured by wrapping transactWrite once). */
async function transitionShape(ctx: Ctx, items: SqliteItemStore): Promise<TransactOp[]> {
  const { version } = await createArtifact(ctx, agent, { name: 'shape', filename: 'f', body: [Buffer.from('x')] });
  let shape: TransactOp[] = [];
  const original = items.transactWrite.bind(items);
  items.transactWrite = async (ops: TransactOp[]) => {
    shape = ops;
    return original(ops);
  };
  await propose(ctx, agent, version.artifact_id, 1);
  items.transactWrite = original;
  return shape;
}

/** Bare transactions of that shape: each put or update one pre-serialised upsert, each check one probe. */
function bareReference(file: string, shape: TransactOp[]) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  prepareSchema(db);
  const upsert = db.prepare(
    'INSERT INTO items (PK, SK, GSI1PK, GSI1SK, attrs) VALUES (?, ?, ?, ?, ?) ON CONFLICT (PK, SK) DO UPDATE SET GSI1PK = excluded.GSI1PK, GSI1SK = excluded.GSI1SK, attrs = excluded.attrs',
  );
  const probe = db.prepare('SELECT 1 FROM items WHERE PK = ? AND SK = ?');
  const rows = shape.map((op) => {
    const item: Item = op.op === 'put' ? op.item : { ...op.key, ...(op.op === 'update' ? op.update.set : {}) };
    const { PK, SK, GSI1PK, GSI1SK, ...rest } = item;
    return { op: op.op, PK, SK, gsi: [(GSI1PK as string) ?? null, (GSI1SK as string) ?? null], attrs: JSON.stringify(rest) };
  });
  let seq = 0;
  const one = (caller: number) => {
    const n = seq++;
    for (const r of rows) {
      if (r.op === 'check') probe.get(r.PK, r.SK);
      // a put is a new row each time (the audit entry), an update rewrites the caller's own row
      else upsert.run(`${r.PK}#${caller}`, r.op === 'put' ? `${r.SK}#${n}` : r.SK, r.gsi[0], r.gsi[1], r.attrs);
    }
  };
  const [begin, savepoint, release, commit] = ['BEGIN IMMEDIATE', 'SAVEPOINT s', 'RELEASE s', 'COMMIT'].map((s) => db.prepare(s));
  return {
    /** `count` transactions, `batch` per COMMIT (each in its savepoint when batched). */
    run(count: number, batch: number): void {
      for (let done = 0; done < count; done += batch) {
        begin?.run();
        for (let c = 0; c < batch; c++) {
          if (batch > 1) savepoint?.run();
          one(c);
          if (batch > 1) release?.run();
        }
        commit?.run();
      }
    },
    close: () => db.close(),
  };
}

export async function artifacts(ctx: Ctx, n: number, label: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++)
    ids.push((await createArtifact(ctx, agent, { name: `${label}${i}`, filename: 'f', body: [Buffer.from('x')] })).version.artifact_id);
  return ids;
}

/** `per` transitions on each artifact, all artifacts concurrently (PROPOSED ⇄ DRAFT); `after` is told each commit. */
export async function transitions(ctx: Ctx, ids: string[], per: number, parity: Map<string, number>, after?: () => void): Promise<void> {
  await Promise.all(
    ids.map(async (id) => {
      for (let i = 0; i < per; i++) {
        const k = parity.get(id) ?? 0;
        parity.set(id, k + 1);
        if (k % 2 === 0) await propose(ctx, agent, id, 1);
        else await transition(ctx, agent, id, 1, 'DRAFT');
        after?.();
      }
    }),
  );
}

export async function benchLifecycle(opts: { count?: number } = {}): Promise<Record<string, number>> {
  const count = opts.count ?? 4000;
  const perRound = Math.max(16, Math.floor(count / ROUNDS / 16) * 16);
  const dir = benchDir('lifecycle');
  try {
    const items = new SqliteItemStore(path.join(dir, 'alp.db'));
    const content = await FsContentStore.open(path.join(dir, 'content'));
    const ctx = createContext({ items, content, clock: systemClock });
    header(`lifecycle: transitions (PROPOSED ⇄ DRAFT), ${ROUNDS} interleaved rounds of ${fmt(perRound)}, SQLite synchronous=FULL`);
    const shape = await transitionShape(ctx, items);
    const bare = bareReference(path.join(dir, 'bare.db'), shape);
    const ids = new Map<number, string[]>();
    for (const n of CALLERS) ids.set(n, await artifacts(ctx, n, `c${n}-`));
    const parity = new Map<string, number>();
    const figures = new Map<number, { ref: Figure[]; alp: Figure[] }>(CALLERS.map((n) => [n, { ref: [], alp: [] }]));
    for (let r = 0; r < ROUNDS; r++) {
      for (const n of CALLERS) {
        const f = figures.get(n);
        f?.ref.push(await measure(perRound, async () => bare.run(perRound, n)));
        f?.alp.push(await measure(perRound, () => transitions(ctx, ids.get(n) ?? [], perRound / n, parity)));
      }
    }
    bare.close();
    await items.close();
    return report(shape.length, figures);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

function report(ops: number, figures: Map<number, { ref: Figure[]; alp: Figure[] }>): Record<string, number> {
  const out: Record<string, number> = {};
  let one = 0;
  for (const n of CALLERS) {
    const f = figures.get(n);
    const ref = medianOf(f?.ref ?? []);
    const alp = medianOf(f?.alp ?? []);
    if (n === 1) one = alp.rate;
    const refLabel =
      n === 1 ? `reference: bare ${ops}-operation transactions, 1 per COMMIT` : `reference: bare, ${n} per COMMIT (savepoint each)`;
    row(refLabel, `${fmt(ref.rate)} /s`, `${fmt(ref.cpuUs)} µs CPU each`);
    const share = `${fmt((100 * alp.rate) / ref.rate)}% of the reference`;
    const vsOne = n === 1 ? '' : `; ${fmt(alp.rate / one, 2)}x one caller`;
    row(`transitions/s, ${n} caller${n > 1 ? 's' : ''} (${n} artifact${n > 1 ? 's' : ''})`, `${fmt(alp.rate)} /s`, `${share}${vsOne}`);
    if (n === 1) {
      goal({
        workload: 'transitions, 1 caller',
        goal: '>= 3,000/s and >= 65 % of the bare transaction',
        measured: `${fmt(alp.rate)}/s = ${share}`,
        reference: `bare ${ops}-operation transaction ${fmt(ref.rate)}/s`,
        pass: alp.rate >= 3000 && alp.rate >= 0.65 * ref.rate,
      });
    }
    if (n === 16) {
      goal({
        workload: 'transitions, 16 callers',
        goal: '>= 3x the one-caller rate (group commit)',
        measured: `${fmt(alp.rate)}/s = ${fmt(alp.rate / one, 2)}x`,
        reference: `1 caller ${fmt(one)}/s; bare, 16 per COMMIT ${fmt(ref.rate)}/s`,
        pass: alp.rate >= 3 * one,
      });
    }
    row(`  CPU per transition, ${n} caller${n > 1 ? 's' : ''}`, `${fmt(alp.cpuUs)} µs`);
    out[`ref_${n}_per_s`] = ref.rate;
    out[`transitions_${n}_per_s`] = alp.rate;
    out[`cpu_us_per_transition_${n}`] = alp.cpuUs;
  }
  return out;
}
