/**
 * Crash test: a writer (audit writes, each enqueueing telemetry) and an exporter (claim/acknowledge)
 * run as separate processes on one SQLite file and are killed with SIGKILL at random points, many
 * times. Afterwards the persisted counters equal what the items show, and every audit item either has
 * its record, was delivered or exhausted, or was counted as dropped. ALP_CRASH_ROUNDS sets the rounds
 * (default 12, about 25 s); a longer campaign is the same test with more rounds.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { describe, it } from 'node:test';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { createContext } from '../../src/runtime/context.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { TelemetryQueue } from '../../src/telemetry/queue.ts';
import { fromSource } from '../helpers/cli-bundle.ts';
import { assertCountersMatchItems, auditItems, queueContents } from '../helpers/telemetry-harness.ts';
import { tempDir } from '../helpers/tmp.ts';

const worker = path.join(import.meta.dirname, 'crash-worker.ts');
const rounds = Number(process.env.ALP_CRASH_ROUNDS ?? 12);

function start(args: string[]): {
  child: ChildProcess;
  ready: Promise<void>;
  exit: Promise<{ code: number | null; signal: string | null; stderr: string }>;
} {
  const child = spawn(process.execPath, [...fromSource(worker), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => {
      if (d.toString().includes('ready')) resolve();
    });
    child.on('exit', () => reject(new Error(`worker exited before it was ready: ${stderr}`)));
  });
  const exit = new Promise<{ code: number | null; signal: string | null; stderr: string }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, stderr })),
  );
  return { child, ready, exit };
}

/**
 * A writer alone (no exporter draining the queue) until the queue has dropped a record, then killed
 * mid-loop like the others: the drop path is exercised however the rounds above happened to be timed
 * (with an exporter beside it, a slow writer on a loaded machine may never fill the queue).
 */
async function writerUntilOverflow(dbPath: string, contentRoot: string, seed: number): Promise<void> {
  const writer = start([dbPath, contentRoot, 'writer', String(seed)]);
  await writer.ready;
  const reader = new SqliteItemStore(dbPath);
  try {
    const deadline = Date.now() + 60_000;
    while (((await queueContents(reader)).state.dropped as number) === 0) {
      assert.ok(Date.now() < deadline, 'a writer alone overflowed the queue within 60 s');
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    await reader.close();
    writer.child.kill('SIGKILL');
  }
  const end = await writer.exit;
  assert.equal(end.signal, 'SIGKILL', `the overflowing writer was killed, not failed: ${end.stderr}`);
}

describe('telemetry under SIGKILL', () => {
  it(`kill -9 during enqueue/claim/ack loops (${rounds} rounds): counters equal the items, and no audit item lacks its record unless a drop was counted`, async (t) => {
    const dir = tempDir('alp-telq-crash');
    const dbPath = path.join(dir, 'alp.db');
    const contentRoot = path.join(dir, 'content');
    const setup = new SqliteItemStore(dbPath);
    // Small limits so that drops and exhaustion happen too.
    await new TelemetryQueue(setup, { maxRecords: 40, maxAttempts: 2 }).open();
    await setup.close();
    let seed = 7;
    for (let round = 0; round < rounds; round++) {
      const writer = start([dbPath, contentRoot, 'writer', String(seed++)]);
      const exporter = start([dbPath, contentRoot, 'exporter', String(seed++)]);
      await Promise.all([writer.ready, exporter.ready]);
      // Kill each at its own random moment, while it is in the middle of its loop.
      const delays = [100 + ((round * 97) % 500), 100 + ((round * 151) % 500)];
      await Promise.all(
        [writer, exporter].map(async (w, i) => {
          await new Promise((r) => setTimeout(r, delays[i]));
          w.child.kill('SIGKILL');
          const end = await w.exit;
          assert.equal(end.signal, 'SIGKILL', `round ${round}: the worker was killed, not failed: ${end.stderr}`);
        }),
      );
    }
    await writerUntilOverflow(dbPath, contentRoot, seed++);
    const items = new SqliteItemStore(dbPath);
    try {
      const { state, records } = await assertCountersMatchItems(items);
      const audit = await auditItems(items);
      const { PK: _pk, SK: _sk, ...counters } = state;
      t.diagnostic(`after ${rounds} SIGKILL rounds: ${audit.size} audit items, ${JSON.stringify(counters)}`);
      assert.ok(audit.size > 50, `${audit.size} audit items written`);
      assert.ok((state.delivered as number) > 0, 'records were delivered');
      assert.ok((state.dropped as number) > 0, 'the queue overflowed at some point (writerUntilOverflow)');
      // Only audit records were enqueued: every audit event was admitted or counted as dropped.
      assert.equal(audit.size, (state.accepted as number) + (state.dropped as number), JSON.stringify(state));
      for (const r of records) assert.ok(audit.has(r.id as string), `record ${String(r.id)} belongs to an audit item`);
      const ctx = createContext({ items, content: await FsContentStore.open(contentRoot), clock: new ManualClock() });
      const artifacts = new Set([...audit.values()].map((i) => i.artifact_id as string));
      for (const id of artifacts) assert.deepEqual((await verifyArtifactAudit(ctx, id)).findings, [], `chain of ${id}`);
    } finally {
      await items.close();
    }
  });
});
