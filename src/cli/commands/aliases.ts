/**
 * `alp alias set|rm|list` and `alp search` (issue 20 item 6): local or remote through the Backend,
 * the rules in lifecycle/aliases.ts and lifecycle/search.ts. `alp search reindex` (the operator's,
 * local only) backfills the search entries (system/migrations/search-entries.ts).
 */
import type { Command } from 'commander';
import type * as T from '../../client/types.ts';
import { parseLabel } from '../../lifecycle/validation.ts';
import { backfillSearchEntries } from '../../system/migrations/search-entries.ts';
import { output, parseIntOption, withRuntime } from '../runtime.ts';
import { withBackend } from '../session.ts';
import { resolveArtifactRef } from '../targets.ts';

const collect = (value: string, previous: string[] = []) => [...previous, value];

export function registerAliasCommands(program: Command): void {
  const alias = program.command('alias').description('named versions of an artifact (@prod, @staging): humans move them');
  alias
    .command('set <id> <name>')
    .description('point NAME at an APPROVED or EXECUTED version (set or move; recorded in the audit chain)')
    .requiredOption('--version <n>', 'the version, or another alias (@name)')
    .option('--reason <text>', 'why')
    .action(async (ref: string, name: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = await resolveArtifactRef(b, ref);
        const r = await b.setAlias(id, name, versionRefOf(o.version), o.reason);
        output(opts, r, () =>
          r.alias
            ? `${r.changed ? 'set' : 'unchanged:'} ${id} @${r.alias.name} → v${r.alias.version} (${r.alias.state}) ${r.alias.content_hash}`
            : `${id} @${name}: not set`,
        );
      }),
    );
  alias
    .command('rm <id> <name>')
    .description('remove an alias (recorded in the audit chain)')
    .option('--reason <text>', 'why')
    .action(async (ref: string, name: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = await resolveArtifactRef(b, ref);
        const r = await b.removeAlias(id, name, o.reason);
        output(opts, r, () => `removed ${id} @${r.removed.name} (was v${r.removed.version})`);
      }),
    );
  alias
    .command('list <id>')
    .description('the aliases of an artifact, each with its version’s current state')
    .action(async (ref: string, _o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const list = await b.listAliases(await resolveArtifactRef(b, ref));
        output(opts, list, () => (list.aliases.length ? list.aliases.map(aliasLine) : ['no aliases']));
      }),
    );
  registerSearchCommand(program);
}

/** `@name`, or a version number as the API takes it (a malformed one is refused by the service). */
function versionRefOf(text: string): T.VersionRef {
  return /^\d{1,10}$/.test(text) ? Number(text) : (text as `@${string}`);
}

export function aliasLine(a: T.AliasView): string {
  return `@${a.name}  v${a.version}  ${a.state.padEnd(12)} ${a.content_hash}  set by ${a.set_by.id}`;
}

function registerSearchCommand(program: Command): void {
  const search = program
    .command('search')
    .description('artifacts by name prefix, labels (all must match) and state, paginated (the versions in that state with --state)')
    .option('--name-prefix <prefix>', 'names starting with this (case-sensitive)')
    .option('--label <key=value>', 'a label that must match (repeatable)', collect, [])
    .option('--state <state>', 'versions in this state')
    .option('--limit <n>', 'page size (1–1000)', '50')
    .option('--cursor <cursor>', 'continue from a previous page')
    .action(async (o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const page = await b.search({
          namePrefix: o.namePrefix,
          labels: Object.fromEntries((o.label as string[]).map(parseLabel)),
          state: o.state,
          limit: parseIntOption('--limit', o.limit, { min: 1, max: 1000 }),
          cursor: o.cursor,
        });
        output(opts, page, () => [
          ...page.items.map(
            (h) =>
              `${h.artifact_id}  ${h.version !== undefined ? `v${h.version}  ${String(h.state).padEnd(12)} ` : ''}${h.name}  ${labelsText(h.labels)}`,
          ),
          ...(page.cursor ? [`next page: --cursor ${page.cursor}  (${page.scanned} index items read)`] : []),
        ]);
      }),
    );
  search
    .command('reindex')
    .description('write the search entries of artifacts created before search (resumes an interrupted pass; idempotent)')
    .option('--restart', 'start from the beginning instead of resuming an interrupted pass')
    .option('--page-size <n>', 'items scanned per page (1–1000)', '500')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const report = await backfillSearchEntries(rt.ctx.items, {
          restart: Boolean(o.restart),
          pageSize: parseIntOption('--page-size', o.pageSize, { min: 1, max: 1000 }) ?? 500,
          onPage: (r) => {
            if (!rt.opts.json)
              process.stderr.write(`search reindex: ${r.scanned} items scanned, ${r.heads} artifacts, ${r.written} entries written\n`);
          },
        });
        output(rt.opts, report, () => [
          `${report.resumed ? 'resumed an interrupted pass: ' : ''}${report.heads} artifacts, ${report.written} search entries written, ${report.already} already present (${report.scanned} items scanned)`,
        ]);
      }),
    );
}

function labelsText(labels: Record<string, string> | undefined): string {
  return Object.entries(labels ?? {})
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}
