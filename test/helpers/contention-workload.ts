/**
 * The mixed workload of the contention model (issue 16, item 1), TEST AND BENCH ONLY: installations on
 * either engine whose ItemStore is a ContentionStore (test/helpers/contention-store.ts), with a layout
 * given at createContext and recorded by initInstallation, the telemetry sink attached as every entry
 * point attaches it, and a workload of many artifacts through the full lifecycle, every call labelled
 * with its operation and artifact.
 *
 * Op mix per version (the goal's): 1 create-or-version, 1 propose, 1 approve (by a human), 1 exec start,
 * 3 output uploads, 1 finish, 1 provenance; each artifact gets 2 versions (create, then version), each
 * with that lifecycle. Reads per version: the listings an agent makes (versions by state, transitions
 * of the day, runs of the day) and, on every request, the bearer token lookup an entry point makes
 * (lifecycle resolveToken, as api/auth.ts does).
 */
import path from 'node:path';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { forEachLimited } from '../../src/core/limit.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { addVersion, createArtifact, listArtifacts } from '../../src/lifecycle/artifacts.ts';
import { finishExecution, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import type { Principal } from '../../src/lifecycle/model.ts';
import { createToken, localOperator, resolveToken } from '../../src/lifecycle/principals.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import { queryIndex } from '../../src/lifecycle/queries.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { initInstallation } from '../../src/system/installation.ts';
import type { Layout } from '../../src/system/layout.ts';
import type { TelemetryLimits } from '../../src/telemetry/limits.ts';
import type { TelemetryQueue } from '../../src/telemetry/queue.ts';
import { ContentionStore } from './contention-store.ts';
import { distributedInstallation } from './distributed.ts';
import { bytesOf, tempDir } from './tmp.ts';

export type Engine = 'sqlite' | 'dynamodb';

export interface ContentionInstallation {
  engine: Engine;
  ctx: ServiceContext & { clock: ManualClock };
  store: ContentionStore;
  queue: TelemetryQueue;
  /** Clock time a request takes (runWorkload sets it). */
  msPerRequest: number;
  close(): Promise<void>;
}

export const SHARDED_8: Layout = { index_shards: 8, telemetry_shards: 8, fence_shards: 8 };
export const START = '2026-03-02T08:00:00.000Z';

/** A fresh installation on `engine` with `layout`, every ItemStore call going through a ContentionStore. */
export async function contentionInstallation(
  engine: Engine,
  layout: Layout,
  opts: { telemetry?: Partial<TelemetryLimits> } = {},
): Promise<ContentionInstallation> {
  const clock = new ManualClock(START);
  let parts: { store: ContentionStore; content: ServiceContext['content']; close: () => Promise<void> };
  if (engine === 'sqlite') {
    const dir = tempDir('alp-contention');
    const store = new ContentionStore(new SqliteItemStore(path.join(dir, 'alp.db')));
    const content = await FsContentStore.open(path.join(dir, 'content'));
    parts = {
      store,
      content,
      close: async () => {
        await content.close();
        await store.close();
      },
    };
  } else {
    const inst = await distributedInstallation(START);
    parts = { store: new ContentionStore(inst.ctx.items), content: inst.ctx.content, close: () => inst.close() };
  }
  const ctx = Object.assign(createContext({ items: parts.store, content: parts.content, clock, layout: { ...layout } }), { clock });
  await initInstallation(ctx);
  const queue = await attachAuditSinks(ctx, opts.telemetry ? { limits: opts.telemetry } : {});
  // A node opens (on first use: initialises) the queue once at startup; done here, outside any
  // labelled operation, so a one-time write is not projected as a steady rate.
  await queue.status();
  return { engine, ctx, store: parts.store, queue, msPerRequest: 250, close: parts.close };
}

export interface WorkloadOptions {
  artifacts: number;
  /** Artifacts walked at once (labelled operations interleave; AsyncLocalStorage keeps them apart). */
  concurrency?: number;
  /** Humans who approve, round robin (each decision is a human's). */
  approvers?: number;
  /**
   * Clock time each request takes (default 250 ms): the trace is one node's, so a bench sets this to
   * the goal's pace per node and time-based behaviour (the token cache, leases) is traced at that pace.
   */
  msPerRequest?: number;
}

export interface WorkloadResult {
  versions: number;
  /** Requests made (labelled operations) and the clock time they spanned. */
  requests: number;
  seconds: number;
  artifacts: string[];
  approvers: string[];
}

interface Actors {
  agent: Principal;
  agentToken: string;
  humans: { principal: Principal; token: string }[];
}

async function makeActors(ctx: ServiceContext, approvers: number): Promise<Actors> {
  const op = localOperator();
  const a = await createToken(ctx, { principal: 'fleet-agent', kind: 'agent' }, op);
  const humans = [];
  for (let i = 0; i < approvers; i++) {
    const h = await createToken(ctx, { principal: `reviewer-${i}`, kind: 'human' }, op);
    humans.push({ principal: h.principal, token: h.token });
  }
  return { agent: a.principal, agentToken: a.token, humans };
}

/** Runs the workload; every request is one labelled operation that first looks its token up. */
export async function runWorkload(inst: ContentionInstallation, opts: WorkloadOptions): Promise<WorkloadResult> {
  const { ctx, store } = inst;
  const actors = await makeActors(ctx, opts.approvers ?? 10);
  const started = ctx.clock.now().getTime();
  const before = store.traces.length;
  inst.msPerRequest = opts.msPerRequest ?? 250;
  const ids: string[] = [];
  let n = 0;
  await forEachLimited(
    Array.from({ length: opts.artifacts }, (_, i) => i),
    opts.concurrency ?? 4,
    async (i) => {
      const human = actors.humans[i % actors.humans.length] as Actors['humans'][number];
      const id = await walkArtifact(inst, actors, human, i);
      ids.push(id);
      n += 2;
      const req = <T>(kind: string, fn: () => Promise<T>) => store.operation(kind, '', () => authed(inst, actors.agentToken, fn));
      const day = ctx.clock.now().toISOString().slice(0, 10);
      await req('list-by-state', () => listArtifacts(ctx, { state: 'EXECUTED', limit: 50 }));
      await req('list-transitions', () => queryIndex(ctx, 'transitions', day, { limit: 50 }));
      await req('list-runs', () => queryIndex(ctx, 'runs', day, { limit: 50 }));
    },
  );
  return {
    versions: n,
    requests: store.traces.length - before,
    seconds: (ctx.clock.now().getTime() - started) / 1000,
    artifacts: ids,
    approvers: actors.humans.map((h) => h.principal.id),
  };
}

/**
 * A request: it takes its clock time, the entry point looks the bearer token up as api/auth.ts does
 * (cached per node for a bounded time where the code has that cache), then calls the service.
 */
async function authed<T>(inst: ContentionInstallation, token: string, fn: () => Promise<T>): Promise<T> {
  inst.ctx.clock.advance(inst.msPerRequest);
  await resolveToken(inst.ctx, token, { cached: true });
  return fn();
}

/** One artifact: create v1 and its lifecycle, then version v2 and its lifecycle. */
async function walkArtifact(inst: ContentionInstallation, actors: Actors, human: Actors['humans'][number], i: number): Promise<string> {
  const { ctx, store } = inst;
  const name = `contention-${i}-${Math.random().toString(36).slice(2, 8)}`;
  const created = await store.operation(
    'create',
    '',
    () =>
      authed(inst, actors.agentToken, () => createArtifact(ctx, actors.agent, { name, filename: 'run.sh', body: bytesOf(`echo ${i}\n`) })),
    [name],
  );
  const id = created.version.artifact_id;
  // The create's trace learns its artifact once the id exists.
  const createTrace = store.traces.find((t) => t.kind === 'create' && t.entities.includes(name));
  if (createTrace) Object.assign(createTrace, { artifact: id, entities: [id, ...createTrace.entities] });
  await lifecycle(inst, actors, human, id, name, 1);
  await store.operation(
    'version',
    id,
    () => authed(inst, actors.agentToken, () => addVersion(ctx, actors.agent, id, { filename: 'run.sh', body: bytesOf(`echo ${i}b\n`) })),
    [name],
  );
  await lifecycle(inst, actors, human, id, name, 2);
  return id;
}

async function lifecycle(
  inst: ContentionInstallation,
  actors: Actors,
  human: Actors['humans'][number],
  id: string,
  name: string,
  v: number,
) {
  const { ctx, store } = inst;
  const as = <T>(kind: string, token: string, fn: () => Promise<T>, extra: string[] = []) =>
    store.operation(kind, id, () => authed(inst, token, fn), [name, ...extra]);
  await as('propose', actors.agentToken, () => propose(ctx, actors.agent, id, v));
  await as('approve', human.token, () => decide(ctx, human.principal, id, v, { decision: 'APPROVE', evidenceRef: `CR-${v}` }), [
    human.principal.id,
  ]);
  const run = await as('exec-start', actors.agentToken, () => startExecution(ctx, actors.agent, id, v));
  // The start's trace learns its run once the id exists (operations of one artifact run one at a time).
  store.traces.findLast((t) => t.kind === 'exec-start' && t.artifact === id)?.entities.push(run.run_id);
  for (const out of ['stdout.log', 'stderr.log', 'output.json']) {
    await as('upload', actors.agentToken, () => uploadOutput(ctx, actors.agent, run.run_id, out, bytesOf(`${out} of ${id} v${v}\n`)), [
      run.run_id,
    ]);
  }
  await as('finish', actors.agentToken, () => finishExecution(ctx, actors.agent, run.run_id, { status: 'SUCCEEDED', exitCode: 0 }), [
    run.run_id,
  ]);
  await as('provenance', actors.agentToken, () => addProvenance(ctx, actors.agent, id, { action: 'generate', model: 'model-x' }));
}
