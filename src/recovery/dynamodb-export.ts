/**
 * The DynamoDB-native backup path (issue 17 item 5; docs/reliability.md "Distributed backup"): what an
 * operator of a real AWS installation uses — point-in-time recovery on the table
 * (UpdateContinuousBackups) and ExportTableToPointInTime into S3 (DescribeExport until COMPLETED; the
 * export's manifest-summary.json and manifest-files.json; DynamoDB JSON data files, gzip) — driven from
 * the installation's own URLs (the table of its metadata URL; by default the bucket of its content URL
 * under `alp-native-backups/{table}/`). Each export is recorded in the installation as a
 * `native_backup` item (SYS#installation / NATIVE_BACKUP#{id}) with the sha256 of its
 * manifest-summary.json once the export's files are verified (every data file's MD5 and item count
 * against manifest-files.json, their sum against the summary). It is deliberately not a `backup`
 * record: retention reads only those as reference sources (what protects the objects an export's items
 * name is in the docs). Restoring (ImportTable from the export's data, or RestoreTableToPointInTime at the
 * export time) is dynamodb-export-restore.ts; ALP's reconcile then runs over the new table.
 *
 * The engine-neutral `alp backup` stays the path of the embedded profile and of the tests.
 */
import { createHash } from 'node:crypto';
import { createGunzip } from 'node:zlib';
import {
  DescribeContinuousBackupsCommand,
  DescribeExportCommand,
  DescribeTableCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  type ExportDescription,
  ExportTableToPointInTimeCommand,
  UpdateContinuousBackupsCommand,
} from '@aws-sdk/client-dynamodb';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { StorageConfig } from '../core/config.ts';
import { type Digest, sha256 } from '../core/digest.ts';
import { Conflict, IntegrityError, NotFound, UsageError } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { cond } from '../store/item-store.ts';
import { NATIVE_BACKUPS, nativeBackupKey } from '../system/backups.ts';
import type { ServiceContext } from '../system/context.ts';
import { readInstallation } from '../system/installation.ts';

export const NATIVE_BACKUP_TYPE = 'native_backup';

export interface NativeBackupConfig {
  table: string;
  region: string;
  endpoint?: string;
  bucket: string;
  /** Ends with '/': the export's S3Prefix is `${prefix}${id}`. */
  prefix: string;
  s3Region: string;
  s3Endpoint?: string;
}

export interface NativeBackupRecord {
  native_backup_id: string;
  kind: 'dynamodb-export';
  status: 'IN_PROGRESS' | 'COMPLETED' | 'FAILED';
  installation_id: string;
  table: string;
  table_arn: string;
  export_arn: string;
  /** The point in time the export reads (the request's, or the service's start time). */
  export_time?: string;
  s3_bucket: string;
  s3_prefix: string;
  started_at: string;
  created_by: string;
  manifest_summary_key?: string;
  /** sha256 of manifest-summary.json as stored: what a restore proof can name. */
  manifest_digest?: Digest;
  manifest_files_digest?: Digest;
  item_count?: number;
  data_files?: number;
  completed_at?: string;
  failure?: string;
}

/** The table of the installation's metadata URL; the bucket of its content URL unless given. */
export function nativeBackupConfig(storage: StorageConfig, opts: { bucket?: string; prefix?: string } = {}): NativeBackupConfig {
  const m = storage.metadata;
  if (m.engine !== 'dynamodb')
    throw new UsageError('a DynamoDB-native backup needs a dynamodb:// metadata URL (use alp backup for SQLite)');
  const c = storage.content;
  const bucket = opts.bucket ?? (c.engine === 's3' ? c.bucket : undefined);
  if (!bucket) throw new UsageError('the content store is not S3: give the export bucket (--bucket)');
  const prefix = opts.prefix ?? `alp-native-backups/${m.table}/`;
  return {
    table: m.table,
    region: m.region,
    ...(m.endpoint ? { endpoint: m.endpoint } : {}),
    bucket,
    prefix: prefix.endsWith('/') ? prefix : `${prefix}/`,
    s3Region: c.engine === 's3' ? c.region : m.region,
    ...(c.engine === 's3' && c.endpoint ? { s3Endpoint: c.endpoint } : {}),
  };
}

export interface NativeClients {
  ddb: DynamoDBClient;
  s3: S3Client;
  close(): void;
}

export function nativeClients(cfg: NativeBackupConfig, opts: { credentials?: DynamoDBClientConfig['credentials'] } = {}): NativeClients {
  const credentials = opts.credentials ? { credentials: opts.credentials } : {};
  const ddb = new DynamoDBClient({ region: cfg.region, ...(cfg.endpoint ? { endpoint: cfg.endpoint } : {}), ...credentials });
  const s3 = new S3Client({
    region: cfg.s3Region,
    ...(cfg.s3Endpoint ? { endpoint: cfg.s3Endpoint, forcePathStyle: true } : {}),
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    ...credentials,
  });
  return {
    ddb,
    s3,
    close: () => {
      ddb.destroy();
      s3.destroy();
    },
  };
}

export { nativeBackupKey };

export async function readNativeBackup(ctx: Pick<ServiceContext, 'items'>, id: string): Promise<NativeBackupRecord | undefined> {
  const item = await ctx.items.get(nativeBackupKey(id), { consistent: true });
  if (!item || item.type !== NATIVE_BACKUP_TYPE) return undefined;
  const { PK: _p, SK: _s, type: _t, ...rest } = item;
  return rest as unknown as NativeBackupRecord;
}

export async function listNativeBackups(ctx: Pick<ServiceContext, 'items'>): Promise<NativeBackupRecord[]> {
  const out: NativeBackupRecord[] = [];
  let cursor: string | undefined;
  do {
    const page = await ctx.items.query({
      pk: NATIVE_BACKUPS.pk,
      sk: { beginsWith: NATIVE_BACKUPS.skPrefix },
      consistent: true,
      ...(cursor ? { cursor } : {}),
    });
    for (const { PK: _p, SK: _s, type: _t, ...rest } of page.items) out.push(rest as unknown as NativeBackupRecord);
    cursor = page.cursor;
  } while (cursor);
  return out;
}

/** Turns on point-in-time recovery (idempotent); returns the recovery window. */
export async function enablePointInTimeRecovery(c: NativeClients, cfg: NativeBackupConfig) {
  const r = await c.ddb.send(
    new UpdateContinuousBackupsCommand({ TableName: cfg.table, PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true } }),
  );
  return r.ContinuousBackupsDescription?.PointInTimeRecoveryDescription;
}

/** Starts an export of the table at `exportTime` (default: now) and records it IN_PROGRESS. */
export async function startNativeExport(
  ctx: ServiceContext,
  c: NativeClients,
  cfg: NativeBackupConfig,
  opts: { actor: string; exportTime?: Date; enablePitr?: boolean },
): Promise<NativeBackupRecord> {
  const installation = await readInstallation(ctx);
  if (!installation) throw new NotFound('there is no installation here to back up (run alp init first)');
  const backups = await c.ddb.send(new DescribeContinuousBackupsCommand({ TableName: cfg.table }));
  const pitr = backups.ContinuousBackupsDescription?.PointInTimeRecoveryDescription?.PointInTimeRecoveryStatus;
  if (pitr !== 'ENABLED') {
    if (!opts.enablePitr)
      throw new Conflict(`point-in-time recovery is ${pitr ?? 'DISABLED'} on ${cfg.table}: enable it (--enable-pitr) first`);
    await enablePointInTimeRecovery(c, cfg);
  }
  const table = await c.ddb.send(new DescribeTableCommand({ TableName: cfg.table }));
  const tableArn = table.Table?.TableArn;
  if (!tableArn) throw new NotFound(`table ${cfg.table} has no ARN`);
  const id = newId(ctx.clock);
  const s3Prefix = `${cfg.prefix}${id}`;
  const r = await c.ddb.send(
    new ExportTableToPointInTimeCommand({
      TableArn: tableArn,
      S3Bucket: cfg.bucket,
      S3Prefix: s3Prefix,
      ExportFormat: 'DYNAMODB_JSON',
      ExportType: 'FULL_EXPORT',
      ClientToken: id,
      ...(opts.exportTime ? { ExportTime: opts.exportTime } : {}),
    }),
  );
  const d = r.ExportDescription;
  if (!d?.ExportArn) throw new IntegrityError('ExportTableToPointInTime answered without an ExportArn');
  const record: NativeBackupRecord = {
    native_backup_id: id,
    kind: 'dynamodb-export',
    status: 'IN_PROGRESS',
    installation_id: installation.installation_id,
    table: cfg.table,
    table_arn: tableArn,
    export_arn: d.ExportArn,
    ...(d.ExportTime ? { export_time: d.ExportTime.toISOString() } : {}),
    s3_bucket: cfg.bucket,
    s3_prefix: s3Prefix,
    started_at: ctx.clock.now().toISOString(),
    created_by: opts.actor,
  };
  await ctx.items.put({ ...nativeBackupKey(id), type: NATIVE_BACKUP_TYPE, ...record }, { condition: cond.notExists() });
  return record;
}

async function getBytes(c: NativeClients, bucket: string, key: string): Promise<Buffer> {
  const r = await c.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  if (!r.Body) throw new IntegrityError(`s3://${bucket}/${key} has no body`);
  return Buffer.from(await r.Body.transformToByteArray());
}

/** MD5 (base64) and line count of a gzip data file, streamed; `gzip` false when the bytes do not inflate. */
async function dataFileFacts(c: NativeClients, bucket: string, key: string): Promise<{ md5: string; lines: number; gzip: boolean }> {
  const r = await c.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  const md5 = createHash('md5');
  const gunzip = createGunzip();
  let lines = 0;
  let gzip = true;
  gunzip.on('data', (chunk: Buffer) => {
    for (const b of chunk) if (b === 0x0a) lines++;
  });
  const done = new Promise<void>((resolve) => {
    gunzip.on('end', resolve);
    gunzip.on('error', () => {
      gzip = false;
      resolve();
    });
  });
  for await (const chunk of r.Body as AsyncIterable<Uint8Array>) {
    md5.update(chunk);
    if (gzip) gunzip.write(chunk);
  }
  gunzip.end();
  await done;
  return { md5: md5.digest('base64'), lines, gzip };
}

/** Verifies a COMPLETED export's manifests and data files; returns what the record keeps. */
async function verifyExportFiles(c: NativeClients, rec: NativeBackupRecord, d: ExportDescription) {
  const summaryKey = d.ExportManifest;
  if (!summaryKey) throw new IntegrityError(`export ${rec.export_arn} is COMPLETED without an ExportManifest`);
  const summaryBytes = await getBytes(c, rec.s3_bucket, summaryKey);
  const summary = JSON.parse(summaryBytes.toString('utf8')) as { exportArn?: string; itemCount?: number; manifestFilesS3Key?: string };
  if (summary.exportArn !== rec.export_arn)
    throw new IntegrityError(`${summaryKey} names export ${summary.exportArn}, not ${rec.export_arn}`);
  if (!summary.manifestFilesS3Key) throw new IntegrityError(`${summaryKey} names no manifest-files`);
  const filesBytes = await getBytes(c, rec.s3_bucket, summary.manifestFilesS3Key);
  let items = 0;
  let files = 0;
  for (const line of filesBytes.toString('utf8').split('\n')) {
    if (!line.trim()) continue;
    const f = JSON.parse(line) as { itemCount: number; md5Checksum: string; dataFileS3Key: string };
    const facts = await dataFileFacts(c, rec.s3_bucket, f.dataFileS3Key);
    if (facts.md5 !== f.md5Checksum) throw new IntegrityError(`${f.dataFileS3Key}: MD5 ${facts.md5}, the manifest says ${f.md5Checksum}`);
    if (!facts.gzip) throw new IntegrityError(`${f.dataFileS3Key}: not a gzip stream`);
    if (facts.lines !== f.itemCount) throw new IntegrityError(`${f.dataFileS3Key}: ${facts.lines} items, the manifest says ${f.itemCount}`);
    items += f.itemCount;
    files++;
  }
  if (summary.itemCount !== undefined && summary.itemCount !== items)
    throw new IntegrityError(`the data files hold ${items} items, ${summaryKey} says ${summary.itemCount}`);
  return {
    manifest_summary_key: summaryKey,
    manifest_digest: sha256(summaryBytes),
    manifest_files_digest: sha256(filesBytes),
    item_count: items,
    data_files: files,
  };
}

/** DescribeExport once; a COMPLETED export is verified and recorded COMPLETED (FAILED likewise). */
export async function refreshNativeExport(ctx: ServiceContext, c: NativeClients, id: string): Promise<NativeBackupRecord> {
  const rec = await readNativeBackup(ctx, id);
  if (!rec) throw new NotFound(`no native backup ${id} in this installation`);
  if (rec.status !== 'IN_PROGRESS') return rec;
  const d = (await c.ddb.send(new DescribeExportCommand({ ExportArn: rec.export_arn }))).ExportDescription;
  if (!d || d.ExportStatus === 'IN_PROGRESS') return rec;
  const set: Partial<NativeBackupRecord> =
    d.ExportStatus === 'COMPLETED'
      ? { status: 'COMPLETED', ...(await verifyExportFiles(c, rec, d)), completed_at: ctx.clock.now().toISOString() }
      : { status: 'FAILED', failure: `${d.FailureCode ?? 'FAILED'}: ${d.FailureMessage ?? ''}`.trim() };
  if (d.ExportTime) set.export_time = d.ExportTime.toISOString();
  await ctx.items.update(nativeBackupKey(id), { set }, { condition: cond.eq('status', 'IN_PROGRESS') });
  return { ...rec, ...set };
}

/** Polls until the export leaves IN_PROGRESS (or `timeoutMs` passes: then it is still IN_PROGRESS). */
export async function waitNativeExport(
  ctx: ServiceContext,
  c: NativeClients,
  id: string,
  opts: { pollMs?: number; timeoutMs?: number } = {},
): Promise<NativeBackupRecord> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60 * 60_000);
  for (;;) {
    const rec = await refreshNativeExport(ctx, c, id);
    if (rec.status !== 'IN_PROGRESS' || Date.now() >= deadline) return rec;
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 10_000));
  }
}
