/**
 * Installations for the retention suite, embedded and distributed, with what the seed's rules need:
 * planting unreferenced objects, a verified same-installation restore, and a trusted host.
 */
import path from 'node:path';
import { after } from 'node:test';
import type { ContentStore } from '../../src/content/content-store.ts';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import type { ManualClock } from '../../src/core/clock.ts';
import { createBackup } from '../../src/recovery/backup.ts';
import { activateRestore, reconcile } from '../../src/recovery/reconcile.ts';
import { restoreBackup } from '../../src/recovery/restore.ts';
import { localTrustedHost } from '../../src/retention/host.ts';
import type { RetentionApproval } from '../../src/retention/model.ts';
import type { RetentionHost } from '../../src/retention/retention.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import { DynamoItemStore } from '../../src/store/dynamodb/dynamodb-item-store.ts';
import type { ItemStore } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { readEpoch } from '../../src/system/state.ts';
import { embeddedContext } from './context.ts';
import { distributedInstallation, distributedServers } from './distributed.ts';
import { tempDir } from './tmp.ts';

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
  during?: () => Promise<void>;
}

/** The local trusted host, optionally with a custom approval (to test the checks) and a hook inside the fence. */
export function host(ctx: ServiceContext, o: HostOptions): RetentionHost {
  const base = localTrustedHost(ctx, {
    owner: 'retention test',
    approver: operator,
    evidenceRef: 'CHG-1',
    restore: o.restore,
    ...(o.pins ? { pins: o.pins } : {}),
  });
  return {
    ...base,
    approve: async (plan, digest) => {
      if (o.during) await o.during();
      return o.approve ? o.approve(plan, digest) : base.approve(plan, digest);
    },
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
