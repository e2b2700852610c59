/**
 * The two storage profiles for the issue 14 storage tests. The distributed one (DynamoDB Local +
 * s3rver) reaches s3rver through the conditional-write proxy (test/helpers/s3-conditional-proxy.ts), a
 * model of S3's If-None-Match that s3rver itself ignores.
 */
import fs from 'node:fs';
import path from 'node:path';
import { after } from 'node:test';
import { S3ContentStore } from '../../src/content/s3/s3-content-store.ts';
import type { ManualClock } from '../../src/core/clock.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, distributedServers, stopDistributedServers } from '../helpers/distributed.ts';
import { type ConditionalProxy, startConditionalProxy } from '../helpers/s3-conditional-proxy.ts';

export interface Profile {
  name: string;
  open(): Promise<ServiceContext & { clock: ManualClock; contentRoot?: string }>;
}

let proxy: Promise<ConditionalProxy> | undefined;
const closers: Array<() => Promise<void>> = [];

after(async () => {
  for (const c of closers) await c().catch(() => {});
  if (proxy) await (await proxy).stop();
  await stopDistributedServers();
});

export const PROFILES: Profile[] = [
  {
    name: 'embedded (SQLite + directory)',
    open: async () => {
      const ctx = await embeddedContext();
      closers.push(async () => ctx.items.close());
      return ctx;
    },
  },
  {
    name: 'distributed (DynamoDB Local + s3rver behind the conditional-write proxy)',
    open: async () => {
      const inst = await distributedInstallation();
      const { s3 } = await distributedServers();
      proxy ??= startConditionalProxy(s3);
      const content = await S3ContentStore.open(
        { engine: 's3', bucket: s3.bucket, prefix: inst.prefix, region: s3.region, endpoint: (await proxy).endpoint },
        { credentials: s3.credentials },
      );
      await inst.ctx.content.close();
      inst.ctx.content = content;
      closers.push(inst.close);
      return inst.ctx;
    },
  },
];

/** Temp files (`.alp-tmp-*`) anywhere below a content root. */
export function tempFilesBelow(root: string | undefined): string[] {
  if (!root) return [];
  return (fs.readdirSync(root, { recursive: true }) as string[]).filter((p) => path.basename(p).startsWith('.alp-tmp-'));
}

/** A request body that sends `head`, then waits for `release()` before sending `tail` and ending. */
export function heldBody(head: string, tail: string) {
  let release!: () => void;
  let started!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const pulled = new Promise<void>((r) => {
    started = r;
  });
  async function* body() {
    started();
    yield Buffer.from(head);
    await gate;
    yield Buffer.from(tail);
  }
  return { body: body(), pulled, release };
}
