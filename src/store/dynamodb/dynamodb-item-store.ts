/**
 * ItemStore on Amazon DynamoDB (AWS SDK v3): the single table of docs/data-model.md with key attributes PK / SK
 * and one global secondary index GSI1 (GSI1PK / GSI1SK, projection ALL), on-demand billing.
 *
 * CONSISTENCY: GSI1 is eventually consistent; a write may take a moment to appear in it and a query on
 * it can never be strongly consistent. Any rule that must not miss a write (reference scans, audit
 * verification, reconciliation, conditions) reads the base table (get, query by PK, scan), never GSI1.
 * Base-table reads here are strongly consistent unless the caller passes `consistent: false`, so
 * "reads the base table" really means "sees every acknowledged write" (at twice the read cost).
 *
 * Semantics are those of semantics.ts, which the SQLite engine evaluates directly; here they are
 * compiled to expressions (expressions.ts) and the same limits are checked before anything is sent.
 *
 * Retries: DynamoDB's own SDK retries are off (maxAttempts 1) and this engine retries itself, so every
 * attempt is counted in stats() and the rules are explicit:
 * - throttling (ProvisionedThroughputExceeded, ThrottlingException, RequestLimitExceeded, throttled
 *   transaction reasons), TransactionConflict and refused connections did not apply the request and are
 *   retried for every operation, with exponential backoff and full jitter, a bounded number of times;
 * - ambiguous failures (5xx, connection resets, timeouts) may or may not have applied the request; they
 *   are retried for reads, idempotent writes (unconditional puts, deletes, SET/REMOVE updates) and
 *   transactions (a retry reuses the ClientRequestToken, which DynamoDB deduplicates for 10 minutes);
 *   a conditional or ADD write is not retried after them, because a retry could report ConditionFailed
 *   for a write that did apply or add twice: it fails with an InternalError saying the outcome is unknown;
 * - when the attempts run out, the call fails with Throttled (TransactionConflict for conflicts).
 *
 * Known differences from SQLite, none of which the services rely on: DynamoDB measures the 400 KB item
 * limit its own way (this engine also checks the JSON size of puts like SQLite, but an update is only
 * checked by DynamoDB); numbers must lie within DynamoDB's range (about 1e-130 to 1e126; NaN and
 * Infinity are refused); the attribute named NOOP_ATTRIBUTE is reserved (see expressions.ts).
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  type TableDescription,
} from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  BatchWriteCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  ScanCommand,
  TransactWriteCommand,
  type TransactWriteCommandInput,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { describeMetadata, type MetadataConfig } from '../../core/config.ts';
import { InternalError, InvalidInput, Throttled } from '../../core/errors.ts';
import { forEachLimited } from '../../core/limit.ts';
import type {
  Item,
  ItemKey,
  ItemSnapshot,
  ItemStore,
  Page,
  QueryInput,
  ScanOptions,
  TransactOp,
  TransactOptions,
  UpdateSpec,
  WriteOptions,
} from '../item-store.ts';
import { scanCursorScope, scanSegment } from '../scan-options.ts';
import {
  applyUpdate,
  decodeCursor,
  encodeCursor,
  pageLimit,
  validateItem,
  validateKey,
  validateSk,
  validateTransaction,
} from '../semantics.ts';
import { type AwsError, type CallContext, classify, conditionFailed, toContractError, transactionRefused } from './errors.ts';
import { ExpressionBuilder } from './expressions.ts';
import { backoffDelay, mayRetry, type RetryPolicy, retryPolicy, sleep } from './retry.ts';
import { GSI1, isActive, schemaProblems, tableDefinition } from './table.ts';

const BATCH_GET_MAX = 100;
const BATCH_WRITE_MAX = 25;
const BATCH_CONCURRENCY = 4;
/** DynamoDB accepts ClientRequestToken of 1 to 36 characters. */
const MAX_TOKEN_LENGTH = 36;

type DynamoOperation =
  | 'GetItem'
  | 'PutItem'
  | 'UpdateItem'
  | 'DeleteItem'
  | 'Query'
  | 'Scan'
  | 'BatchGetItem'
  | 'BatchWriteItem'
  | 'TransactWriteItems'
  | 'DescribeTable'
  | 'CreateTable';

export interface DynamoOptions {
  /** Credentials for the client; default: the SDK's default chain (environment, profile, role). */
  credentials?: DynamoDBClientConfig['credentials'];
  /** Attempts per request, including the first (default 8). */
  maxAttempts?: number;
  /** Backoff base and cap in ms for full-jitter exponential backoff (defaults 50 and 5000). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Socket timeout per request (default 30 s). */
  requestTimeoutMs?: number;
  /** How long prepare waits for the table and GSI1 to become ACTIVE (default 5 minutes). */
  tableWaitMs?: number;
}

export { GSI1, schemaProblems };

export class DynamoItemStore implements ItemStore {
  readonly engine = 'dynamodb';
  /** DynamoDB's parallel Scan: segments are served by separate partitions (item-store.ts). */
  readonly scanSegments = 8;
  readonly location: string;
  readonly table: string;
  private readonly counters = new Map<string, number>();
  private readonly retry: RetryPolicy;
  private readonly tableWaitMs: number;
  private closed = false;

  private constructor(
    config: Extract<MetadataConfig, { engine: 'dynamodb' }>,
    private readonly client: DynamoDBClient,
    private readonly doc: DynamoDBDocumentClient,
    opts: DynamoOptions,
  ) {
    this.table = config.table;
    this.location = describeMetadata(config);
    this.retry = retryPolicy(opts);
    this.tableWaitMs = opts.tableWaitMs ?? 5 * 60_000;
  }

  /** Opens the engine without any request; call prepare() (alp init) to create or check the table. */
  static async open(config: Extract<MetadataConfig, { engine: 'dynamodb' }>, opts: DynamoOptions = {}): Promise<DynamoItemStore> {
    const client = new DynamoDBClient({
      region: config.region,
      ...(config.endpoint ? { endpoint: config.endpoint } : {}),
      ...(opts.credentials ? { credentials: opts.credentials } : {}),
      maxAttempts: 1,
      requestHandler: { requestTimeout: opts.requestTimeoutMs ?? 30_000, connectionTimeout: 5_000 },
    });
    const doc = DynamoDBDocumentClient.from(client, {
      marshallOptions: { removeUndefinedValues: true, allowImpreciseNumbers: true },
      // Numbers come back as JS numbers, like the JSON the SQLite engine stores (no BigInt).
      unmarshallOptions: { wrapNumbers: (s: string) => Number(s) },
    });
    return new DynamoItemStore(config, client, doc, opts);
  }

  // ---------------------------------------------------------------------------------------------
  // Table management

  /**
   * Creates the table (PK/SK, GSI1 with projection ALL, on-demand billing) when it is absent and waits
   * until it and GSI1 are ACTIVE. When it exists, checks its key schema and GSI1 and, on any mismatch,
   * throws InvalidInput naming every problem without changing the table.
   */
  async prepare(): Promise<{ created: boolean }> {
    let description = await this.describeTable();
    let created = false;
    if (!description) {
      try {
        await this.call('CreateTable', () => this.client.send(new CreateTableCommand(tableDefinition(this.table))), {
          idempotent: true,
          mapError: (e) => (e.name === 'ResourceInUseException' ? new TableBusy() : undefined),
        });
        created = true;
      } catch (e) {
        // Another node created it at the same moment: fall through to waiting and validation.
        if (!(e instanceof TableBusy)) throw e;
      }
      description = await this.describeTable();
      if (!description) throw new InternalError(`DynamoDB table ${this.table} was created but cannot be described`);
    }
    const problems = schemaProblems(description);
    if (problems.length > 0) {
      throw new InvalidInput(
        `DynamoDB table ${this.table} exists but does not have ALP's schema: ${problems.join('; ')}. It was left unchanged; use another table name.`,
        { table: this.table, problems },
      );
    }
    const deadline = Date.now() + this.tableWaitMs;
    while (!isActive(description)) {
      if (description.TableStatus === 'DELETING' || description.TableStatus === 'ARCHIVED' || description.TableStatus === 'ARCHIVING') {
        throw new InvalidInput(`DynamoDB table ${this.table} is ${description.TableStatus}`, { table: this.table });
      }
      if (Date.now() > deadline) throw new Throttled(`DynamoDB table ${this.table} did not become ACTIVE in time`, { table: this.table });
      await sleep(created ? 500 : 1000);
      const next = await this.describeTable();
      if (!next) throw new InternalError(`DynamoDB table ${this.table} disappeared while waiting for it to become ACTIVE`);
      description = next;
    }
    return { created };
  }

  private async describeTable(): Promise<TableDescription | undefined> {
    try {
      const out = await this.call('DescribeTable', () => this.client.send(new DescribeTableCommand({ TableName: this.table })), {
        idempotent: true,
        mapError: (e) => (e.name === 'ResourceNotFoundException' ? new TableMissing() : undefined),
      });
      return out.Table;
    } catch (e) {
      if (e instanceof TableMissing) return undefined;
      throw e;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Single-item operations

  async get(key: ItemKey, opts: { consistent?: boolean } = {}): Promise<Item | undefined> {
    validateKey(key);
    const out = await this.call(
      'GetItem',
      () =>
        this.doc.send(
          new GetCommand({
            TableName: this.table,
            Key: { PK: key.PK, SK: key.SK },
            ConsistentRead: opts.consistent ?? true,
            ReturnConsumedCapacity: 'TOTAL',
          }),
        ),
      { idempotent: true },
    );
    return out.Item as Item | undefined;
  }

  async put(item: Item, opts: WriteOptions = {}): Promise<void> {
    validateItem(item);
    const b = new ExpressionBuilder();
    const condition = opts.condition ? b.condition(opts.condition) : undefined;
    await this.call(
      'PutItem',
      () =>
        this.doc.send(
          new PutCommand({
            TableName: this.table,
            Item: item,
            ...withExpressions(b, condition),
            ReturnConsumedCapacity: 'TOTAL',
          }),
        ),
      { idempotent: !opts.condition, mapError: conditionFailed(`condition failed on put ${item.PK}/${item.SK}`) },
    );
  }

  async update(key: ItemKey, update: UpdateSpec, opts: WriteOptions = {}): Promise<Item> {
    validateKey(key);
    // Validates the spec (keys untouched, no attribute twice, finite numbers, index keys non-empty
    // strings, size) exactly as the model does, before anything is sent.
    applyUpdate(key, undefined, update);
    const b = new ExpressionBuilder();
    const expression = b.update(update);
    const condition = opts.condition ? b.condition(opts.condition) : undefined;
    const out = await this.call(
      'UpdateItem',
      () =>
        this.doc.send(
          new UpdateCommand({
            TableName: this.table,
            Key: { PK: key.PK, SK: key.SK },
            UpdateExpression: expression,
            ...withExpressions(b, condition),
            ReturnValues: 'ALL_NEW',
            ReturnConsumedCapacity: 'TOTAL',
          }),
        ),
      {
        idempotent: !opts.condition && Object.keys(update.add ?? {}).length === 0,
        mapError: conditionFailed(`condition failed on update ${key.PK}/${key.SK}`),
      },
    );
    const item = out.Attributes as Item | undefined;
    if (!item) throw new InternalError(`DynamoDB returned no item after updating ${key.PK}/${key.SK}`);
    return item;
  }

  async delete(key: ItemKey, opts: WriteOptions = {}): Promise<void> {
    validateKey(key);
    const b = new ExpressionBuilder();
    const condition = opts.condition ? b.condition(opts.condition) : undefined;
    await this.call(
      'DeleteItem',
      () =>
        this.doc.send(
          new DeleteCommand({
            TableName: this.table,
            Key: { PK: key.PK, SK: key.SK },
            ...withExpressions(b, condition),
            ReturnConsumedCapacity: 'TOTAL',
          }),
        ),
      { idempotent: !opts.condition, mapError: conditionFailed(`condition failed on delete ${key.PK}/${key.SK}`) },
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Transactions

  async transactWrite(ops: TransactOp[], opts: TransactOptions = {}): Promise<void> {
    validateTransaction(ops);
    const items = ops.map((op) => this.compileOp(op));
    const token = clientRequestToken(opts.token);
    const input: TransactWriteCommandInput = { TransactItems: items, ClientRequestToken: token, ReturnConsumedCapacity: 'TOTAL' };
    await this.call('TransactWriteItems', () => this.doc.send(new TransactWriteCommand(input)), {
      idempotent: true,
      mapError: (e) => transactionRefused(e, ops, opts.token),
    });
  }

  private compileOp(op: TransactOp): NonNullable<TransactWriteCommandInput['TransactItems']>[number] {
    const b = new ExpressionBuilder();
    switch (op.op) {
      case 'put': {
        const condition = op.condition ? b.condition(op.condition) : undefined;
        return { Put: { TableName: this.table, Item: op.item, ...withExpressions(b, condition) } };
      }
      case 'update': {
        applyUpdate(op.key, undefined, op.update);
        const expression = b.update(op.update);
        const condition = op.condition ? b.condition(op.condition) : undefined;
        return {
          Update: {
            TableName: this.table,
            Key: { PK: op.key.PK, SK: op.key.SK },
            UpdateExpression: expression,
            ...withExpressions(b, condition),
          },
        };
      }
      case 'delete': {
        const condition = op.condition ? b.condition(op.condition) : undefined;
        return { Delete: { TableName: this.table, Key: { PK: op.key.PK, SK: op.key.SK }, ...withExpressions(b, condition) } };
      }
      case 'check': {
        if (!op.condition) throw new InvalidInput('a check operation needs a condition');
        const condition = b.condition(op.condition);
        return {
          ConditionCheck: { TableName: this.table, Key: { PK: op.key.PK, SK: op.key.SK }, ...withExpressions(b, condition) } as never,
        };
      }
      default:
        throw new InvalidInput(`unknown transaction operation ${JSON.stringify((op as { op?: unknown }).op)}`);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Queries and batches

  async query(q: QueryInput): Promise<Page> {
    validateSk(q.sk);
    if (typeof q.pk !== 'string' || q.pk.length === 0) throw new InvalidInput('query needs a partition key');
    const limit = pageLimit(q.limit);
    const onIndex = q.index === GSI1;
    if (q.index !== undefined && !onIndex) throw new InvalidInput(`unknown index ${String(q.index)}`);
    const indexName = onIndex ? GSI1 : 'TABLE';
    let start: Record<string, string> | undefined;
    if (q.cursor !== undefined) {
      const last = decodeCursor(q.cursor, q.pk, indexName);
      start = onIndex ? { GSI1PK: q.pk, GSI1SK: need(last.GSI1SK), PK: need(last.PK), SK: need(last.SK) } : { PK: q.pk, SK: need(last.SK) };
    }
    const b = new ExpressionBuilder();
    const keyCondition = b.keyCondition(onIndex ? 'GSI1PK' : 'PK', onIndex ? 'GSI1SK' : 'SK', q.pk, q.sk);
    if (keyCondition === 'none') return { items: [] };
    // One item more than the page: when it comes back, more follow, and the cursor is the key of the
    // page's last item, so the common case ends without an extra, empty page.
    const out = await this.call(
      'Query',
      () =>
        this.doc.send(
          new QueryCommand({
            TableName: this.table,
            ...(onIndex ? { IndexName: GSI1 } : { ConsistentRead: q.consistent ?? true }),
            KeyConditionExpression: keyCondition,
            ExpressionAttributeNames: b.attributeNames(),
            ExpressionAttributeValues: b.attributeValues(),
            ScanIndexForward: !q.descending,
            Limit: limit + 1,
            ...(start ? { ExclusiveStartKey: start } : {}),
            ReturnConsumedCapacity: 'TOTAL',
          }),
        ),
      { idempotent: true },
    );
    const fetched = (out.Items ?? []) as Item[];
    const items = fetched.slice(0, limit);
    const page: Page = { items };
    // Fewer items than asked with a LastEvaluatedKey: DynamoDB stopped at 1 MB and more may follow.
    if (fetched.length > limit || out.LastEvaluatedKey) {
      const lastItem = items[items.length - 1];
      const lastKey = lastItem ?? (out.LastEvaluatedKey as Item);
      page.cursor = encodeCursor({
        pk: q.pk,
        index: indexName,
        last: onIndex ? { GSI1SK: lastKey.GSI1SK as string, PK: lastKey.PK, SK: lastKey.SK } : { SK: lastKey.SK },
      });
    }
    return page;
  }

  /** A strongly consistent Scan; a segment is DynamoDB's own (Segment / TotalSegments). */
  async scan(opts: ScanOptions = {}): Promise<Page> {
    const limit = pageLimit(opts.limit);
    const seg = scanSegment(opts);
    const scope = scanCursorScope(seg);
    let start: Record<string, string> | undefined;
    if (opts.cursor !== undefined) {
      const last = decodeCursor(opts.cursor, scope, 'SCAN');
      start = { PK: need(last.PK), SK: need(last.SK) };
    }
    const out = await this.call(
      'Scan',
      () =>
        this.doc.send(
          new ScanCommand({
            TableName: this.table,
            ConsistentRead: true,
            Limit: limit + 1,
            ...(seg ? { Segment: seg.segment, TotalSegments: seg.total } : {}),
            ...(start ? { ExclusiveStartKey: start } : {}),
            ReturnConsumedCapacity: 'TOTAL',
          }),
        ),
      { idempotent: true },
    );
    const fetched = (out.Items ?? []) as Item[];
    const items = fetched.slice(0, limit);
    const page: Page = { items };
    if (fetched.length > limit || out.LastEvaluatedKey) {
      const lastKey = items[items.length - 1] ?? (out.LastEvaluatedKey as Item);
      page.cursor = encodeCursor({ pk: scope, index: 'SCAN', last: { PK: lastKey.PK, SK: lastKey.SK } });
    }
    return page;
  }

  /** No request: this engine's change scans read the whole table (see scanChangedSince). */
  async changeMark(): Promise<string> {
    if (this.closed) throw new InternalError(`the DynamoDB item store for ${this.location} is closed`);
    return `dynamodb:all:${Date.now()}`;
  }

  /**
   * THE DYNAMODB LIMIT: the base table has no cheap "changed since" read, so this is every item of the
   * table — a full, optionally segmented, strongly consistent Scan (cursors are scan's): correct by
   * construction (every item written after the mark is in it), but O(table), not O(changes). A
   * DynamoDB Streams reader (NEW_IMAGE, a mark of shard sequence numbers) would be O(changes).
   */
  async scanChangedSince(mark: string, opts: ScanOptions = {}): Promise<Page> {
    if (typeof mark !== 'string' || !/^dynamodb:all:\d{1,15}$/.test(mark))
      throw new InvalidInput('not a change mark of the DynamoDB engine');
    return this.scan(opts);
  }

  /** Never: every change scan of this engine is the whole table (see scanChangedSince). */
  async changesAnswerable(_mark: string): Promise<boolean> {
    return false;
  }

  /**
   * DynamoDB has no point-in-time read of a whole table through this API (PITR exports go to S3 and are
   * asynchronous): the view is the live, strongly consistent Scan, paginated. Callers that need one
   * instant fence the writers while they read it (recovery/backup does).
   */
  async snapshot(): Promise<ItemSnapshot> {
    return { pointInTime: false, scan: (o) => this.scan(o), close: async () => {} };
  }

  async batchGet(keys: ItemKey[], opts: { consistent?: boolean } = {}): Promise<Item[]> {
    keys.forEach(validateKey);
    const consistent = opts.consistent !== false;
    const unique = new Map<string, ItemKey>();
    for (const k of keys) unique.set(keyId(k), { PK: k.PK, SK: k.SK });
    const found = new Map<string, Item>();
    const chunks = chunk([...unique.values()], BATCH_GET_MAX);
    await forEachLimited(chunks, BATCH_CONCURRENCY, async (batch) => {
      let pending: Array<Record<string, unknown>> = batch;
      for (let round = 1; pending.length > 0; round++) {
        const request = pending;
        const out = await this.call(
          'BatchGetItem',
          () =>
            this.doc.send(
              new BatchGetCommand({
                RequestItems: { [this.table]: { Keys: request, ConsistentRead: consistent } },
                ReturnConsumedCapacity: 'TOTAL',
              }),
            ),
          { idempotent: true },
        );
        for (const item of (out.Responses?.[this.table] ?? []) as Item[]) found.set(keyId(item), item);
        pending = (out.UnprocessedKeys?.[this.table]?.Keys ?? []) as Array<Record<string, unknown>>;
        if (pending.length > 0) await this.backoffUnprocessed('BatchGetItem', round, pending.length);
      }
    });
    return keys.map((k) => found.get(keyId(k))).filter((i): i is Item => i !== undefined);
  }

  async batchPut(items: Item[]): Promise<void> {
    items.forEach(validateItem);
    // One request may not name a key twice; the last item for a key wins, as it does on SQLite.
    const unique = new Map<string, Item>();
    for (const item of items) {
      unique.delete(keyId(item));
      unique.set(keyId(item), item);
    }
    const chunks = chunk([...unique.values()], BATCH_WRITE_MAX);
    await forEachLimited(chunks, BATCH_CONCURRENCY, async (batch) => {
      let pending: Array<Record<string, unknown>> = batch.map((item) => ({ PutRequest: { Item: item } }));
      for (let round = 1; pending.length > 0; round++) {
        const request = pending;
        const out = await this.call(
          'BatchWriteItem',
          () => this.doc.send(new BatchWriteCommand({ RequestItems: { [this.table]: request as never }, ReturnConsumedCapacity: 'TOTAL' })),
          { idempotent: true },
        );
        pending = (out.UnprocessedItems?.[this.table] ?? []) as Array<Record<string, unknown>>;
        if (pending.length > 0) await this.backoffUnprocessed('BatchWriteItem', round, pending.length);
      }
    });
  }

  private async backoffUnprocessed(op: DynamoOperation, round: number, left: number): Promise<void> {
    this.bump('unprocessedRetries');
    if (round >= this.retry.maxAttempts) {
      throw new Throttled(`DynamoDB left ${left} requests of ${op} unprocessed after ${round} attempts; retry the whole call`, {
        operation: op,
        attempts: round,
      });
    }
    await sleep(backoffDelay(this.retry, round));
  }

  // ---------------------------------------------------------------------------------------------
  // Accounting

  /**
   * Requests sent per DynamoDB operation (every attempt counts), `retries`, and the capacity units
   * DynamoDB reported (`capacityUnits` in total and `{Operation}.capacityUnits`).
   */
  stats(): Record<string, number> {
    return Object.fromEntries([...this.counters.entries()].sort(([a], [b]) => a.localeCompare(b)));
  }

  resetStats(): void {
    this.counters.clear();
  }

  /** Idempotent; later calls fail with InternalError. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.doc.destroy();
    this.client.destroy();
  }

  private bump(name: string, by = 1): void {
    this.counters.set(name, (this.counters.get(name) ?? 0) + by);
  }

  private recordCapacity(op: DynamoOperation, out: unknown): void {
    const consumed = (out as { ConsumedCapacity?: unknown }).ConsumedCapacity;
    const list = Array.isArray(consumed) ? consumed : consumed ? [consumed] : [];
    let units = 0;
    for (const c of list) units += Number((c as { CapacityUnits?: number }).CapacityUnits ?? 0);
    if (list.length > 0) {
      this.bump(`${op}.capacityUnits`, units);
      this.bump('capacityUnits', units);
    }
  }

  /** Sends one request with the retry rules of the header comment, counting every attempt. */
  private async call<T>(op: DynamoOperation, send: () => Promise<T>, ctx: CallContext): Promise<T> {
    // Using a store after close() is a bug of the caller, not a storage failure.
    if (this.closed) throw new InternalError(`the DynamoDB item store for ${this.location} is closed`);
    for (let attempt = 1; ; attempt++) {
      this.bump(op);
      let error: AwsError;
      try {
        const out = await send();
        this.recordCapacity(op, out);
        return out;
      } catch (e) {
        error = e as AwsError;
      }
      const kind = classify(error);
      if (mayRetry(this.retry, kind, ctx.idempotent, attempt)) {
        this.bump('retries');
        await sleep(backoffDelay(this.retry, attempt));
        continue;
      }
      throw toContractError(error, kind, { operation: op, table: this.table, attempts: attempt }, ctx);
    }
  }
}

class TableMissing extends Error {}
class TableBusy extends Error {}

function withExpressions(b: ExpressionBuilder, condition: string | undefined) {
  const names = b.attributeNames();
  const values = b.attributeValues();
  return {
    ...(condition ? { ConditionExpression: condition } : {}),
    ...(names ? { ExpressionAttributeNames: names } : {}),
    ...(values ? { ExpressionAttributeValues: values } : {}),
  };
}

/** The caller's idempotency token (hashed down when longer than DynamoDB allows) or a random one. */
function clientRequestToken(token: string | undefined): string {
  if (token === undefined) return randomUUID();
  if (typeof token !== 'string' || token.length === 0) throw new InvalidInput('a transaction token must be a non-empty string');
  if (token.length <= MAX_TOKEN_LENGTH && /^[\x21-\x7e]+$/.test(token)) return token;
  // Deterministic, so a retry with the same long token maps to the same DynamoDB token.
  return `h-${createHashHex(token).slice(0, MAX_TOKEN_LENGTH - 2)}`;
}

function createHashHex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

function need(v: string | undefined): string {
  if (typeof v !== 'string' || v.length === 0) throw new InvalidInput('invalid cursor for this query');
  return v;
}

function keyId(k: { PK: string; SK: string }): string {
  return `${k.PK}\u0000${k.SK}`;
}

function chunk<T>(list: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size));
  return out;
}
