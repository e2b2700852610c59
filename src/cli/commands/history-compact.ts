import type { Command } from 'commander';
import { compactHistory } from '../../audit/compaction.ts';
import { output, withRuntime } from '../runtime.ts';

/** alp history compact --before DATE [--artifact ID] [--dry-run] */
export function registerHistoryCompact(historyCmd: Command): void {
  historyCmd
    .command('compact')
    .description(
      'pack audit entries older than DATE (and than the 90-day hot window) into verified, digest-addressed segments; deletes no history',
    )
    .requiredOption('--before <date>', 'YYYY-MM-DD or an ISO-8601 time, at least 90 days ago')
    .option('--artifact <id>', 'only this artifact (default: all)')
    .option('--dry-run', 'report what would be packed; write nothing')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const report = await compactHistory(rt.ctx, {
          before: o.before as string,
          ...(o.artifact ? { artifactId: o.artifact as string } : {}),
          ...(o.dryRun ? { dryRun: true } : {}),
        });
        output(rt.opts, report, () => [
          `${report.dry_run ? 'would pack' : 'packed'} ${report.entries_packed} entries of ${report.artifacts} artifact(s) recorded before ${report.before}` +
            ` into ${report.segments.length} segment(s); ${report.items_removed} hot item(s) removed, ${report.items_kept_hot} kept hot`,
          ...report.segments.map((s) => `  ${s.artifact_id} ${s.first_seq}–${s.last_seq}  ${s.key}  ${s.size} bytes`),
          ...report.skipped.map((s) => `  SKIPPED ${s.artifact_id}: ${s.reason}`),
        ]);
      }),
    );
}
