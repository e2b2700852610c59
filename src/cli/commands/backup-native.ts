/**
 * alp backup-native export | status | list | restore: the DynamoDB-native backup path (issue 17 item 5;
 * recovery/dynamodb-export.ts): point-in-time recovery + ExportTableToPointInTime into S3, recorded in
 * the installation, and a restore into a new table (ImportTable or RestoreTableToPointInTime) followed by
 * ALP's reconcile over it; `alp reconcile --activate` on the new table makes it usable. The
 * engine-neutral `alp backup` stays the path for the embedded profile.
 */
import type { Command } from 'commander';
import { UsageError } from '../../core/errors.ts';
import {
  listNativeBackups,
  type NativeBackupRecord,
  nativeBackupConfig,
  nativeClients,
  readNativeBackup,
  refreshNativeExport,
  startNativeExport,
  waitNativeExport,
} from '../../recovery/dynamodb-export.ts';
import { holdNativeRestore, type NativeRestoreVia, restoreNativeTable } from '../../recovery/dynamodb-export-restore.ts';
import { type ReconcileReport, reconcile } from '../../recovery/reconcile.ts';
import { openInstallation } from '../../runtime/open.ts';
import { phaseBars } from '../progress.ts';
import { actingPrincipal, output, parseIntOption, type Runtime, withRuntime } from '../runtime.ts';

function recordLines(r: NativeBackupRecord): string[] {
  return [
    `native backup ${r.native_backup_id}: ${r.status} (${r.kind} of ${r.table}${r.export_time ? ` at ${r.export_time}` : ''})`,
    `  s3://${r.s3_bucket}/${r.s3_prefix}  ${r.export_arn}`,
    ...(r.manifest_digest
      ? [`  manifest ${r.manifest_summary_key} ${r.manifest_digest}, ${r.item_count} items in ${r.data_files} files`]
      : []),
    ...(r.failure ? [`  failure: ${r.failure}`] : []),
  ];
}

function waitOptions(o: { pollMs?: string; timeout?: string }) {
  return {
    pollMs: parseIntOption('--poll-ms', o.pollMs, { min: 10 }) ?? 10_000,
    timeoutMs: (parseIntOption('--timeout', o.timeout, { min: 1 }) ?? 3600) * 1000,
  };
}

function clientsOf(rt: Runtime, o: { bucket?: string; prefix?: string }) {
  const cfg = nativeBackupConfig(rt.config, { ...(o.bucket ? { bucket: o.bucket } : {}), ...(o.prefix ? { prefix: o.prefix } : {}) });
  return { cfg, clients: nativeClients(cfg) };
}

/** Restores into `table`, holds it, reconciles it (through a second runtime opened on the new table). */
async function restoreCommand(rt: Runtime, id: string, o: { table?: string; via?: string; pollMs?: string; timeout?: string }) {
  if (!o.table) throw new UsageError('give the new table to restore into (--table NAME)');
  const via = (o.via ?? 'import') as NativeRestoreVia;
  if (via !== 'import' && via !== 'pitr') throw new UsageError('--via is import or pitr');
  const rec = await readNativeBackup(rt.ctx, id);
  if (!rec) throw new UsageError(`no native backup ${id} in this installation (alp backup-native list)`);
  const { clients } = clientsOf(rt, { bucket: rec.s3_bucket });
  const who = await actingPrincipal(rt);
  try {
    await restoreNativeTable(clients, rec, { targetTable: o.table, via, ...waitOptions(o) });
  } finally {
    clients.close();
  }
  if (rt.config.metadata.engine !== 'dynamodb') throw new UsageError('the installation is not on DynamoDB');
  const target = await openInstallation({ metadata: { ...rt.config.metadata, table: o.table }, content: rt.config.content }, rt.ctx.clock);
  try {
    const restore = await holdNativeRestore(target.ctx, rec, {
      actor: who.id,
      via,
      sourceMetadata: rt.ctx.items.location,
      sourceContent: rt.ctx.content.location,
    });
    const bars = phaseBars(rt.opts.json);
    const report: ReconcileReport = await reconcile(target.ctx, { actor: who.id, progress: bars }).finally(() => bars.stop());
    return { restore, reconcile: report, target: target.ctx.items.location };
  } finally {
    await target.close();
  }
}

export function registerNativeBackupCommands(program: Command): void {
  const cmd = program
    .command('backup-native')
    .description('DynamoDB-native backups: point-in-time recovery and export to S3, restored into a new table and reconciled');
  cmd
    .command('export')
    .description('export the table to S3 at a point in time (ExportTableToPointInTime) and record it here')
    .option('--bucket <name>', 'the export bucket (default: the content bucket)')
    .option('--prefix <prefix>', 'the export prefix (default alp-native-backups/{table}/)')
    .option('--enable-pitr', 'turn on point-in-time recovery first when it is off')
    .option('--at <iso-time>', 'the point in time to export (default: now)')
    .option('--wait', 'wait until the export completes and is verified')
    .option('--poll-ms <n>', 'DescribeExport interval with --wait (default 10000)')
    .option('--timeout <seconds>', 'give up waiting after this long (default 3600; the export goes on)')
    .action(async (o, c: Command) =>
      withRuntime(c, async (rt) => {
        const { cfg, clients } = clientsOf(rt, o);
        try {
          const who = await actingPrincipal(rt);
          const at = o.at ? new Date(String(o.at)) : undefined;
          if (at && Number.isNaN(at.getTime())) throw new UsageError('--at must be an ISO time');
          let r = await startNativeExport(rt.ctx, clients, cfg, {
            actor: who.id,
            ...(at ? { exportTime: at } : {}),
            enablePitr: o.enablePitr === true,
          });
          if (o.wait) r = await waitNativeExport(rt.ctx, clients, r.native_backup_id, waitOptions(o));
          output(rt.opts, r, () => recordLines(r));
        } finally {
          clients.close();
        }
      }),
    );
  cmd
    .command('status <id>')
    .description('ask DynamoDB how the export is doing; a completed export is verified (manifests, every data file) and recorded')
    .option('--wait', 'wait until it leaves IN_PROGRESS')
    .option('--poll-ms <n>', 'DescribeExport interval with --wait (default 10000)')
    .option('--timeout <seconds>', 'give up waiting after this long (default 3600)')
    .action(async (id: string, o, c: Command) =>
      withRuntime(c, async (rt) => {
        const rec = await readNativeBackup(rt.ctx, id);
        const { clients } = clientsOf(rt, rec ? { bucket: rec.s3_bucket } : {});
        try {
          const r = o.wait ? await waitNativeExport(rt.ctx, clients, id, waitOptions(o)) : await refreshNativeExport(rt.ctx, clients, id);
          output(rt.opts, r, () => recordLines(r));
        } finally {
          clients.close();
        }
      }),
    );
  cmd
    .command('list')
    .description('the native backups recorded by this installation')
    .action(async (_o, c: Command) =>
      withRuntime(c, async (rt) => {
        const list = await listNativeBackups(rt.ctx);
        output(rt.opts, { native_backups: list }, () => list.flatMap(recordLines));
      }),
    );
  cmd
    .command('restore <id>')
    .description(
      'restore a COMPLETED export into a NEW table (ImportTable, or --via pitr), hold it and reconcile it; then alp reconcile --activate there',
    )
    .option('--table <name>', 'the new table (must not exist)')
    .option('--via <how>', 'import (ImportTable from the export) or pitr (RestoreTableToPointInTime at the export time)', 'import')
    .option('--poll-ms <n>', 'status interval (default 10000)')
    .option('--timeout <seconds>', 'give up waiting after this long (default 3600)')
    .action(async (id: string, o, c: Command) =>
      withRuntime(c, async (rt) => {
        const r = await restoreCommand(rt, id, o);
        output(rt.opts, r, () => [
          `restored native backup ${id} into ${r.target} (restore ${r.restore.restore_id}, held)`,
          `  reconciliation ${r.reconcile.reconcile_id}: ${r.reconcile.status}, ${r.reconcile.objects.verified}/${r.reconcile.objects.referenced} objects verified`,
          r.reconcile.status === 'VERIFIED'
            ? `  next: alp reconcile --activate with --metadata naming ${r.target}`
            : '  not VERIFIED: do not activate; see the findings with --json',
        ]);
      }),
    );
}
