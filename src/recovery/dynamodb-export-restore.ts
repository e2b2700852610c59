/**
 * Restoring a DynamoDB-native backup (dynamodb-export.ts) into a NEW table: ImportTable from the
 * export's data files (DYNAMODB_JSON, GZIP; the table created with ALP's key schema and GSI1), or
 * RestoreTableToPointInTime of the source table at the export's time. Then, in the new table, the same
 * state ALP's own restore leaves: the live locks of the source dropped (a backup never carries them),
 * the restore hold set and a RESTORED restore record naming the native backup and its manifest digest —
 * so `alp reconcile` runs over it unchanged and `alp reconcile --activate` is the only way to use it.
 */
import {
  DescribeImportCommand,
  DescribeTableCommand,
  ImportTableCommand,
  RestoreTableToPointInTimeCommand,
} from '@aws-sdk/client-dynamodb';
import { ConditionFailed, Conflict, IntegrityError, InvalidInput, Throttled } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { cond, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { readEpoch, setRestoreHoldOp } from '../system/state.ts';
import { NEVER_BACKED_UP } from './backup-format.ts';
import type { NativeBackupRecord, NativeClients } from './dynamodb-export.ts';
import { type RestoreRecord, restoreKey } from './restore.ts';

/** ALP's table schema (the same as store/dynamodb/table.ts, which a service may not import; the restore test checks the imported table against it with prepare()). */
const KEYS = ['PK', 'SK', 'GSI1PK', 'GSI1SK'];
function tableCreation(table: string) {
  const schema = (h: string, r: string) => [
    { AttributeName: h, KeyType: 'HASH' as const },
    { AttributeName: r, KeyType: 'RANGE' as const },
  ];
  return {
    TableName: table,
    BillingMode: 'PAY_PER_REQUEST' as const,
    AttributeDefinitions: KEYS.map((AttributeName) => ({ AttributeName, AttributeType: 'S' as const })),
    KeySchema: schema('PK', 'SK'),
    GlobalSecondaryIndexes: [{ IndexName: 'GSI1', KeySchema: schema('GSI1PK', 'GSI1SK'), Projection: { ProjectionType: 'ALL' as const } }],
  };
}

export type NativeRestoreVia = 'import' | 'pitr';

interface Wait {
  pollMs?: number;
  timeoutMs?: number;
}

async function poll<T>(what: string, probe: () => Promise<T | undefined>, w: Wait): Promise<T> {
  const deadline = Date.now() + (w.timeoutMs ?? 60 * 60_000);
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() >= deadline) throw new Throttled(`${what} did not finish in time: run the restore again to keep waiting`);
    await new Promise((r) => setTimeout(r, w.pollMs ?? 10_000));
  }
}

/** The export's data files' prefix: beside its manifest-summary.json. */
export function exportDataPrefix(rec: NativeBackupRecord): string {
  if (!rec.manifest_summary_key) throw new InvalidInput(`native backup ${rec.native_backup_id} is not COMPLETED`);
  return `${rec.manifest_summary_key.slice(0, rec.manifest_summary_key.lastIndexOf('/'))}/data/`;
}

/** Creates `targetTable` from the backup and waits until it is usable. */
export async function restoreNativeTable(
  c: NativeClients,
  rec: NativeBackupRecord,
  opts: { targetTable: string; via: NativeRestoreVia } & Wait,
): Promise<void> {
  if (rec.status !== 'COMPLETED')
    throw new Conflict(`native backup ${rec.native_backup_id} is ${rec.status}: only a verified, COMPLETED export restores`);
  if (opts.targetTable === rec.table) throw new InvalidInput('restore into a new table, never over the source');
  if (opts.via === 'import') {
    const r = await c.ddb.send(
      new ImportTableCommand({
        ClientToken: `${rec.native_backup_id}-${opts.targetTable}`.slice(0, 64),
        S3BucketSource: { S3Bucket: rec.s3_bucket, S3KeyPrefix: exportDataPrefix(rec) },
        InputFormat: 'DYNAMODB_JSON',
        InputCompressionType: 'GZIP',
        TableCreationParameters: tableCreation(opts.targetTable),
      }),
    );
    const arn = r.ImportTableDescription?.ImportArn;
    if (!arn) throw new IntegrityError('ImportTable answered without an ImportArn');
    const done = await poll(
      `import ${arn}`,
      async () => {
        const d = (await c.ddb.send(new DescribeImportCommand({ ImportArn: arn }))).ImportTableDescription;
        return d?.ImportStatus === 'IN_PROGRESS' ? undefined : d;
      },
      opts,
    );
    if (done?.ImportStatus !== 'COMPLETED')
      throw new IntegrityError(`import ${arn} ended ${done?.ImportStatus}: ${done?.FailureMessage ?? ''}`);
    if (rec.item_count !== undefined && done.ImportedItemCount !== undefined && done.ImportedItemCount !== rec.item_count)
      throw new IntegrityError(`import ${arn} wrote ${done.ImportedItemCount} items, the export holds ${rec.item_count}`);
  } else {
    if (!rec.export_time) throw new InvalidInput(`native backup ${rec.native_backup_id} has no export time to restore to`);
    await c.ddb.send(
      new RestoreTableToPointInTimeCommand({
        SourceTableArn: rec.table_arn,
        TargetTableName: opts.targetTable,
        RestoreDateTime: new Date(rec.export_time),
      }),
    );
  }
  await poll(
    `table ${opts.targetTable}`,
    async () => {
      const t = (await c.ddb.send(new DescribeTableCommand({ TableName: opts.targetTable }))).Table;
      const gsiReady = (t?.GlobalSecondaryIndexes ?? []).every((g) => g.IndexStatus === 'ACTIVE');
      return t?.TableStatus === 'ACTIVE' && gsiReady ? true : undefined;
    },
    opts,
  );
}

/** In the restored table: drops the source's live locks, sets the hold and a RESTORED record. */
export async function holdNativeRestore(
  target: ServiceContext,
  rec: NativeBackupRecord,
  opts: { actor: string; via: NativeRestoreVia; sourceMetadata: string; sourceContent: string },
): Promise<RestoreRecord> {
  for (const key of NEVER_BACKED_UP) await target.items.delete(key);
  const at = target.clock.now().toISOString();
  const record: RestoreRecord & { restored_via: string } = {
    restore_id: newId(target.clock),
    status: 'RESTORED',
    installation_id: rec.installation_id,
    backup_id: rec.native_backup_id,
    backup_location: `s3://${rec.s3_bucket}/${rec.manifest_summary_key ?? rec.s3_prefix}`,
    manifest_digest: rec.manifest_digest ?? '',
    backup_epoch: await readEpoch(target.items),
    backup_snapshot_at: rec.export_time ?? rec.started_at,
    with_content: false,
    items_expected: rec.item_count ?? 0,
    objects_expected: 0,
    source_metadata: opts.sourceMetadata,
    source_content: opts.sourceContent,
    target_metadata: target.items.location,
    target_content: target.content.location,
    content_root_changed: opts.sourceContent !== target.content.location,
    started_at: at,
    started_by: opts.actor,
    restored_at: at,
    items_written: rec.item_count ?? 0,
    content_from: 'none (referenced)',
    restored_via: opts.via === 'import' ? 'dynamodb ImportTable' : 'dynamodb RestoreTableToPointInTime',
  };
  const ops: TransactOp[] = [
    setRestoreHoldOp(record.restore_id, at),
    { op: 'put', item: { ...restoreKey(record.restore_id), type: 'restore', ...record }, condition: cond.notExists() },
  ];
  try {
    await target.items.transactWrite(ops);
  } catch (e) {
    if (e instanceof ConditionFailed)
      throw new Conflict('the restored table already holds a restore: the source was itself a held restore');
    throw e;
  }
  return record;
}
