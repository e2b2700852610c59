/**
 * Installations for the retention suite, embedded and distributed, with what the seed's rules need:
 * planting unreferenced objects, a verified same-installation restore, and a trusted host; the run and
 * the crashed purge the retention tests share; the archive tests' two profiles; and the CLI's
 * plan-then-run against a data directory restored and activated elsewhere.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after } from 'node:test';
import type { ContentStore } from '../../src/content/content-store.ts';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import type { S3ContentStore } from '../../src/content/s3/s3-content-store.ts';
import { DAY_MS, type ManualClock } from '../../src/core/clock.ts';
import type { Digest } from '../../src/core/digest.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { createBackup } from '../../src/recovery/backup.ts';
import { activateRestore, reconcile } from '../../src/recovery/reconcile.ts';
import { restoreBackup } from '../../src/recovery/restore.ts';
import { localTrustedHost } from '../../src/retention/host.ts';
import type { Observation, RetentionApproval } from '../../src/retention/model.ts';
import { ArtifactRetention, type MaintenanceCommitter, type RetentionHost, type RetentionResult } from '../../src/retention/retention.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import { DynamoItemStore } from '../../src/store/dynamodb/dynamodb-item-store.ts';
import type { ItemStore } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { readFence } from '../../src/system/fence.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { readEpoch } from '../../src/system/state.ts';
import { alpJson, type CliResult, runAlp } from './cli.ts';
import { embeddedContext } from './context.ts';
import { distributedInstallation, distributedServers } from './distributed.ts';
import { behindGlacierModel, type GlacierProxy, startGlacierProxy } from './s3-glacier-proxy.ts';
import { bytesOf, tempDir } from './tmp.ts';
import { agent, alice } from './walk.ts';

export const operator = { id: 'os:operator', kind: 'human' as const };

export interface RetentionInstallation {
  ctx: ServiceContext & { clock: ManualClock };
  /** Creates a backup → restore → VERIFIED reconcile → activation; returns what an approval names. */
  verifiedRestore(): Promise<string>;
  /** Opens the same metadata with another content root location (a restore into another root). */
  withOtherRoot(): Promise<ServiceContext & { clock: ManualClock }>;
  close(): Promise<void>;
}

export interface Engine {
  name: string;
  open(): Promise<RetentionInstallation>;
}

async function restoreInto(source: ServiceContext, target: ServiceContext): Promise<void> {
  const out = path.join(tempDir('alp-backup'), 'b');
  await createBackup(source, { out, actor: operator.id });
  await restoreBackup(target, { from: out, actor: operator.id });
  const report = await reconcile(target, { actor: operator.id });
  if (report.status !== 'VERIFIED') throw new Error(`test restore did not verify: ${JSON.stringify(report.findings.slice(0, 3))}`);
  await activateRestore(target, report.reconcile_id, operator);
}

export const embedded: Engine = {
  name: 'sqlite + fs',
  open: async () => {
    const ctx = await embeddedContext();
    await initInstallation(ctx);
    return {
      ctx,
      verifiedRestore: async () => {
        const file = path.join(tempDir('alp-restore'), 'alp.db');
        const items = new SqliteItemStore(file);
        await restoreInto(ctx, createContext({ items, content: ctx.content, clock: ctx.clock }));
        await items.close();
        return file;
      },
      withOtherRoot: async () => {
        const content = await FsContentStore.open(path.join(ctx.dir, 'content'));
        // Same bytes, another root identity: what a restore into a different directory looks like.
        const other = Object.create(content) as ContentStore;
        Object.defineProperty(other, 'location', { value: `${content.location}#restored-elsewhere` });
        return Object.assign(createContext({ items: ctx.items, content: other, clock: ctx.clock }), { clock: ctx.clock });
      },
      close: async () => ctx.items.close(),
    };
  },
};

export const distributed: Engine = {
  name: 'dynamodb + s3',
  open: async () => {
    const inst = await distributedInstallation();
    // Approvals name restores by URL; opening one uses the standard credential chain.
    for (const [k, v] of Object.entries(inst.env)) if (k.startsWith('AWS_')) process.env[k] ??= v;
    await initInstallation(inst.ctx);
    return {
      ctx: inst.ctx,
      verifiedRestore: async () => {
        const { dynamo, s3 } = await distributedServers();
        const table = dynamo.tableName('restore');
        const items: ItemStore = await DynamoItemStore.open(
          { engine: 'dynamodb', table, region: dynamo.region, endpoint: dynamo.endpoint },
          { credentials: s3.credentials },
        );
        await (items as DynamoItemStore).prepare();
        await restoreInto(inst.ctx, createContext({ items, content: inst.ctx.content, clock: inst.ctx.clock }));
        await items.close();
        return `dynamodb://${table}?region=${dynamo.region}&endpoint=${encodeURIComponent(dynamo.endpoint)}`;
      },
      withOtherRoot: async () => {
        const other = Object.create(inst.ctx.content) as ContentStore;
        Object.defineProperty(other, 'location', { value: `${inst.ctx.content.location}#restored-elsewhere` });
        return Object.assign(createContext({ items: inst.ctx.items, content: other, clock: inst.ctx.clock }), { clock: inst.ctx.clock });
      },
      close: inst.close,
    };
  },
};

export interface HostOptions {
  restore: string;
  pins?: string[];
  approve?: (plan: Parameters<RetentionHost['approve']>[0], digest: string) => RetentionApproval | undefined;
  /** Runs after the plan, before the fence is taken (while the approval is being asked). */
  during?: () => Promise<void>;
  /** Runs under the fence, before the run re-validates and acts. */
  inside?: () => Promise<void>;
  holdOnFailure?: boolean;
}

/**
 * The local trusted host, optionally with a custom approval (to test the checks) and hooks at the two
 * places a run can be observed from outside: before the fence (in approve) and under it.
 */
export function host(ctx: ServiceContext, o: HostOptions): RetentionHost {
  const base = localTrustedHost(ctx, {
    owner: 'retention test',
    approver: operator,
    evidenceRef: 'CHG-1',
    restore: o.restore,
    ...(o.pins ? { pins: o.pins } : {}),
    ...(o.holdOnFailure !== undefined ? { holdOnFailure: o.holdOnFailure } : {}),
  });
  return {
    ...base,
    approve: async (plan, digest) => {
      if (o.during) await o.during();
      return o.approve ? o.approve(plan, digest) : base.approve(plan, digest);
    },
    withMaintenance: (epoch, fn, run) =>
      base.withMaintenance(
        epoch,
        async (m?: MaintenanceCommitter) => {
          if (o.inside) await o.inside();
          return fn(m);
        },
        run,
      ),
  };
}

export async function epochOf(ctx: ServiceContext): Promise<number> {
  return readEpoch(ctx.items);
}

/**
 * Inside a describe(): `fresh()` opens a new installation of `engine`; every one opened is closed after
 * the suite.
 */
export function installationsOf(engine: Engine): () => Promise<RetentionInstallation> {
  const opened: RetentionInstallation[] = [];
  after(async () => {
    for (const i of opened) await i.close();
  });
  return async () => {
    const i = await engine.open();
    opened.push(i);
    return i;
  };
}

/** Puts `data` at `key` with nothing naming it; returns its digest. */
export async function plantOrphan(i: RetentionInstallation, key: string, data: string): Promise<Digest> {
  return (await i.ctx.content.put(key, bytesOf(data))).digest;
}

/** One run with the test host (`pins`: what the host supplies, as `--pin` does). */
export async function runRetention(
  i: RetentionInstallation,
  action: 'QUARANTINE' | 'PURGE',
  restore: string,
  pins: string[] = [],
): Promise<RetentionResult> {
  const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock, layout: i.ctx.layout });
  try {
    return await retention.run(await epochOf(i.ctx), action, host(i.ctx, { restore, pins }));
  } finally {
    await retention.close();
  }
}

export async function observationOf(i: RetentionInstallation, key: string): Promise<Observation | undefined> {
  return (await new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock }).observations()).get(key);
}

/**
 * A PURGE through the CLI's host (holdOnFailure: the fence stays held when the purge dies midway) that
 * dies at its first delete, after PREPARED, as a killed process would. Deletes work again afterwards.
 */
export async function purgeDiesAtFirstDelete(i: RetentionInstallation, restore: string, pins: string[] = []): Promise<void> {
  const content = i.ctx.content;
  const realDelete = content.delete.bind(content);
  content.delete = async () => {
    throw new Error('killed before the first unlink');
  };
  try {
    const cliHost = localTrustedHost(i.ctx, {
      owner: 'retention os:operator',
      approver: operator,
      evidenceRef: 'CHG-PURGE',
      restore,
      pins,
      holdOnFailure: true,
    });
    const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
    await assert.rejects(retention.run(await epochOf(i.ctx), 'PURGE', cliHost), /killed before the first unlink/);
  } finally {
    content.delete = realDelete;
  }
  assert.ok(await readFence(i.ctx), 'the dead purge left its fence');
}

/** A version created, rejected and archived (its originals are no longer referenced; the copies are). */
export async function archivedVersion(ctx: ServiceContext) {
  const { version } = await createArtifact(ctx, agent, { name: 'cold', filename: 'f.txt', body: bytesOf('archived bytes') });
  const id = version.artifact_id;
  await propose(ctx, agent, id, 1);
  await decide(ctx, alice, id, 1, { decision: 'REJECT', evidenceRef: 'CR-1' });
  await archiveArtifact(ctx, alice, id);
  return version;
}

export interface ArchiveProfile {
  name: string;
  /** A fresh installation with a verified restore; `cold`: archive copies are not readable until restored. */
  open(): Promise<{ i: RetentionInstallation; restore: string; cold: boolean }>;
}

/**
 * The archive tests' profiles: embedded, and distributed behind the GLACIER model (archive copies are
 * cold, as on real S3). Call it at a test file's top level: the model's proxy is stopped after the file.
 */
export function archiveProfiles(): ArchiveProfile[] {
  let glacier: GlacierProxy | undefined;
  after(async () => {
    await glacier?.stop();
  });
  return [
    {
      name: embedded.name,
      open: async () => {
        const i = await installationsOf(embedded)();
        return { i, restore: await i.verifiedRestore(), cold: false };
      },
    },
    {
      name: `${distributed.name} behind the GLACIER model`,
      open: async () => {
        const i = await installationsOf(distributed)();
        const restore = await i.verifiedRestore();
        const { s3 } = await distributedServers();
        glacier ??= await startGlacierProxy(s3);
        Object.assign(i.ctx, { content: await behindGlacierModel(i.ctx.content as S3ContentStore, s3, glacier) });
        return { i, restore, cold: true };
      },
    },
  ];
}

export interface CliPlan {
  plan_digest: string;
  plan: { candidates: Array<{ key: string }> };
  rows: unknown[];
  totals: Record<string, number>;
}

/** The CLI's QUARANTINE plan-then-run against `src` at epoch 1, `days` after the installation was made. */
export interface CliRetention {
  dir: string;
  src: string;
  /** The data directory `alp restore` created from a backup of src and `alp reconcile --activate` verified. */
  restored: string;
  at(days: number): { env: Record<string, string> };
  plan(days: number): Promise<CliPlan>;
  /** `alp retention run --json` (`restore`: what --restore names, the restored directory by default). */
  run(days: number, o?: { digest?: string; restore?: string; extra?: string[] }): Promise<CliResult>;
}

/** Through the CLI in child processes: init, one unreferenced object at `orphanKey`, backup, restore, reconcile --activate. */
export async function cliRetention(label: string, orphanKey: string): Promise<CliRetention> {
  const dir = tempDir(label);
  const src = path.join(dir, 'src');
  const restored = path.join(dir, 'restored');
  await alpJson(['init', '--data', src]);
  const content = await FsContentStore.open(path.join(src, 'content'));
  await content.put(orphanKey, bytesOf('nobody names me'));
  await content.close();
  await alpJson(['backup', '--data', src, '--out', path.join(dir, 'b1')]);
  await alpJson(['restore', '--data', restored, '--from', path.join(dir, 'b1')]);
  await alpJson(['reconcile', '--data', restored, '--activate']);
  const t0 = Date.now();
  const at = (days: number) => ({ env: { ALP_NOW: new Date(t0 + days * DAY_MS).toISOString() } });
  const quarantine = ['--data', src, '--action', 'QUARANTINE', '--epoch', '1'];
  return {
    dir,
    src,
    restored,
    at,
    plan: (days) => alpJson<CliPlan>(['retention', 'plan', ...quarantine], at(days)),
    run: (days, o = {}) =>
      runAlp(
        [
          'retention',
          'run',
          ...quarantine,
          '--evidence',
          'CHG-CLI',
          '--restore',
          o.restore ?? restored,
          '--json',
          ...(o.digest ? ['--plan-digest', o.digest] : []),
          ...(o.extra ?? []),
        ],
        at(days),
      ),
  };
}
