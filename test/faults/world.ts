/**
 * The fixed world the fault matrix runs every operation in: an embedded installation holding an
 * artifact in every state an operation needs, a telemetry outbox with records, retention candidates
 * ripe for QUARANTINE and for PURGE, a verified restore for retention approvals — and a trap: an object
 * quarantined long ago whose digest is named near the end of a large artifact's content (it must be
 * kept: a PURGE that misses the reference would lose bytes something names).
 *
 * Built once into a template directory; every case copies it to the same working path (so the
 * content root, and with it retention's observations, stay the same) and opens it through the
 * FaultyItemStore / FaultyContentStore wrappers.
 */
import fs from 'node:fs';
import path from 'node:path';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { DAY_MS, ManualClock } from '../../src/core/clock.ts';
import { type Digest, sha256 } from '../../src/core/digest.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { finishExecution, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import type { Principal } from '../../src/lifecycle/model.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { createBackup } from '../../src/recovery/backup.ts';
import { activateRestore, reconcile } from '../../src/recovery/reconcile.ts';
import { restoreBackup } from '../../src/recovery/restore.ts';
import { localTrustedHost } from '../../src/retention/host.ts';
import { scanReferences } from '../../src/retention/references.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { readEpoch } from '../../src/system/state.ts';
import type { TelemetryQueue } from '../../src/telemetry/queue.ts';
import { seededBytes } from '../torture/rng.ts';
import { FaultPlan, FaultyContentStore, FaultyItemStore } from './faulty-stores.ts';

export const agent: Principal = { id: 'agent-f', kind: 'agent' };
export const alice: Principal = { id: 'alice', kind: 'human' };
export const operator: Principal = { id: 'os:operator', kind: 'human' };

export const T0 = Date.parse('2026-03-01T00:00:00.000Z');
/** When the cases run: grace (7 d) and quarantine (30 d) periods of the template's candidates are over. */
export const CASE_TIME = T0 + 40 * DAY_MS;

export interface WorldIds {
  /** v1 DRAFT */
  draft: string;
  /** v1 PROPOSED */
  proposed: string;
  /** v1 APPROVED (approval valid for a year) */
  approved: string;
  /** v1 EXECUTING with run `run`, no outputs yet */
  executing: string;
  run: string;
  /** v1 EXECUTED with outputs */
  executed: string;
  /** every version settled (REJECTED, EXECUTED): archivable */
  settled: string;
  /** v1 DRAFT, for new versions and provenance */
  plain: string;
  /** the large artifact whose content names the trap's digest near its end */
  namer: string;
  /** QUARANTINED long ago, referenced again by `namer`'s content: must never be purged */
  trap: string;
  /** orphans QUARANTINED 32 days before the cases: PURGE candidates */
  purgeable: string[];
  /** orphans in GRACE for 32 days: QUARANTINE candidates */
  quarantinable: string[];
  /** keys referenced (directly or transitively) in the template: none may disappear */
  referenced: string[];
  /** digests of every byte string the template and the operations write as content */
  bodies: string[];
  restore: string;
}

/** Deterministic bodies: the world and the operations write only these (plus metadata snapshots). */
export function bodyBytes(label: string, size: number): Buffer {
  const seed = Number.parseInt(sha256(label).slice(7, 15), 16);
  return Buffer.concat([...seededBytes(seed, size)]);
}

/** A body as a stream of 64 KiB chunks. */
export async function* chunks(buf: Buffer, size = 64 * 1024): AsyncGenerator<Buffer> {
  for (let off = 0; off < buf.length; off += size) yield buf.subarray(off, off + size);
}

export const BODIES = {
  create: bodyBytes('op create', 200 * 1024),
  version: bodyBytes('op version', 150 * 1024),
  upload: bodyBytes('op upload', 300 * 1024),
  compensate: bodyBytes('op compensate', 90 * 1024),
};

export interface World {
  dir: string;
  ids: WorldIds;
  plan: FaultPlan;
  /** Through the faulty stores. */
  ctx: ServiceContext & { clock: ManualClock };
  queue: TelemetryQueue;
  /** The same installation without faults: for preparing and checking. */
  clean: ServiceContext & { clock: ManualClock };
  items: SqliteItemStore;
  content: FsContentStore;
  close(): Promise<void>;
}

export function retentionHost(ctx: ServiceContext, restore: string) {
  return localTrustedHost(ctx, { owner: 'fault matrix', approver: operator, evidenceRef: 'CHG-FAULT', restore, holdOnFailure: true });
}

async function open(dir: string, at: number) {
  const items = new SqliteItemStore(path.join(dir, 'alp.db'));
  const content = await FsContentStore.open(path.join(dir, 'content'));
  return { items, content, clock: new ManualClock(at) };
}

/** Builds the template at `work` (the path every case uses), then moves it to `template`. */
export async function buildTemplate(work: string, template: string): Promise<WorldIds> {
  fs.rmSync(work, { recursive: true, force: true });
  fs.rmSync(template, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  const { items, content, clock } = await open(work, T0);
  const ctx = Object.assign(createContext({ items, content, clock }), { clock });
  await attachAuditSinks(ctx);
  await initInstallation(ctx);
  // A verified restore of this installation, for retention approvals.
  const restore = path.join(work, 'proof', 'alp.db');
  const proofItems = new SqliteItemStore(restore);
  const proof = createContext({ items: proofItems, content, clock });
  await createBackup(ctx, { out: path.join(work, 'proof-backup'), actor: operator.id });
  await restoreBackup(proof, { from: path.join(work, 'proof-backup'), actor: operator.id });
  const rep = await reconcile(proof, { actor: operator.id });
  if (rep.status !== 'VERIFIED') throw new Error('the template restore did not verify');
  await activateRestore(proof, rep.reconcile_id, operator);
  await proofItems.close();

  // Retention candidates: orphans (bytes no item names), as interrupted uploads leave them.
  const bodies = new Set<string>();
  const orphan = async (key: string, label: string) => {
    const buf = bodyBytes(label, 5000);
    bodies.add((await content.put(key, chunks(buf))).digest);
    return key;
  };
  const purgeable = [
    await orphan('artifacts/01ORPHANPURGE0000000000001/v1/a.bin', 'p1'),
    await orphan('artifacts/01ORPHANPURGE0000000000002/v1/b.bin', 'p2'),
  ];
  const trap = await orphan('artifacts/01ORPHANTRAP00000000000000/v1/t.bin', 'trap');
  const host = retentionHost(ctx, restore);
  const retention = new ArtifactRetention(items, content, { clock });
  await retention.run(await readEpoch(items), 'QUARANTINE', host);
  clock.set(T0 + 8 * DAY_MS);
  const quarantinable = [
    await orphan('artifacts/01ORPHANQUAR00000000000001/v1/c.bin', 'q1'),
    await orphan('artifacts/01ORPHANQUAR00000000000002/v1/d.bin', 'q2'),
  ];
  const q = await retention.run(await readEpoch(items), 'QUARANTINE', host);
  if (!q.quarantined.includes(trap)) throw new Error('the trap was not quarantined');

  // Artifacts in every state an operation needs.
  clock.set(T0 + 9 * DAY_MS);
  const body = (label: string, size = 3000) => {
    const buf = bodyBytes(label, size);
    bodies.add(sha256(buf));
    return chunks(buf);
  };
  const make = async (name: string) =>
    (await createArtifact(ctx, agent, { name, filename: 'run.sh', body: body(name) })).version.artifact_id;
  // The namer: 200 KiB whose last bytes name the trap's digest (past the first 64 KiB read).
  const trapDigest = (await content.head(trap)) ? sha256(bodyBytes('trap', 5000)) : undefined;
  const namerBytes = Buffer.concat([bodyBytes('namer', 200 * 1024), Buffer.from(`\nrollback needs ${trapDigest as Digest}\n`)]);
  bodies.add(sha256(namerBytes));
  const namer = (await createArtifact(ctx, agent, { name: 'namer', filename: 'plan.txt', body: chunks(namerBytes) })).version.artifact_id;
  const draft = await make('draft');
  const proposed = await make('proposed');
  await propose(ctx, agent, proposed, 1);
  const approved = await make('approved');
  await propose(ctx, agent, approved, 1);
  await decide(ctx, alice, approved, 1, { decision: 'APPROVE', evidenceRef: 'CR-1', expiresInMs: 365 * DAY_MS });
  const executing = await make('executing');
  await propose(ctx, agent, executing, 1);
  await decide(ctx, alice, executing, 1, { decision: 'APPROVE', evidenceRef: 'CR-2', expiresInMs: 365 * DAY_MS });
  const run = (await startExecution(ctx, agent, executing, 1)).run_id;
  const runTo = async (id: string, version: number, status: 'SUCCEEDED' | 'FAILED') => {
    await propose(ctx, agent, id, version);
    await decide(ctx, alice, id, version, { decision: 'APPROVE', evidenceRef: 'CR-3', expiresInMs: 365 * DAY_MS });
    const r = await startExecution(ctx, agent, id, version);
    await uploadOutput(ctx, agent, r.run_id, 'stdout.log', body(`out ${id} ${version}`, 2000));
    await uploadOutput(ctx, agent, r.run_id, 'output.json', body(`json ${id} ${version}`, 100));
    await finishExecution(ctx, agent, r.run_id, { status, exitCode: status === 'SUCCEEDED' ? 0 : 1 });
  };
  const executed = await make('executed');
  await runTo(executed, 1, 'SUCCEEDED');
  const settled = await make('settled');
  await propose(ctx, agent, settled, 1);
  await decide(ctx, alice, settled, 1, { decision: 'REJECT', evidenceRef: 'CR-4' });
  await addVersion(ctx, agent, settled, { filename: 'run.sh', body: body('settled v2') });
  await runTo(settled, 2, 'FAILED');
  const plain = await make('plain');
  for (const b of Object.values(BODIES)) bodies.add(sha256(b));

  const scan = await scanReferences(ctx);
  if (!scan.referencedWhy(trap)) throw new Error('the namer does not reference the trap');
  const referenced: string[] = [];
  for (const p of ['artifacts/', 'executions/', 'archive/', 'history/segments/'])
    for await (const o of ctx.content.list(p)) if (scan.referencedWhy(o.key)) referenced.push(o.key);
  scan.close();
  const ids: WorldIds = {
    draft,
    proposed,
    approved,
    executing,
    run,
    executed,
    settled,
    plain,
    namer,
    trap,
    purgeable,
    quarantinable,
    referenced: referenced.sort(),
    bodies: [...bodies].sort(),
    restore,
  };
  await items.close();
  fs.renameSync(work, template);
  fs.writeFileSync(path.join(template, 'world.json'), JSON.stringify(ids, null, 2));
  return ids;
}

/** A fresh copy of the template at `work`, opened through the fault wrappers (plan: trace only). */
export async function openWorld(template: string, work: string, ids: WorldIds): Promise<World> {
  fs.rmSync(work, { recursive: true, force: true });
  fs.cpSync(template, work, { recursive: true });
  const { items, content, clock } = await open(work, CASE_TIME);
  const plan = new FaultPlan();
  const fi = new FaultyItemStore(items, plan);
  const fc = new FaultyContentStore(content, plan);
  const ctx = Object.assign(createContext({ items: fi, content: fc, clock }), { clock });
  const queue = await attachAuditSinks(ctx);
  const clean = Object.assign(createContext({ items, content, clock }), { clock });
  await attachAuditSinks(clean);
  return {
    dir: work,
    ids,
    plan,
    ctx,
    queue,
    clean,
    items,
    content,
    close: async () => {
      await items.close();
    },
  };
}
