/**
 * The distributed profile for tests: one DynamoDB Local and one s3rver per test process (started on
 * first use, on loopback, stopped when the process exits), and a fresh table + bucket prefix per
 * installation.
 */
import { randomUUID } from 'node:crypto';
import { S3ContentStore } from '../../src/content/s3/s3-content-store.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import { DynamoItemStore } from '../../src/store/dynamodb/dynamodb-item-store.ts';
import type { Layout } from '../../src/system/layout.ts';
import { type DynamoLocal, sharedDynamoLocal, stopSharedDynamoLocal } from './dynamodb-local.ts';
import { type S3rverHandle, startS3rver } from './s3rver.ts';

export interface Servers {
  dynamo: DynamoLocal;
  s3: S3rverHandle;
}

let servers: Promise<Servers> | undefined;
let startedS3: S3rverHandle | undefined;

/**
 * Both servers, started together once per process. When either cannot start, the one that did is
 * stopped before the start rejects (a running s3rver or java child would keep the test process alive
 * until the runner's timeout), and every later call fails at once with the same error.
 */
export function distributedServers(): Promise<Servers> {
  servers ??= startBoth();
  return servers;
}

async function startBoth(): Promise<Servers> {
  const [dynamo, s3] = await Promise.allSettled([sharedDynamoLocal(), startS3rver()]);
  if (s3.status === 'fulfilled') startedS3 = s3.value;
  if (dynamo.status === 'fulfilled' && s3.status === 'fulfilled') return { dynamo: dynamo.value, s3: s3.value };
  await stopStarted();
  throw dynamo.status === 'rejected' ? dynamo.reason : (s3 as PromiseRejectedResult).reason;
}

async function stopStarted(): Promise<void> {
  const s3 = startedS3;
  startedS3 = undefined;
  await Promise.all([stopSharedDynamoLocal(), s3?.stop()]);
}

/** Call from the test file's top-level `after`: the servers' handles keep the process alive. */
export async function stopDistributedServers(): Promise<void> {
  if (!servers) return;
  const starting = servers;
  servers = undefined;
  // A start that failed has stopped what it started already; the test that needed it has failed.
  await starting.catch(() => undefined);
  await stopStarted();
}

export interface DistributedInstallation {
  ctx: ServiceContext & { clock: ManualClock; items: DynamoItemStore; content: S3ContentStore };
  table: string;
  prefix: string;
  metadataUrl: string;
  contentUrl: string;
  /** Environment for a CLI or server process using this installation (URLs + dummy credentials). */
  env: Record<string, string>;
  close(): Promise<void>;
}

export async function distributedInstallation(
  start = '2026-03-01T12:00:00.000Z',
  opts: { layout?: Layout } = {},
): Promise<DistributedInstallation> {
  const { dynamo, s3 } = await distributedServers();
  const table = dynamo.tableName('alp');
  const prefix = `inst-${randomUUID().slice(0, 8)}/`;
  const items = await DynamoItemStore.open(
    { engine: 'dynamodb', table, region: dynamo.region, endpoint: dynamo.endpoint },
    // One key pair for both services, so child processes can use the standard AWS_* variables:
    // s3rver accepts only its own key, DynamoDB Local accepts any (tables are per key).
    { credentials: s3.credentials, baseDelayMs: 10, maxDelayMs: 200 },
  );
  await items.prepare();
  const content = await S3ContentStore.open(
    { engine: 's3', bucket: s3.bucket, prefix, region: s3.region, endpoint: s3.endpoint },
    { credentials: s3.credentials },
  );
  const clock = new ManualClock(start);
  // ctx.content stays the context's indexed store (issue 17: every write keeps its reference-index
  // entry); the typed fields give tests the engines' own clock and item store.
  const ctx = Object.assign(createContext({ items, content, clock, ...(opts.layout ? { layout: opts.layout } : {}) }), {
    clock,
    items,
  }) as ReturnType<typeof createContext> & { clock: ManualClock; items: DynamoItemStore; content: S3ContentStore };
  const metadataUrl = `dynamodb://${table}?region=${dynamo.region}&endpoint=${encodeURIComponent(dynamo.endpoint)}`;
  const contentUrl = `s3://${s3.bucket}/${prefix}?region=${s3.region}&endpoint=${encodeURIComponent(s3.endpoint)}`;
  return {
    ctx,
    table,
    prefix,
    metadataUrl,
    contentUrl,
    env: {
      ALP_METADATA: metadataUrl,
      ALP_CONTENT: contentUrl,
      AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
      AWS_REGION: dynamo.region,
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
    close: async () => {
      await content.close();
      await items.close();
    },
  };
}
