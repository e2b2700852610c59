/**
 * The DynamoDB engine against a real Amazon DynamoDB Local started by this test process: the shared
 * conformance suite, unchanged, plus the engine's own behaviour (table management, limits checked
 * before sending, idempotency tokens, request accounting).
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ConditionFailed, InvalidInput, StorageFailure, Throttled, TransactionConflict } from '../../src/core/errors.ts';
import { DynamoItemStore } from '../../src/store/dynamodb/dynamodb-item-store.ts';
import { cond, type TransactOp } from '../../src/store/item-store.ts';
import { type DynamoLocal, startDynamoLocal } from '../helpers/dynamodb-local.ts';
import { type ItemStoreHarness, itemStoreConformance } from './conformance.ts';
import { scanConformance } from './conformance-scans.ts';

let local: DynamoLocal | undefined;
let starting: Promise<DynamoLocal> | undefined;
const opened: DynamoItemStore[] = [];

/** One DynamoDB Local for the whole file, started on first use, stopped after the last suite. */
function server(): Promise<DynamoLocal> {
  starting ??= startDynamoLocal().then((l) => {
    local = l;
    return l;
  });
  return starting;
}

after(async () => {
  for (const s of opened) await s.close();
  await local?.stop();
});

async function openStore(table?: string, ensure = true): Promise<DynamoItemStore> {
  const l = await server();
  const store = await DynamoItemStore.open(
    { engine: 'dynamodb', table: table ?? l.tableName(), region: l.region, endpoint: l.endpoint },
    { credentials: l.credentials, baseDelayMs: 10, maxDelayMs: 200 },
  );
  opened.push(store);
  if (ensure) await store.prepare();
  return store;
}

const harness: ItemStoreHarness = {
  name: 'dynamodb',
  runs: 60,
  open: () => openStore(),
  unreachable: async () => {
    const l = await server();
    // A loopback port that was just free: connections to it are refused.
    const port = await new Promise<number>((resolve) => {
      const srv = http.createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as AddressInfo).port;
        srv.close(() => resolve(p));
      });
    });
    return DynamoItemStore.open(
      { engine: 'dynamodb', table: l.tableName(), region: l.region, endpoint: `http://127.0.0.1:${port}` },
      { credentials: l.credentials, maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 5 },
    );
  },
};
itemStoreConformance(harness);
scanConformance(harness);

// Long by nature: a list of short, independent tests of this engine's own behaviour.
describe('DynamoDB engine specifics', () => {
  let raw: DynamoDBClient;
  before(async () => {
    const l = await server();
    raw = new DynamoDBClient({ endpoint: l.endpoint, region: l.region, credentials: l.credentials });
  });
  after(() => raw.destroy());

  it('prepare creates the table with GSI1 on demand, then accepts it as it is', async () => {
    const l = await server();
    const table = l.tableName('ensure');
    const store = await openStore(table, false);
    assert.deepEqual(await store.prepare(), { created: true });
    const t = (await raw.send(new DescribeTableCommand({ TableName: table }))).Table;
    assert.equal(t?.TableStatus, 'ACTIVE');
    assert.equal(t?.BillingModeSummary?.BillingMode, 'PAY_PER_REQUEST');
    assert.deepEqual(t?.KeySchema, [
      { AttributeName: 'PK', KeyType: 'HASH' },
      { AttributeName: 'SK', KeyType: 'RANGE' },
    ]);
    const gsi = t?.GlobalSecondaryIndexes?.find((g) => g.IndexName === 'GSI1');
    assert.deepEqual(gsi?.KeySchema, [
      { AttributeName: 'GSI1PK', KeyType: 'HASH' },
      { AttributeName: 'GSI1SK', KeyType: 'RANGE' },
    ]);
    assert.equal(gsi?.Projection?.ProjectionType, 'ALL');
    assert.deepEqual(await store.prepare(), { created: false });
    const again = await openStore(table, false);
    assert.deepEqual(await again.prepare(), { created: false });
    assert.equal(again.stats().CreateTable, undefined, 'an existing table is only described');
  });

  it('refuses a table with a different key schema and leaves it unchanged', async () => {
    const l = await server();
    const table = l.tableName('wrong');
    await raw.send(
      new CreateTableCommand({
        TableName: table,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      }),
    );
    const before = (await raw.send(new DescribeTableCommand({ TableName: table }))).Table;
    const store = await openStore(table, false);
    const err = await store.prepare().then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof InvalidInput, `expected InvalidInput, got ${String(err)}`);
    assert.match(err.message, /key schema is \(id HASH\)/);
    assert.match(err.message, /GSI1 is missing/);
    const afterwards = (await raw.send(new DescribeTableCommand({ TableName: table }))).Table;
    assert.deepEqual(afterwards?.KeySchema, before?.KeySchema);
    assert.deepEqual(afterwards?.AttributeDefinitions, before?.AttributeDefinitions);
    assert.equal(afterwards?.GlobalSecondaryIndexes, undefined);
  });

  it('refuses transactions over the limits before sending anything', async () => {
    const store = await openStore();
    store.resetStats();
    const many: TransactOp[] = Array.from({ length: 101 }, (_, i) => ({ op: 'put', item: { PK: 'lim', SK: `i${i}` } }));
    await assert.rejects(store.transactWrite(many), InvalidInput);
    const big: TransactOp[] = Array.from({ length: 11 }, (_, i) => ({
      op: 'put',
      item: { PK: 'lim', SK: `b${i}`, blob: 'x'.repeat(390 * 1024) },
    }));
    await assert.rejects(store.transactWrite(big), InvalidInput);
    await assert.rejects(
      store.transactWrite([
        { op: 'put', item: { PK: 'lim', SK: 'twice' } },
        { op: 'check', key: { PK: 'lim', SK: 'twice' }, condition: cond.exists() },
      ]),
      InvalidInput,
    );
    await assert.rejects(store.put({ PK: 'lim', SK: 'huge', blob: 'x'.repeat(401 * 1024) }), InvalidInput);
    assert.deepEqual(store.stats(), {}, 'no request was sent');
  });

  it('a transaction retried with the same token is applied once', async () => {
    const store = await openStore();
    const key = { PK: 'idem', SK: 'counter' };
    const ops: TransactOp[] = [{ op: 'update', key, update: { add: { n: 1 } } }];
    await store.transactWrite(ops, { token: 'retry-token-1' });
    await store.transactWrite(ops, { token: 'retry-token-1' });
    assert.equal((await store.get(key))?.n, 1);
    await store.transactWrite(ops, { token: 'retry-token-2' });
    await store.transactWrite(ops);
    await store.transactWrite(ops);
    assert.equal((await store.get(key))?.n, 4, 'other or absent tokens apply again');
    // A token longer than DynamoDB's 36 characters is hashed, deterministically.
    const long = `long-${'x'.repeat(80)}`;
    await store.transactWrite(ops, { token: long });
    await store.transactWrite(ops, { token: long });
    assert.equal((await store.get(key))?.n, 5);
    await assert.rejects(store.transactWrite([{ op: 'update', key, update: { add: { n: 2 } } }], { token: 'retry-token-1' }), InvalidInput);
  });

  it('counts one TransactWriteItems per transactWrite, and the capacity it consumed', async () => {
    const store = await openStore();
    store.resetStats();
    await store.transactWrite([
      { op: 'put', item: { PK: 'st', SK: 'a', v: 1 }, condition: cond.notExists() },
      { op: 'put', item: { PK: 'st', SK: 'b', v: 1 } },
    ]);
    await assert.rejects(
      store.transactWrite([{ op: 'put', item: { PK: 'st', SK: 'a', v: 2 }, condition: cond.notExists() }]),
      ConditionFailed,
    );
    await store.get({ PK: 'st', SK: 'a' });
    await store.query({ pk: 'st' });
    const stats = store.stats();
    assert.equal(stats.TransactWriteItems, 2);
    assert.equal(stats.GetItem, 1);
    assert.equal(stats.Query, 1);
    assert.equal(stats.retries, undefined);
    assert.ok((stats['TransactWriteItems.capacityUnits'] ?? 0) > 0, JSON.stringify(stats));
    assert.ok((stats.capacityUnits ?? 0) >= (stats['TransactWriteItems.capacityUnits'] ?? 0));
  });

  it('keeps large and fractional numbers, empty strings and empty containers as JSON does', async () => {
    const store = await openStore();
    const item = { PK: 'num', SK: 'x', big: 2 ** 60, tiny: 1e-10, frac: 0.1 + 0.2, neg: -0, e: '', l: [], m: {} };
    await store.put(item);
    assert.deepEqual(await store.get({ PK: 'num', SK: 'x' }), JSON.parse(JSON.stringify(item)));
    const updated = await store.update({ PK: 'num', SK: 'x' }, {});
    assert.deepEqual(updated, JSON.parse(JSON.stringify(item)), 'an empty update changes nothing');
    await store.transactWrite([{ op: 'update', key: { PK: 'num', SK: 'new' }, update: {} }]);
    assert.deepEqual(await store.get({ PK: 'num', SK: 'new' }), { PK: 'num', SK: 'new' }, 'an empty update upserts');
    await assert.rejects(store.update({ PK: 'num', SK: 'x' }, { add: { e: 1 } }), InvalidInput);
  });

  it('fails clearly when the table does not exist', async () => {
    const store = await openStore(undefined, false);
    await assert.rejects(store.get({ PK: 'a', SK: 'b' }), /does not exist: run alp init/);
  });
});

type Fault = 'throttle' | 'fail500' | 'applied500' | 'conflict' | 'unprocessed' | 'reset';

/**
 * A pass-through HTTP proxy in front of DynamoDB Local that injects faults for the next requests of an
 * operation, to drive the engine's retry rules against the real server.
 */
async function faultProxy(
  target: string,
): Promise<{ endpoint: string; inject(op: string, ...faults: Fault[]): void; close(): Promise<void> }> {
  const queue = new Map<string, Fault[]>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const op = String(req.headers['x-amz-target'] ?? '').split('.')[1] ?? '';
      const fault = queue.get(op)?.shift();
      const reply = (status: number, json: unknown) => {
        res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
        res.end(JSON.stringify(json));
      };
      const type = (name: string) => `com.amazonaws.dynamodb.v20120810#${name}`;
      if (fault === 'throttle') return reply(400, { __type: type('ProvisionedThroughputExceededException'), message: 'slow down' });
      if (fault === 'fail500') return reply(500, { __type: type('InternalServerError'), message: 'injected' });
      if (fault === 'reset') return req.socket.destroy();
      if (fault === 'conflict') {
        return reply(400, {
          __type: type('TransactionCanceledException'),
          message: 'Transaction cancelled',
          CancellationReasons: [{ Code: 'TransactionConflict', Message: 'conflict' }],
        });
      }
      if (fault === 'unprocessed') return reply(200, { UnprocessedItems: JSON.parse(body.toString()).RequestItems });
      const url = new URL(target);
      const upstream = http.request(
        { host: url.hostname, port: url.port, method: req.method, path: req.url, headers: req.headers },
        (up) => {
          const parts: Buffer[] = [];
          up.on('data', (c: Buffer) => parts.push(c));
          up.on('end', () => {
            if (fault === 'applied500') return reply(500, { __type: type('InternalServerError'), message: 'applied, then failed' });
            res.writeHead(up.statusCode ?? 500, up.headers);
            res.end(Buffer.concat(parts));
          });
        },
      );
      upstream.on('error', () => res.destroy());
      upstream.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    inject: (op, ...faults) => queue.set(op, [...(queue.get(op) ?? []), ...faults]),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// Long by nature: a list of short, independent tests of this engine's own behaviour.
describe('DynamoDB engine retries (faults injected in front of DynamoDB Local)', () => {
  let proxy: Awaited<ReturnType<typeof faultProxy>>;
  let store: DynamoItemStore;
  before(async () => {
    const l = await server();
    proxy = await faultProxy(l.endpoint);
    const table = l.tableName('faults');
    store = await DynamoItemStore.open(
      { engine: 'dynamodb', table, region: l.region, endpoint: proxy.endpoint },
      { credentials: l.credentials, maxAttempts: 4, baseDelayMs: 1, maxDelayMs: 10 },
    );
    await store.prepare();
  });
  after(async () => {
    await store.close();
    await proxy.close();
  });

  it('retries throttling with backoff and counts every attempt', async () => {
    store.resetStats();
    proxy.inject('PutItem', 'throttle', 'throttle');
    await store.put({ PK: 'r', SK: 'throttled', v: 1 }, { condition: cond.notExists() });
    assert.equal((await store.get({ PK: 'r', SK: 'throttled' }))?.v, 1);
    const stats = store.stats();
    assert.equal(stats.PutItem, 3);
    assert.equal(stats.retries, 2);
  });

  it('gives up with Throttled after the bounded attempts', async () => {
    store.resetStats();
    proxy.inject('GetItem', 'throttle', 'throttle', 'throttle', 'throttle');
    await assert.rejects(store.get({ PK: 'r', SK: 'x' }), Throttled);
    assert.equal(store.stats().GetItem, 4);
  });

  it('retries reads after connection resets and idempotent writes after server errors', async () => {
    store.resetStats();
    proxy.inject('GetItem', 'reset');
    assert.equal(await store.get({ PK: 'r', SK: 'none' }), undefined);
    proxy.inject('PutItem', 'fail500');
    await store.put({ PK: 'r', SK: 'plain', v: 2 });
    assert.equal(store.stats().GetItem, 2);
    assert.equal(store.stats().PutItem, 2);
    assert.equal((await store.get({ PK: 'r', SK: 'plain' }))?.v, 2);
  });

  it('retries a transaction whose outcome was lost with the same token, so it applies once', async () => {
    store.resetStats();
    proxy.inject('TransactWriteItems', 'applied500');
    const key = { PK: 'r', SK: 'counter' };
    await store.transactWrite([{ op: 'update', key, update: { add: { n: 1 } } }]);
    assert.equal(store.stats().TransactWriteItems, 2);
    assert.equal((await store.get(key))?.n, 1);
  });

  it('does not retry a conditional write whose outcome is unknown', async () => {
    store.resetStats();
    proxy.inject('PutItem', 'applied500');
    await assert.rejects(store.put({ PK: 'r', SK: 'once', v: 1 }, { condition: cond.notExists() }), (e: unknown) => {
      assert.ok(e instanceof StorageFailure && e.code === 'STORAGE');
      assert.match(e.message, /may or may not have been applied/);
      return true;
    });
    assert.equal(store.stats().PutItem, 1);
    assert.equal((await store.get({ PK: 'r', SK: 'once' }))?.v, 1, 'it was in fact applied');
  });

  it('retries transaction conflicts, then reports TransactionConflict', async () => {
    proxy.inject('TransactWriteItems', 'conflict');
    await store.transactWrite([{ op: 'put', item: { PK: 'r', SK: 'c1' } }]);
    proxy.inject('TransactWriteItems', 'conflict', 'conflict', 'conflict', 'conflict');
    await assert.rejects(store.transactWrite([{ op: 'put', item: { PK: 'r', SK: 'c2' } }]), TransactionConflict);
    assert.equal(await store.get({ PK: 'r', SK: 'c2' }), undefined);
  });

  it('resends unprocessed batch items', async () => {
    store.resetStats();
    proxy.inject('BatchWriteItem', 'unprocessed');
    await store.batchPut(Array.from({ length: 30 }, (_, i) => ({ PK: 'rb', SK: `k${i}` })));
    assert.equal((await store.query({ pk: 'rb' })).items.length, 30);
    assert.equal(store.stats().BatchWriteItem, 3, 'two batches, one of them sent twice');
  });
});
