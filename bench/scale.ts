/**
 * `npm run bench scale` (issue 16): runs the contention workload (test/helpers/contention-workload.ts)
 * through the ContentionStore model, projects the recorded key traces to the goal load
 * (bench/scale-model.ts) and prints, as Markdown for docs/benchmarks.md, the top 10 items and partition
 * keys (base table and GSI1, labelled) by projected write and read units/s beside DynamoDB's per-item /
 * per-partition limits, the table totals beside the on-demand table default quota, and transactions
 * per operation. PASS only if no item and no partition key exceeds its limit.
 *
 * Engine: SQLite by default (key traces are engine-independent); ALP_SCALE_ENGINE=dynamodb runs it on
 * DynamoDB Local + s3rver. Layout: ALP_LAYOUT (e.g. index=64,telemetry=256,fence=256), else the
 * DynamoDB default (system/layout.ts DISTRIBUTED_DEFAULT): the layout the goal would run with.
 */
import { defaultLayout, type Layout } from '../src/system/layout.ts';
import type { OperationTrace } from '../test/helpers/contention-store.ts';
import { contentionInstallation, type Engine, runWorkload } from '../test/helpers/contention-workload.ts';
import { stopDistributedServers } from '../test/helpers/distributed.ts';
import { GOAL, goalMsPerRequest, LIMITS, overLimit, type Projected, type Projection, projectTraces } from './scale-model.ts';
import { fmt, header } from './util.ts';

export async function benchScale(opts: { artifacts?: number } = {}): Promise<Projection> {
  const engine = (process.env.ALP_SCALE_ENGINE ?? 'sqlite') as Engine;
  const layout: Layout = defaultLayout('dynamodb');
  const artifacts = opts.artifacts ?? 40;
  const inst = await contentionInstallation(engine, layout);
  try {
    const { versions, seconds } = await runWorkload(inst, { artifacts, concurrency: 4, msPerRequest: goalMsPerRequest() });
    const traces = inst.store.traces;
    const p = projectTraces(traces, { versions, seconds }, layout);
    printProjection(p, traces, { engine, layout, artifacts });
    return p;
  } finally {
    await inst.close();
    if (engine === 'dynamodb') await stopDistributedServers();
  }
}

function printProjection(p: Projection, traces: OperationTrace[], run: { engine: Engine; layout: Layout; artifacts: number }): void {
  const l = run.layout;
  header('scale: key traces projected to the goal load (a model, not a throughput measurement)');
  console.log(
    `\nWorkload: ${run.artifacts} artifacts × 2 versions on ${run.engine}, layout index=${l.index_shards}, telemetry=${l.telemetry_shards}, fence=${l.fence_shards}; ` +
      `${traces.length} operations, ${p.versions} versions traced in ${p.seconds.toFixed(2)} s of clock ` +
      `(${(p.versions / p.seconds).toFixed(1)} versions/s: one node's share of the goal, ${goalMsPerRequest().toFixed(2)} ms per request).`,
  );
  console.log(
    `Goal: ${GOAL.nodes} nodes, ${fmt(GOAL.versionsPerSecond)} new versions/s, ${fmt(GOAL.totalVersions)} versions; per version 1 create-or-version, 1 propose, ` +
      `1 approve, 1 exec start, 3 uploads, 1 finish, 1 provenance, 3 listings per artifact (versions by state, transitions and runs of the day), a token lookup per request as the HTTP entry point makes it. ` +
      `Hottest artifact ${GOAL.hottestArtifactVersionsPerSecond} versions/s; a human decides at most ${GOAL.humanDecisionsPerSecond}/s.`,
  );
  const all = [...p.items, ...p.partitions];
  const top = (list: Projected[], by: 'wcu' | 'rcu') => grouped(list, by).slice(0, 10);
  table('Top 10 items by projected WCU/s', top(p.items, 'wcu'), 'wcu', LIMITS.itemWcu);
  table('Top 10 items by projected RCU/s', top(p.items, 'rcu'), 'rcu', LIMITS.itemRcu);
  table('Top 10 partition keys (base table and GSI1) by projected WCU/s', top(p.partitions, 'wcu'), 'wcu', LIMITS.partitionWcu);
  table('Top 10 partition keys (base table and GSI1) by projected RCU/s', top(p.partitions, 'rcu'), 'rcu', LIMITS.partitionRcu);
  const over = overLimit(p);
  console.log('\n| table totals at the goal | projected | on-demand table default quota | |');
  console.log('|---|---:|---:|---|');
  const quota = (v: number, q: number) =>
    v > q ? `${(v / q).toFixed(1)}× the default: a quota increase (soft quota), not a design limit` : 'within';
  console.log(
    `| write units/s (base + GSI1) | ${fmt(p.tableWcu)} | ${fmt(LIMITS.tableWru)} WRU/s | ${quota(p.tableWcu, LIMITS.tableWru)} |`,
  );
  console.log(`| read units/s | ${fmt(p.tableRcu)} | ${fmt(LIMITS.tableRru)} RRU/s | ${quota(p.tableRcu, LIMITS.tableRru)} |`);
  console.log(
    `\nBase table size at ${fmt(GOAL.totalVersions)} versions: ~${fmt((p.bytesPerVersion * GOAL.totalVersions) / 1024 ** 3)} GiB ` +
      `(${fmt(p.bytesPerVersion)} B of items per version; GSI1 projects ALL, so indexed items count again there).`,
  );
  printTransactions(traces);
  const cls = (x: Projected) => `${x.scope} ${shorten(x.key)} (${x.cls}): ${fmt(x.wcu)} WCU/s, ${fmt(x.rcu)} RCU/s`;
  console.log(
    `\n${over.length === 0 ? 'PASS' : 'FAIL'}: ${over.length} of ${all.length} items and partition keys over ${fmt(LIMITS.itemWcu)} WCU/s or ${fmt(LIMITS.itemRcu)} RCU/s` +
      (over.length ? `:\n${over.map((x) => `  - ${cls(x)}`).join('\n')}` : '.'),
  );
}

type Row = Projected & { like: number };

/** Keys that differ only by an id (every artifact's HEAD) make one row: the hottest of them, and how many. */
function grouped(list: Projected[], by: 'wcu' | 'rcu'): Row[] {
  const rows = new Map<string, Row>();
  for (const p of [...list].sort((a, b) => b[by] - a[by])) {
    const k = `${p.scope}|${shortKey(p)}|${p.cls}`;
    const r = rows.get(k);
    if (r) r.like++;
    else rows.set(k, { ...p, like: 1 });
  }
  return [...rows.values()];
}

function table(title: string, rows: Row[], by: 'wcu' | 'rcu', limit: number): void {
  console.log(`\n**${title}** (limit ${fmt(limit)} ${by.toUpperCase()}/s; keys that differ only by an id: the hottest, and how many)\n`);
  console.log('| # | scope | key | class | keys | WCU/s | RCU/s | traced ops | |');
  console.log('|---:|---|---|---|---:|---:|---:|---:|---|');
  rows.forEach((r, i) => {
    const flag = r[by] > limit ? `**over ${(r[by] / limit).toFixed(1)}×**` : 'ok';
    console.log(
      `| ${i + 1} | ${r.scope} | \`${shortKey(r)}\` | ${r.cls} | ${r.like} | ${fmt(r.wcu, 1)} | ${fmt(r.rcu, 1)} | ${r.ops} | ${flag} |`,
    );
  });
}

/** A sharded key as its family (`#{s}` for the shard), any other key with its ids made generic. */
function shortKey(p: Projected): string {
  return shorten(p.cls === 'sharded' ? p.key.replace(/#\d+(?=$|\|)/, '#{s}') : p.key);
}

/** Ids made generic so the tables are stable across runs. */
function shorten(key: string): string {
  return key
    .replace(/ART#[^|#]+/, 'ART#{id}')
    .replace(/TOKEN#[0-9a-f]{64}/, 'TOKEN#{hash}')
    .replace(/INSTANCE#[^|]+/, 'INSTANCE#{node}')
    .replace(/RET#[0-9a-f]+/, 'RET#{root}')
    .replace(/RUN#[A-Za-z0-9_-]{16,}/, 'RUN#{run}')
    .replace(/contention-\d+-[a-z0-9]+/, '{name}')
    .replace(/[0-9A-HJKMNP-TV-Z]{26}/g, '{ulid}')
    .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z#\d+/, '{timestamp}#{seq}');
}

function printTransactions(traces: OperationTrace[]): void {
  const kinds = new Map<string, { ops: number; tx: number }>();
  for (const t of traces) {
    const e = kinds.get(t.kind) ?? { ops: 0, tx: 0 };
    e.ops++;
    e.tx += t.calls.transactWrite ?? 0;
    kinds.set(t.kind, e);
  }
  console.log('\n| operation | traced | TransactWriteItems per operation |');
  console.log('|---|---:|---:|');
  for (const [k, e] of kinds) if (e.tx > 0) console.log(`| ${k} | ${e.ops} | ${(e.tx / e.ops).toFixed(2)} |`);
}
