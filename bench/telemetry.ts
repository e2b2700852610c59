/**
 * Issue 6 figures, SQLite synchronous=FULL:
 * - the cost the telemetry outbox adds to a transition (target: under 15% more time per transition):
 *   the same propose/withdraw loop with and without the audit sink, in alternating blocks;
 * - the cost of a transition while the queue is full (the capacity check fails, the audit write is
 *   retried with the drop counter);
 * - claim + acknowledge throughput in batches of 100.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { FsContentStore } from '../src/content/fs/fs-content-store.ts';
import { systemClock } from '../src/core/clock.ts';
import { createArtifact } from '../src/lifecycle/artifacts.ts';
import { propose, transition } from '../src/lifecycle/transitions.ts';
import { createContext, type ServiceContext } from '../src/runtime/context.ts';
import { SqliteItemStore } from '../src/store/sqlite/sqlite-item-store.ts';
import { TelemetryQueue } from '../src/telemetry/queue.ts';
import { benchDir, fmt, header, row, timed } from './util.ts';

const agent = { id: 'bench', kind: 'agent' as const };

async function toggles(ctx: ServiceContext, id: string, n: number): Promise<number> {
  const t = await timed(async () => {
    for (let i = 0; i < n; i++) {
      if (i % 2 === 0) await propose(ctx, agent, id, 1);
      else await transition(ctx, agent, id, 1, 'DRAFT');
    }
  });
  return t.ms;
}

interface Paired {
  usBare: number;
  usSink: number;
  /** Median over the paired blocks of (time with the outbox / time without) - 1, in percent. */
  overhead: number;
  cpuOverhead: number;
  cpuUsAdded: number;
}

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/**
 * The same propose/withdraw loop on one artifact with and without the outbox, in alternating paired
 * blocks, so drift (WAL growth, page cache, other load on the machine) hits both sides alike; the
 * figure is the median of the per-pair ratios. With `drain`, an exporter empties the queue between
 * blocks (untimed): the steady state of an installation whose exporter keeps up.
 */
async function paired(dir: string, name: string, count: number, drain: boolean): Promise<Paired> {
  const items = new SqliteItemStore(path.join(dir, `${name}.db`));
  const content = await FsContentStore.open(path.join(dir, `${name}-content`));
  const queue = new TelemetryQueue(items, { maxRecords: 10_000_000, maxBytes: 1024 * 1024 * 1024 }, { clock: systemClock });
  await queue.open();
  const bare = createContext({ items, content, clock: systemClock });
  const withSink = createContext({ items, content, clock: systemClock, auditSinks: [queue.auditSink()] });
  const id = (await createArtifact(bare, agent, { name, filename: 'f', body: [Buffer.from('x')] })).version.artifact_id;
  const empty = async () => {
    for (;;) {
      const batch = await queue.claim(1, 'bench', systemClock.now(), { maxRecords: 1000 });
      if (batch.length === 0) return;
      await queue.acknowledgeAll(
        1,
        'bench',
        batch.map((r) => ({ id: r.id, leaseToken: r.leaseToken })),
        systemClock.now(),
      );
    }
  };
  const blocks = 100;
  const per = Math.max(2, Math.floor(count / blocks / 2) * 2);
  let msBare = 0;
  let msSink = 0;
  let cpuBare = 0;
  let cpuSink = 0;
  const ratios: number[] = [];
  await toggles(bare, id, 200); // warm-up
  await toggles(withSink, id, 200);
  for (let b = 0; b < blocks; b++) {
    if (drain) await empty();
    let c = cpuMs();
    const a = await toggles(bare, id, per);
    cpuBare += cpuMs() - c;
    c = cpuMs();
    const w = await toggles(withSink, id, per);
    cpuSink += cpuMs() - c;
    msBare += a;
    msSink += w;
    ratios.push(w / a);
  }
  await items.close();
  ratios.sort((x, y) => x - y);
  const median = ((ratios[(blocks - 1) >> 1] as number) + (ratios[blocks >> 1] as number)) / 2;
  const n = per * blocks;
  return {
    usBare: (1000 * msBare) / n,
    usSink: (1000 * msSink) / n,
    overhead: 100 * (median - 1),
    cpuOverhead: (100 * (cpuSink - cpuBare)) / cpuBare,
    cpuUsAdded: (1000 * (cpuSink - cpuBare)) / n,
  };
}

function report(label: string, r: Paired): void {
  console.log(`  ${label}`);
  row('  transition without the outbox', `${fmt(r.usBare)} µs`, `${fmt((1e6 / r.usBare) | 0)} /s`);
  row('  transition with the outbox', `${fmt(r.usSink)} µs`, `${fmt((1e6 / r.usSink) | 0)} /s`);
  row('  added time (median of paired blocks)', `${fmt(r.overhead, 1)} %`, 'target < 15%');
  row('  added CPU time', `${fmt(r.cpuOverhead, 1)} %`, `${fmt(r.cpuUsAdded)} µs per transition`);
}

export async function benchTelemetry(opts: { count?: number; records?: number } = {}): Promise<Record<string, number>> {
  const count = opts.count ?? 4000;
  const records = opts.records ?? 10_000;
  const dir = benchDir('telemetry');
  try {
    header(`telemetry: ${fmt(count)} transitions each with and without the outbox, SQLite synchronous=FULL`);
    const drained = await paired(dir, 'drained', count, true);
    report('an exporter keeps the queue drained:', drained);
    const growing = await paired(dir, 'growing', count, false);
    report(`no exporter, the queue grows to ${fmt(count + 200)} records:`, growing);
    const usBare = growing.usBare;
    const n = count;
    const content = await FsContentStore.open(path.join(dir, 'content'));

    // A full queue: every transition's capacity check fails and the write is retried with the drop.
    const fullItems = new SqliteItemStore(path.join(dir, 'full.db'));
    const fullQueue = new TelemetryQueue(fullItems, { maxRecords: 1 }, { clock: systemClock });
    const full = createContext({ items: fullItems, content, clock: systemClock, auditSinks: [fullQueue.auditSink()] });
    const fid = (await createArtifact(full, agent, { name: 'full', filename: 'f', body: [Buffer.from('x')] })).version.artifact_id;
    const fullN = Math.min(n, 2000);
    const usFull = (1000 * (await toggles(full, fid, fullN))) / fullN;
    row(
      'transition with the outbox full (counted drop)',
      `${fmt(usFull)} µs`,
      `${fmt((100 * (usFull - usBare)) / usBare, 1)} % over no outbox`,
    );
    await fullItems.close();

    header(`telemetry: claim + acknowledge of ${fmt(records)} records in batches of 100`);
    const claimItems = new SqliteItemStore(path.join(dir, 'claim.db'));
    const q = new TelemetryQueue(claimItems, { maxRecords: 1_000_000 }, { clock: systemClock });
    const enq = await timed(async () => {
      for (let i = 0; i < records; i++)
        await q.enqueue(`rec-${i}`, { i, kind: 'bench', at: '2026-01-01T00:00:00.000Z' }, systemClock.now());
    });
    row('custom enqueue (one transaction each)', `${fmt(records / (enq.ms / 1000))} /s`);
    let claimMs = 0;
    let ackMs = 0;
    let done = 0;
    for (;;) {
      const c = await timed(() => q.claim(1, 'bench', systemClock.now(), { maxRecords: 100, leaseMs: 60_000 }));
      claimMs += c.ms;
      if (c.value.length === 0) break;
      const a = await timed(async () => {
        for (const r of c.value) await q.acknowledge(1, 'bench', r.id, r.leaseToken, systemClock.now());
      });
      ackMs += a.ms;
      done += c.value.length;
    }
    const s = await q.counters();
    row('claim (batches of 100)', `${fmt(done / (claimMs / 1000))} records/s`, `${fmt(claimMs / Math.ceil(done / 100), 1)} ms per batch`);
    row('acknowledge (one transaction each)', `${fmt(done / (ackMs / 1000))} records/s`);
    row(
      'claim + acknowledge',
      `${fmt(done / ((claimMs + ackMs) / 1000))} records/s`,
      `delivered ${fmt(s.delivered)}, live ${s.live_records}`,
    );
    for (let i = 0; i < records; i++)
      await q.enqueue(`again-${i}`, { i, kind: 'bench', at: '2026-01-01T00:00:00.000Z' }, systemClock.now());
    const all = await timed(async () => {
      for (;;) {
        const batch = await q.claim(1, 'bench', systemClock.now(), { maxRecords: 100, leaseMs: 60_000 });
        if (batch.length === 0) break;
        const acks = batch.map((r) => ({ id: r.id, leaseToken: r.leaseToken }));
        await q.acknowledgeAll(1, 'bench', acks, systemClock.now());
      }
    });
    const after = await q.counters();
    const batchRate = records / (all.ms / 1000);
    row(
      'claim + acknowledgeAll (batches of 100)',
      `${fmt(batchRate)} records/s`,
      `delivered ${fmt(after.delivered)}, live ${after.live_records}`,
    );
    await claimItems.close();
    return {
      transition_us: drained.usBare,
      transition_outbox_us: drained.usSink,
      outbox_overhead_pct: drained.overhead,
      outbox_overhead_growing_pct: growing.overhead,
      transition_full_us: usFull,
      claim_ack_per_s: done / ((claimMs + ackMs) / 1000),
      claim_ack_all_per_s: batchRate,
    };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
