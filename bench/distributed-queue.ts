/**
 * Issue 16 figure for `npm run bench distributed`: TransactWriteItems per transition with the telemetry
 * queue full, on DynamoDB Local + s3rver. The queue is filled (small max_records) until every create
 * drops its record, then N transitions (propose, withdraw) run; the ContentionStore wrapper
 * (test/helpers/contention-store.ts) counts the transactWrite calls each makes, and the DynamoDB
 * engine beneath it counts the TransactWriteItems requests it sent (every attempt).
 */
import { createArtifact } from '../src/lifecycle/artifacts.ts';
import type { Principal } from '../src/lifecycle/model.ts';
import { propose, withdraw } from '../src/lifecycle/transitions.ts';
import type { DynamoItemStore } from '../src/store/dynamodb/dynamodb-item-store.ts';
import { defaultLayout } from '../src/system/layout.ts';
import { contentionInstallation } from '../test/helpers/contention-workload.ts';
import { stopDistributedServers } from '../test/helpers/distributed.ts';
import { bytesOf } from '../test/helpers/tmp.ts';
import { header, row } from './util.ts';

const agent: Principal = { id: 'bench-agent', kind: 'agent' };

export async function benchQueueFull(opts: { transitions?: number; maxRecords?: number } = {}): Promise<Record<string, number>> {
  const n = opts.transitions ?? 20;
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
    for (let i = 0; i < n; i++) {
      const id = ids[ids.length - 1 - (Math.floor(i / 2) % ids.length)] as string;
      const kind = i % 2 === 0 ? 'propose' : 'withdraw';
      ctx.clock.advance(100);
      await store.operation(kind, id, () => (kind === 'propose' ? propose(ctx, agent, id, 1) : withdraw(ctx, agent, id, 1)));
    }
    const tx = store.traces.reduce((s, t) => s + (t.calls.transactWrite ?? 0), 0);
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
      transitions: n,
      fillCreates: ids.length,
      dropped,
      transactWrite: tx / n,
      sdkTransactWriteItems: sent / n,
      modelWcu: modelWcu / n,
      reportedWcu: reportedWcu / n,
    };
    row('creates to fill the queue (max_records small)', String(ids.length));
    row(`transitions measured (propose/withdraw)`, String(n));
    row(
      'telemetry records dropped during them (counted)',
      String(dropped),
      dropped >= n ? 'the queue was full for every one' : 'NOT all dropped: queue not full',
    );
    row(
      'transactWrite calls per transition (wrapper)',
      figures.transactWrite.toFixed(2),
      figures.transactWrite === 1 ? 'goal: 1' : 'goal: 1 — NOT MET',
    );
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
