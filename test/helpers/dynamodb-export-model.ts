/**
 * A MODEL of DynamoDB's point-in-time recovery, export to S3 and import from S3 (DynamoDB Local has none
 * of these APIs): a loopback HTTP proxy in front of DynamoDB Local that answers UpdateContinuousBackups,
 * DescribeContinuousBackups, ExportTableToPointInTime, DescribeExport, ImportTable, DescribeImport and
 * RestoreTableToPointInTime itself and forwards every other action unchanged. Shapes follow the AWS API
 * reference (JSON 1.0 protocol, timestamps as epoch seconds). An export reads the whole table (consistent
 * Scan) at the request, answers IN_PROGRESS, then writes what AWS writes into the bucket (s3rver):
 * `{S3Prefix}/AWSDynamoDB/{ExportId}/` with `_started`, `data/*.json.gz` (one `{"Item":{…}}` line per
 * item, DynamoDB JSON, gzip; two files, by a hash of PK, one may be empty), `manifest-files.json` (one
 * line per data file: itemCount, md5Checksum, etag, dataFileS3Key), `manifest-summary.json` and their
 * `.md5` files, and only then reports COMPLETED. Model limits, named: a past ExportTime is refused
 * (the model keeps no history), and RestoreTableToPointInTime restores only to the instant of an
 * earlier export of the table (the snapshots it kept) or with UseLatestRestorableTime.
 */
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync, gzipSync } from 'node:zlib';
import {
  type AttributeValue,
  BatchWriteItemCommand,
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';

type Row = Record<string, AttributeValue>;
type Json = Record<string, unknown>;

class ModelError extends Error {
  constructor(
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

export interface ExportModel {
  endpoint: string;
  /** Every action the model answered itself, in order. */
  answered: string[];
  /** Delay before an export or import completes (DescribeExport says IN_PROGRESS meanwhile). */
  delayMs: number;
  /** While paused, no export or import completes (they stay IN_PROGRESS); resume() lets them finish. */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

const secs = (d: Date) => d.getTime() / 1000;

export async function startExportModel(dynamoEndpoint: string, s3: S3Client): Promise<ExportModel> {
  const upstream = new URL(dynamoEndpoint);
  const pitr = new Map<string, Date>();
  const snapshots = new Map<string, Array<{ at: number; items: Row[] }>>();
  const exports = new Map<string, Json>();
  const imports = new Map<string, Json>();
  const answered: string[] = [];
  let gate: { promise: Promise<void>; open: () => void } | undefined;
  const model: ExportModel = {
    endpoint: '',
    answered,
    delayMs: 50,
    pause: () => {
      if (gate) return;
      let open = () => {};
      const promise = new Promise<void>((r) => {
        open = r;
      });
      gate = { promise, open };
    },
    resume: () => {
      gate?.open();
      gate = undefined;
    },
    stop: async () => {},
  };

  const clientFor = (auth: string) => {
    const m = /Credential=([^/]+)\/\d+\/([^/]+)\//.exec(auth);
    return new DynamoDBClient({
      region: m?.[2] ?? 'us-east-1',
      endpoint: dynamoEndpoint,
      credentials: { accessKeyId: m?.[1] ?? 'model', secretAccessKey: 'model' },
    });
  };
  const scanAll = async (ddb: DynamoDBClient, table: string) => {
    const items: Row[] = [];
    let start: Row | undefined;
    do {
      const page = await ddb.send(
        new ScanCommand({ TableName: table, ConsistentRead: true, ...(start ? { ExclusiveStartKey: start } : {}) }),
      );
      items.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start);
    return items;
  };
  const writeAll = async (ddb: DynamoDBClient, table: string, items: Row[]) => {
    for (let i = 0; i < items.length; i += 25) {
      let req: Record<string, Array<{ PutRequest: { Item: Row } }>> = {
        [table]: items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })),
      };
      while (Object.keys(req).length) {
        const r = await ddb.send(new BatchWriteItemCommand({ RequestItems: req }));
        req = (r.UnprocessedItems ?? {}) as typeof req;
      }
    }
  };
  const tableOf = (arn: string) => arn.slice(arn.indexOf(':table/') + ':table/'.length).split('/')[0] as string;
  const pitrDescription = (table: string) => {
    const since = pitr.get(table);
    return {
      ContinuousBackupsStatus: 'ENABLED',
      PointInTimeRecoveryDescription: since
        ? { PointInTimeRecoveryStatus: 'ENABLED', EarliestRestorableDateTime: secs(since), LatestRestorableDateTime: secs(new Date()) }
        : { PointInTimeRecoveryStatus: 'DISABLED' },
    };
  };

  async function writeExport(d: Json, items: Row[]): Promise<void> {
    const bucket = d.S3Bucket as string;
    const base = `${d.S3Prefix ? `${d.S3Prefix as string}/` : ''}AWSDynamoDB/${d.exportId as string}`;
    const put = (Key: string, Body: Buffer | string) => s3.send(new PutObjectCommand({ Bucket: bucket, Key, Body }));
    await put(`${base}/_started`, '');
    const parts: Row[][] = [[], []];
    for (const it of items)
      (
        parts[
          (createHash('md5')
            .update(it.PK?.S ?? '')
            .digest()[0] as number) % 2
        ] as Row[]
      ).push(it);
    const lines: string[] = [];
    for (const part of parts) {
      const gz = gzipSync(Buffer.from(part.map((Item) => `${JSON.stringify({ Item })}\n`).join('')));
      const key = `${base}/data/${randomBytes(12).toString('hex')}.json.gz`;
      await put(key, gz);
      const md5 = createHash('md5').update(gz);
      const md5b64 = md5.copy().digest('base64');
      lines.push(JSON.stringify({ itemCount: part.length, md5Checksum: md5b64, etag: md5.digest('hex'), dataFileS3Key: key }));
    }
    const files = `${lines.join('\n')}\n`;
    await put(`${base}/manifest-files.json`, files);
    await put(`${base}/manifest-files.md5`, createHash('md5').update(files).digest('hex'));
    const summary = JSON.stringify({
      version: '2020-06-30',
      exportArn: d.ExportArn,
      startTime: new Date((d.StartTime as number) * 1000).toISOString(),
      endTime: new Date().toISOString(),
      tableArn: d.TableArn,
      tableId: 'model-table-id',
      exportTime: new Date((d.ExportTime as number) * 1000).toISOString(),
      s3Bucket: bucket,
      s3Prefix: d.S3Prefix ?? null,
      s3SseAlgorithm: 'AES256',
      s3SseKmsKeyId: null,
      manifestFilesS3Key: `${base}/manifest-files.json`,
      billedSizeBytes: 0,
      itemCount: items.length,
      outputFormat: 'DYNAMODB_JSON',
    });
    await put(`${base}/manifest-summary.json`, summary);
    await put(`${base}/manifest-summary.md5`, createHash('md5').update(summary).digest('hex'));
    Object.assign(d, {
      ExportStatus: 'COMPLETED',
      EndTime: secs(new Date()),
      ItemCount: items.length,
      BilledSizeBytes: 0,
      ExportManifest: `${base}/manifest-summary.json`,
    });
  }

  const later = (fn: () => Promise<void>, onError: (e: Error) => void) =>
    setTimeout(() => void (gate?.promise ?? Promise.resolve()).then(fn).catch(onError), model.delayMs);

  async function readImportItems(bucket: string, prefix: string): Promise<Row[]> {
    const items: Row[] = [];
    let token: string | undefined;
    do {
      const page = await s3.send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) }),
      );
      for (const o of page.Contents ?? []) {
        const body = await (await s3.send(new GetObjectCommand({ Bucket: bucket, Key: o.Key }))).Body?.transformToByteArray();
        for (const line of gunzipSync(Buffer.from(body ?? []))
          .toString('utf8')
          .split('\n'))
          if (line.trim()) items.push((JSON.parse(line) as { Item: Row }).Item);
      }
      token = page.NextContinuationToken;
    } while (token);
    return items;
  }

  const actions: Record<string, (body: Json, ddb: DynamoDBClient) => Promise<Json>> = {
    UpdateContinuousBackups: async (b, ddb) => {
      const table = b.TableName as string;
      await ddb.send(new DescribeTableCommand({ TableName: table }));
      if ((b.PointInTimeRecoverySpecification as Json)?.PointInTimeRecoveryEnabled) {
        if (!pitr.has(table)) pitr.set(table, new Date());
      } else pitr.delete(table);
      return { ContinuousBackupsDescription: pitrDescription(table) };
    },
    DescribeContinuousBackups: async (b, ddb) => {
      await ddb.send(new DescribeTableCommand({ TableName: b.TableName as string }));
      return { ContinuousBackupsDescription: pitrDescription(b.TableName as string) };
    },
    ExportTableToPointInTime: async (b, ddb) => {
      const table = tableOf(b.TableArn as string);
      if (!pitr.has(table))
        throw new ModelError('PointInTimeRecoveryUnavailableException', `Point in time recovery is not enabled for table '${table}'`);
      const now = new Date();
      if (b.ExportTime !== undefined && Math.abs((b.ExportTime as number) - secs(now)) > 5)
        throw new ModelError('InvalidExportTimeException', 'model: an ExportTime in the past is not modelled');
      const items = await scanAll(ddb, table);
      const snaps = snapshots.get(table) ?? [];
      snaps.push({ at: secs(now), items });
      snapshots.set(table, snaps);
      const exportId = `${now.getTime()}-${randomBytes(4).toString('hex')}`;
      const d: Json = {
        ExportArn: `${b.TableArn as string}/export/${exportId}`,
        ExportStatus: 'IN_PROGRESS',
        StartTime: secs(now),
        ExportTime: secs(now),
        TableArn: b.TableArn,
        S3Bucket: b.S3Bucket,
        ...(b.S3Prefix ? { S3Prefix: b.S3Prefix } : {}),
        ExportFormat: b.ExportFormat ?? 'DYNAMODB_JSON',
        ExportType: b.ExportType ?? 'FULL_EXPORT',
        ...(b.ClientToken ? { ClientToken: b.ClientToken } : {}),
      };
      exports.set(d.ExportArn as string, Object.assign(d, { exportId }));
      later(
        () => writeExport(d, items),
        (e) => Object.assign(d, { ExportStatus: 'FAILED', FailureCode: 'S3WriteFailed', FailureMessage: e.message }),
      );
      return { ExportDescription: withoutPrivate(d) };
    },
    DescribeExport: async (b) => {
      const d = exports.get(b.ExportArn as string);
      if (!d) throw new ModelError('ExportNotFoundException', `Export ${String(b.ExportArn)} not found`);
      return { ExportDescription: withoutPrivate(d) };
    },
    ImportTable: async (b, ddb) => {
      const params = b.TableCreationParameters as Json;
      const source = b.S3BucketSource as { S3Bucket: string; S3KeyPrefix?: string };
      if (b.InputFormat !== 'DYNAMODB_JSON' || b.InputCompressionType !== 'GZIP')
        throw new ModelError('ValidationException', 'model: only DYNAMODB_JSON + GZIP');
      const created = await ddb.send(new CreateTableCommand(params as unknown as ConstructorParameters<typeof CreateTableCommand>[0]));
      const arn = `${created.TableDescription?.TableArn as string}/import/${randomBytes(6).toString('hex')}`;
      const d: Json = {
        ImportArn: arn,
        ImportStatus: 'IN_PROGRESS',
        TableArn: created.TableDescription?.TableArn,
        S3BucketSource: source,
        StartTime: secs(new Date()),
      };
      imports.set(arn, d);
      later(
        async () => {
          const items = await readImportItems(source.S3Bucket, source.S3KeyPrefix ?? '');
          await writeAll(ddb, params.TableName as string, items);
          Object.assign(d, {
            ImportStatus: 'COMPLETED',
            ImportedItemCount: items.length,
            ProcessedItemCount: items.length,
            EndTime: secs(new Date()),
          });
        },
        (e) => Object.assign(d, { ImportStatus: 'FAILED', FailureCode: 'ModelFailure', FailureMessage: e.message }),
      );
      return { ImportTableDescription: d };
    },
    DescribeImport: async (b) => {
      const d = imports.get(b.ImportArn as string);
      if (!d) throw new ModelError('ImportNotFoundException', `Import ${String(b.ImportArn)} not found`);
      return { ImportTableDescription: d };
    },
    RestoreTableToPointInTime: async (b, ddb) => {
      const source = (b.SourceTableName as string | undefined) ?? tableOf(b.SourceTableArn as string);
      if (!pitr.has(source))
        throw new ModelError('PointInTimeRecoveryUnavailableException', `Point in time recovery is not enabled for table '${source}'`);
      const at = b.RestoreDateTime as number | undefined;
      const snap = b.UseLatestRestorableTime
        ? { items: await scanAll(ddb, source) }
        : snapshots.get(source)?.find((s) => Math.abs(s.at - (at ?? -1)) < 0.001);
      if (!snap)
        throw new ModelError(
          'InvalidRestoreTimeException',
          'model: only the instant of an earlier export (or the latest time) is restorable',
        );
      const t = (await ddb.send(new DescribeTableCommand({ TableName: source }))).Table;
      const created = await ddb.send(
        new CreateTableCommand({
          TableName: b.TargetTableName as string,
          BillingMode: 'PAY_PER_REQUEST',
          AttributeDefinitions: t?.AttributeDefinitions,
          KeySchema: t?.KeySchema,
          GlobalSecondaryIndexes: (t?.GlobalSecondaryIndexes ?? []).map((g) => ({
            IndexName: g.IndexName,
            KeySchema: g.KeySchema,
            Projection: g.Projection,
          })),
        }),
      );
      await writeAll(ddb, b.TargetTableName as string, snap.items);
      const td = created.TableDescription;
      return {
        TableDescription: {
          TableName: td?.TableName,
          TableArn: td?.TableArn,
          TableStatus: 'CREATING',
          KeySchema: td?.KeySchema,
          CreationDateTime: secs(new Date()),
        },
      };
    },
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const action = String(req.headers['x-amz-target'] ?? '').split('.')[1] ?? '';
      const handler = actions[action];
      if (!handler) return forward(req, res, body);
      answered.push(action);
      const ddb = clientFor(String(req.headers.authorization ?? ''));
      handler(JSON.parse(body.toString('utf8') || '{}') as Json, ddb).then(
        (out) => reply(res, 200, out),
        (e: Error) =>
          reply(res, 400, {
            __type: `com.amazonaws.dynamodb.v20120810#${e instanceof ModelError ? e.type : (e.name ?? 'InternalServerError')}`,
            message: e.message,
          }),
      );
    });
  });
  function forward(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) {
    const up = http.request(
      { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers },
      (r) => {
        res.writeHead(r.statusCode ?? 500, r.headers);
        r.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    up.end(body);
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  model.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  model.stop = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return model;
}

function withoutPrivate(d: Json): Json {
  const { exportId: _e, ...rest } = d;
  return rest;
}

function reply(res: http.ServerResponse, status: number, body: Json) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/x-amz-json-1.0',
    'content-length': Buffer.byteLength(text),
    'x-amzn-requestid': randomBytes(8).toString('hex'),
  });
  res.end(text);
}
