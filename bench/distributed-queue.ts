/**
 * Issue 16 figure for `npm run bench distributed`: TransactWriteItems per transition with the telemetry
 * queue full, on DynamoDB Local + s3rver. The queue is filled (small max_records) until every create
 * drops its record, then N transitions (propose, withdraw, approve, exec start, exec finish) run on
 * artifacts whose shard is full; the ContentionStore wrapper
 * (test/helpers/contention-store.ts) counts the transactWrite calls each makes, and the DynamoDB
 * engine beneath it counts the TransactWriteItems requests it sent (every attempt).
 */
import { decide } from '../src/lifecycle/approvals.ts';
import { createArtifact } from '../src/lifecycle/artifacts.ts';
import { finishExecution, startExecution } from '../src/lifecycle/executions.ts';
import type { Principal } from '../src/lifecycle/model.ts';
import { propose, withdraw } from '../src/lifecycle/transitions.ts';
import type { DynamoItemStore } from '../src/store/dynamodb/dynamodb-item-store.ts';
import { defaultLayout } from '../src/system/layout.ts';
import { contentionInstallation } from '../test/helpers/contention-workload.ts';
import { stopDistributedServers } from '../test/helpers/distributed.ts';
import { bytesOf } from '../test/helpers/tmp.ts';
import { header, row } from './util.ts';

const agent: Principal = { id: 'bench-agent', kind: 'agent' };
const human: Principal = { id: 'bench-human', kind: 'human' };

export async function benchQueueFull(opts: { transitions?: number; maxRecords?: number } = {}): Promise<Record<string, number>> {
  const n = opts.transitions ?? 24;
  const layout = defaultLayout('dynamodb');
  const inst = await contentionInstallation('dynamodb', layout, { telemetry: { maxRecords: opts.maxRecords ?? 8 } });
  const { ctx, store, queue } = inst;
  const sdk = store.inner as DynamoItemStore;
  try {
    header(`distributed: TransactWriteItems per transition with the telemetry queue full (layout telemetry=${layout.telemetry_shards})`);
    const ids: string[] = [];
    // Fill: create artifacts until 20 creates in a row dropped their record (every shard hit is full).
    let streak = 0;
    for (let i = 0; streak < 20 && i < 5000; i++) {
      const before = (await queue.counters()).dropped;
      const { version } = await createArtifact(ctx, agent, { name: `queue-full-${i}`, filename: 'f.sh', body: bytesOf(`fill ${i}\n`) });
      ids.push(version.artifact_id);
      streak = (await queue.counters()).dropped > before ? streak + 1 : 0;
    }
    const dropped0 = (await queue.counters()).dropped;
    store.reset();
    sdk.resetStats();
    // Every kind of transition, on artifacts whose create found its shard full: propose, withdraw,
    // propose, approve (quorum), exec start and finish (these two carry two audit events each).
    for (let i = 0; store.traces.length < n; i++) {
      const id = ids[ids.length - 1 - (i % ids.length)] as string;
      const steps: [string, () => Promise<unknown>][] = [
        ['propose', () => propose(ctx, agent, id, 1)],
        ['withdraw', () => withdraw(ctx, agent, id, 1)],
        ['propose', () => propose(ctx, agent, id, 1)],
        ['approve', () => decide(ctx, human, id, 1, { decision: 'APPROVE', evidenceRef: 'bench' })],
        ['exec start', async () => (runId = (await startExecution(ctx, agent, id, 1)).run_id)],
        ['exec finish', () => finishExecution(ctx, agent, runId, { status: 'SUCCEEDED', exitCode: 0 })],
      ];
      let runId = '';
      for (const [kind, fn] of steps) {
        ctx.clock.advance(100);
        await store.operation(kind, id, fn);
      }
    }
    const measured = store.traces.length;
    const tx = store.traces.reduce((s, t) => s + (t.calls.transactWrite ?? 0), 0);
    const perKind = new Map<string, { ops: number; tx: number }>();
    for (const t of store.traces) {
      const e = perKind.get(t.kind) ?? { ops: 0, tx: 0 };
      perKind.set(t.kind, { ops: e.ops + 1, tx: e.tx + (t.calls.transactWrite ?? 0) });
    }
    const stats = sdk.stats();
    const sent = stats.TransactWriteItems ?? 0;
    // The model's write units for those transactions (base + GSI1) beside what DynamoDB Local reported.
    const modelWcu = store.traces.reduce(
      (s, t) => s + t.accesses.filter((a) => a.call === 'transactWrite').reduce((u, a) => u + a.wcu, 0),
      0,
    );
    const reportedWcu = stats['TransactWriteItems.capacityUnits'] ?? 0;
    const dropped = (await queue.counters()).dropped - dropped0;
    const figures = {
      transitions: measured,
      fillCreates: ids.length,
      dropped,
      transactWrite: tx / measured,
      sdkTransactWriteItems: sent / measured,
      modelWcu: modelWcu / measured,
      reportedWcu: reportedWcu / measured,
    };
    row('creates to fill the queue (max_records small)', String(ids.length));
    row('transitions measured (5 kinds, below)', String(measured));
    row(
      'telemetry records dropped during them (counted)',
      String(dropped),
      dropped >= measured ? 'the queue was full for every one' : 'NOT all dropped: queue not full',
    );
    row(
      'transactWrite calls per transition (wrapper)',
      figures.transactWrite.toFixed(2),
      figures.transactWrite === 1 ? 'goal: 1' : 'goal: 1 — NOT MET',
    );
    for (const [kind, e] of perKind) row(`  ${kind}`, (e.tx / e.ops).toFixed(2), `${e.ops} measured`);
    row('TransactWriteItems requests per transition (SDK)', figures.sdkTransactWriteItems.toFixed(2), 'every attempt the engine sent');
    row(
      'write units per transition: model / DynamoDB Local',
      `${figures.modelWcu.toFixed(1)} / ${figures.reportedWcu.toFixed(1)}`,
      'model incl. GSI1 entries and cancelled attempts',
    );
    return figures;
  } finally {
    await inst.close();
    await stopDistributedServers();
  }
}
