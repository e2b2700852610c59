import path from 'node:path';
import type { Command } from 'commander';
import type { ContentStore } from '../../content/content-store.ts';
import { openContentStore } from '../../content/open.ts';
import { parseContentUrl } from '../../core/config.ts';
import { parseDigest } from '../../core/digest.ts';
import { ExitCode, UsageError } from '../../core/errors.ts';
import type { Principal } from '../../lifecycle/model.ts';
import { localOperator } from '../../lifecycle/principals.ts';
import { backfillStateCounts } from '../../lifecycle/state-counts.ts';
import { abandonBackup, createBackup, listBackups, retireBackup } from '../../recovery/backup.ts';
import { readManifest } from '../../recovery/backup-format.ts';
import { activateRestore, type ReconcileReport, reconcile } from '../../recovery/reconcile.ts';
import { restoreBackup } from '../../recovery/restore.ts';
import { requireHuman } from '../../runtime/human-rules.ts';
import { prepareItems } from '../../runtime/startup.ts';
import { maintenanceStatus } from '../../system/fence.ts';
import { recoverMaintenance } from '../../system/recovery.ts';
import { advanceEpoch, epochHistory, readEpoch } from '../../system/state.ts';
import { phaseBars } from '../progress.ts';
import { actingPrincipal, output, parseIntOption, type Runtime, withRuntime } from '../runtime.ts';

async function human(rt: Runtime, what: string): Promise<Principal> {
  return requireHuman(await actingPrincipal(rt), what);
}

function reconcileLines(r: ReconcileReport): string[] {
  const lines = [
    `reconciliation ${r.reconcile_id}: ${r.status}${r.restore_id ? ` (restore ${r.restore_id})` : ''}`,
    `  installation ${r.installation_id ?? '(none)'}, ${r.items} items`,
    `  objects: ${r.objects.verified}/${r.objects.referenced} verified, ${r.objects.bytes} bytes hashed, ${r.objects.missing} missing, ${r.objects.corrupt} corrupt`,
    `  audit: ${r.audit.artifacts} chains, ${r.audit.entries} entries, ${r.audit.broken} broken`,
    `  unexpected objects: ${r.unexpected.count} (reported only)`,
  ];
  if (r.restore) {
    lines.push(
      `  restore: ${r.restore.status}${r.restore.items_missing !== null ? `, ${r.restore.items_missing} of ${r.restore.items_expected} items missing` : ''}`,
    );
  }
  for (const f of r.findings) {
    lines.push(
      `  ${f.kind.toUpperCase()} ${f.problem.toUpperCase()} ${f.key ?? f.row ?? ''}${f.source ? ` (${f.source})` : ''}: ${f.detail}`,
    );
  }
  return lines;
}

/** alp epoch / backup / restore / reconcile / maintenance */
export function registerRecoveryCommands(program: Command): void {
  registerEpochCommands(program);
  registerBackupCommands(program);
  registerRestoreCommand(program);
  registerReconcileCommand(program);
  registerMaintenanceCommands(program);
}

/** alp epoch show | advance */
function registerEpochCommands(program: Command): void {
  const epoch = program.command('epoch').description('the installation epoch: every epoch-taking operation compares it in its transaction');
  epoch
    .command('show')
    .description('the current epoch and its recent advances')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const current = await readEpoch(rt.ctx.items);
        const history = await epochHistory(rt.ctx.items);
        output(rt.opts, { epoch: current, history }, () => [
          `epoch ${current}`,
          ...history.map((h) => `  ${h.epoch}  ${h.advanced_at}  ${h.advanced_by}  ${h.reason}`),
        ]);
      }),
    );
  epoch
    .command('advance')
    .description('advance the epoch by one (a new storage worker, a takeover, crash recovery)')
    .option('--reason <text>', 'why', 'operator advance')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const who = await human(rt, 'advancing the epoch');
        const r = await advanceEpoch(rt.ctx.items, who.id, String(o.reason).slice(0, 500), rt.ctx.clock.now().toISOString());
        output(rt.opts, r, () => `epoch ${r.previous} → ${r.epoch}`);
      }),
    );
}

/** alp backup, alp backups (list, --abandon, --retire) */
function registerBackupCommands(program: Command): void {
  program
    .command('backup')
    .description('write a consistent, digest-protected backup (metadata + manifest of referenced objects) to a new directory')
    .requiredOption('--out <dir>', 'the backup directory to create (must not exist)')
    .option('--with-content', 'also copy every immutable object, verified')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const who = await actingPrincipal(rt);
        const bars = phaseBars(rt.opts.json);
        const r = await createBackup(rt.ctx, { out: o.out, withContent: o.withContent === true, actor: who.id, progress: bars }).finally(
          () => bars.stop(),
        );
        const m = r.manifest;
        output(rt.opts, { backup_id: r.backup_id, location: r.location, manifest: m }, () => [
          `backup ${r.backup_id} of installation ${m.installation_id} (epoch ${m.epoch}, ${m.consistency}) written to ${r.location}`,
          `  ${m.items.count} items, ${m.objects.count} objects referenced${m.content ? `, ${m.content.count} copied (${m.content.bytes} bytes)` : ''}`,
          `  manifest digest ${m.manifest_digest}`,
        ]);
      }),
    );

  program
    .command('backups')
    .description('the backups registered by this installation (retention honours their manifests)')
    .option('--abandon <backup-id>', 'record a PENDING backup whose writer is gone (it will never complete) as FAILED')
    .option(
      '--retire <backup-id>',
      'retire a COMPLETE backup (its directory was rotated away): recorded with who, when and --reason; retention stops reading its manifest, so it no longer protects the objects it names, and a restore made from it no longer proves anything to a retention approval',
    )
    .option('--reason <text>', 'why the backup is retired (required with --retire)')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        if (o.retire !== undefined) {
          if (o.abandon !== undefined) throw new UsageError('--retire and --abandon are separate operations');
          if (o.reason === undefined) throw new UsageError('--retire needs --reason TEXT');
          const who = await human(rt, 'retiring a backup');
          const r = await retireBackup(rt.ctx, String(o.retire), who.id, String(o.reason));
          output(rt.opts, r, () => [
            `backup ${r.backup_id} (${r.location}) retired by ${r.retired_by} at ${r.retired_at}: ${r.retire_reason}`,
            '  retention no longer reads its manifest: the objects only it named are no longer protected',
          ]);
          return;
        }
        if (o.abandon !== undefined) {
          const who = await human(rt, 'abandoning a backup');
          const r = await abandonBackup(rt.ctx, String(o.abandon), who.id);
          output(rt.opts, r, () => `backup ${r.backup_id} recorded as FAILED (${r.error})`);
          return;
        }
        const list = await listBackups(rt.ctx);
        output(rt.opts, { backups: list }, () =>
          list.map(
            (b) =>
              `${b.backup_id}  ${b.status.padEnd(8)}  ${b.started_at}  ${b.location}${b.manifest_digest ? `  ${b.manifest_digest}` : ''}${b.status === 'RETIRED' ? `  retired by ${b.retired_by} at ${b.retired_at}: ${b.retire_reason}` : ''}`,
          ),
        );
      }),
    );
}

/** alp restore: a backup into new, empty storage, under a restore hold */
function registerRestoreCommand(program: Command): void {
  program
    .command('restore')
    .description('restore a backup into new, empty storage (--data NEWDIR or --metadata/--content); sets a restore hold')
    .requiredOption('--from <dir>', 'the backup directory')
    .option('--fetch-content [url]', 'copy the objects the backup names from the source content root (or URL), verified')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        await prepareItems(rt.ctx);
        let fetchFrom: ContentStore | undefined;
        if (o.fetchContent !== undefined) {
          const url = typeof o.fetchContent === 'string' ? o.fetchContent : (await readManifest(path.resolve(o.from))).source.content;
          fetchFrom = await openContentStore(parseContentUrl(url));
        }
        const bars = phaseBars(rt.opts.json);
        // The target is empty: its token table cannot vouch for anyone yet; the CLI acts as the local operator.
        const r = await restoreBackup(rt.ctx, {
          from: o.from,
          actor: localOperator().id,
          progress: bars,
          ...(fetchFrom ? { fetchFrom } : {}),
        }).finally(async () => {
          bars.stop();
          await fetchFrom?.close();
        });
        const rec = r.record;
        output(rt.opts, { ...rec, resumed: r.resumed }, () => [
          `${r.resumed ? 'resumed and completed' : 'restored'} installation ${rec.installation_id} from backup ${rec.backup_id} (restore ${rec.restore_id})`,
          `  ${rec.items_written ?? 0} items written, ${rec.objects_copied ?? 0} objects copied, ${rec.objects_present ?? 0} already present`,
          `  content root ${rec.target_content}${rec.content_root_changed ? ` (was ${rec.source_content}: new grace periods start here)` : ' (the source’s own)'}`,
          ...(rec.content_root_changed && !rec.with_content && fetchFrom === undefined
            ? [
                `  warning: the ${rec.objects_expected} objects the backup names were not copied into this new root; reconcile proves whether it holds them (--fetch-content copies them)`,
              ]
            : []),
          '  restore hold set: run `alp reconcile --activate` on it to verify and release it',
        ]);
      }),
    );
}

/** alp reconcile [--activate] */
function registerReconcileCommand(program: Command): void {
  program
    .command('reconcile')
    .description('verify every referenced object (re-hash) and every audit chain; VERIFIED or FAILED, persisted')
    .option('--activate', 'on VERIFIED, activate the held restore (record it, release the hold, advance the epoch)')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const who = o.activate ? await human(rt, 'activating a restore') : localOperator();
        const bars = phaseBars(rt.opts.json);
        const report = await reconcile(rt.ctx, { actor: who.id, progress: bars }).finally(() => bars.stop());
        let activation: Awaited<ReturnType<typeof activateRestore>> | undefined;
        if (o.activate && report.status === 'VERIFIED') activation = await activateRestore(rt.ctx, report.reconcile_id, who);
        output(rt.opts, { ...report, ...(activation ? { activation } : {}) }, () => [
          ...reconcileLines(report),
          ...(activation ? [`activated restore ${activation.restore_id}: hold released, epoch now ${activation.epoch}`] : []),
        ]);
        if (report.status !== 'VERIFIED') {
          const first = report.findings.find((f) => f.kind !== 'derived' && f.kind !== 'unexpected');
          process.stderr.write(
            `alp: INTEGRITY: reconciliation FAILED${o.activate ? ' (not activated: a FAILED reconciliation can never be activated)' : ''}; first: ${first ? `${first.kind} ${first.problem} ${first.key ?? first.row ?? ''}` : 'no installation'}\n`,
          );
          process.exitCode = ExitCode.INTEGRITY;
        }
      }),
    );
}

/** alp maintenance status | release | recount-states */
function registerMaintenanceCommands(program: Command): void {
  const maintenance = program.command('maintenance').description('the maintenance fence');
  maintenance
    .command('status')
    .description('who holds the fence, since when, in which epoch')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const s = await maintenanceStatus(rt.ctx);
        const f = s.fence;
        // Sharded fences (system/fence-shards.ts): how many shards the master's holder holds, honestly.
        const sh = s.shards;
        const others = sh.held_by_other ? `, ${sh.held_by_other} by another token` : '';
        const missing = sh.missing ? `; not held: ${sh.missing.join(', ')}${sh.missing.length === 20 ? ', …' : ''}` : '';
        const partial = s.state === 'partial' ? ` (PARTIAL: being taken or released, or left so by a crash${missing})` : '';
        const shardLine = sh.count === 1 ? [] : [`  shards: ${sh.held} of ${sh.count} held by this fence${others}${partial}`];
        output(rt.opts, s, () =>
          f
            ? [
                `fence HELD by ${f.holder} (${f.purpose}) in epoch ${f.epoch} since ${f.acquired_at}, pid ${f.pid} on ${f.host}`,
                ...shardLine,
                s.abandoned
                  ? `  abandoned (the installation is at epoch ${s.epoch}): recover with \`alp maintenance release --epoch ${s.epoch}\``
                  : `  current epoch ${s.epoch}: if that process is dead, \`alp epoch advance\`, then \`alp maintenance release --epoch ${s.epoch + 1}\``,
              ]
            : s.state === 'orphaned'
              ? [
                  `no master fence, but ${sh.held_by_other} of ${sh.count} fence shards are held (ORPHANED): publishers on them are refused;`,
                  `  \`alp epoch advance\`, then \`alp maintenance release --epoch ${s.epoch + 1}\``,
                ]
              : [`no fence held (epoch ${s.epoch})`],
        );
      }),
    );
  maintenance
    .command('release')
    .description('crash recovery: take over a fence abandoned in an older epoch, run the recovery steps under it, release it')
    .requiredOption('--epoch <n>', 'the current epoch (advance it first when the holder died in the current one)')
    .option(
      '--pin <digest>',
      'a digest to keep (repeatable): an interrupted purge of it is cancelled, never completed; the pins recorded with the purge are always honoured',
      (v: string, prev: string[] = []) => [...prev, v],
      [],
    )
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const n = parseIntOption('--epoch', o.epoch, { min: 1 });
        if (n === undefined) throw new UsageError('--epoch is required');
        const who = await human(rt, 'recovering the maintenance fence');
        const pins = (o.pin as string[]).map((d) => parseDigest(d));
        const r = await recoverMaintenance(rt.ctx, n, `recovery by ${who.id}`, undefined, { pins });
        output(rt.opts, r, () =>
          r.recovered
            ? [
                `recovered the fence of ${r.abandoned?.holder} (epoch ${r.abandoned?.epoch}); released`,
                ...r.steps.map((s) => `  ${s.name}: ${JSON.stringify(s.result ?? {})}`),
              ]
            : ['no fence was held'],
        );
      }),
    );
  maintenance
    .command('recount-states')
    .description('make the per-state version counters exact (installations older than them): recount under the fence')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const who = await actingPrincipal(rt);
        const r = await backfillStateCounts(rt.ctx, await readEpoch(rt.ctx.items), `state counts backfill by ${who.id}`);
        const perState = Object.entries(r.states).map(([s, n]) => `${s} ${n}`);
        output(rt.opts, r, () => [`counted ${r.total} versions: ${perState.join(', ')}`]);
      }),
    );
}
