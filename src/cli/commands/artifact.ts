import type { Command } from 'commander';
import { parseDigest } from '../../core/digest.ts';
import { parseLabel } from '../../lifecycle/validation.ts';
import { output, parseIntOption } from '../runtime.ts';
import { withBackend } from '../session.ts';
import { chooseVersion, noteChosen, outputChosen, resolveArtifactRef } from '../targets.ts';

const collect = (value: string, previous: string[] = []) => [...previous, value];

const IDEMPOTENCY_HELP =
  'a retry with the same key (per principal, kept 24 h) and the same request prints the first result and writes nothing; a different request with it is refused (exit 4, CONFLICT)';

export function registerArtifactCommands(program: Command): Command {
  const artifact = program.command('artifact').description('create, version, read and list artifacts');
  addArtifactWriteCommands(artifact);
  addArtifactReadCommands(artifact);
  return artifact;
}

/** alp artifact create | version */
function addArtifactWriteCommands(artifact: Command): void {
  artifact
    .command('create')
    .description('store a new artifact as version 1 (DRAFT)')
    .requiredOption('--name <name>', 'artifact name')
    .requiredOption('--file <path>', 'content file, or - for stdin')
    .option('--filename <filename>', 'filename to record (default: the file’s name)')
    .option('--kind <kind>', 'kind, e.g. script, config, migration, report', 'file')
    .option('--label <key=value>', 'a label (repeatable)', collect, [])
    .option('--quorum <n>', 'distinct human approvals needed (default 1)')
    .option('--digest <sha256>', 'expected sha256:… digest of the content; a mismatch stores nothing')
    .option('--idempotency-key <key>', IDEMPOTENCY_HELP)
    .action(async (o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const v = await b.createArtifact({
          name: o.name,
          file: o.file,
          filename: o.filename,
          kind: o.kind,
          labels: Object.fromEntries((o.label as string[]).map(parseLabel)),
          quorum: parseIntOption('--quorum', o.quorum, { min: 1, max: 10 }),
          digest: o.digest ? parseDigest(o.digest) : undefined,
          idempotencyKey: o.idempotencyKey,
        });
        output(opts, v, () => `created ${v.artifact_id} v${v.version} ${v.state} ${v.content_hash} ${v.size} bytes`);
      }),
    );

  artifact
    .command('version <id>')
    .description('store the next version of an artifact (id, or its name when unique) (DRAFT)')
    .requiredOption('--file <path>', 'content file, or - for stdin')
    .option('--filename <filename>', 'filename to record (default: the file’s name)')
    .option('--digest <sha256>', 'expected sha256:… digest of the content')
    .option('--idempotency-key <key>', IDEMPOTENCY_HELP)
    .action(async (ref: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = await resolveArtifactRef(b, ref);
        const digest = o.digest ? parseDigest(o.digest) : undefined;
        const v = await b.addVersion(id, { file: o.file, filename: o.filename, digest, idempotencyKey: o.idempotencyKey });
        output(opts, v, () => `created ${v.artifact_id} v${v.version} ${v.state} ${v.content_hash} ${v.size} bytes`);
      }),
    );
}

/** alp artifact show | list | get */
function addArtifactReadCommands(artifact: Command): void {
  artifact
    .command('show <id>')
    .description('an artifact (id, or its name when unique) and its versions')
    .action(async (ref: string, _o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const shown = await b.showArtifact(await resolveArtifactRef(b, ref));
        const { versions, ...head } = shown;
        output(opts, shown, () => [
          `${head.artifact_id}  ${head.name}  kind=${head.kind}  quorum=${head.quorum}`,
          `  labels: ${labelsText(head.labels)}`,
          `  created ${head.created_at} by ${head.created_by.id}${head.archived ? `  archived ${head.archived.at}` : ''}`,
          ...Object.entries(head.aliases ?? {})
            .sort(([a], [b]) => (a < b ? -1 : 1))
            .map(([name, a]) => `  @${name} → v${a.version} (set by ${a.set_by.id})`),
          ...versions.map(
            (v) => `  v${v.version}  ${v.state.padEnd(12)} ${v.filename}  ${v.size} bytes  ${v.content_hash}  ${v.created_at}`,
          ),
        ]);
      }),
    );

  artifact
    .command('list')
    .description('versions by state (or artifacts by --name), newest first, paginated')
    .option('--state <state>', 'only versions in this state')
    .option('--name <name>', 'artifacts with exactly this name')
    .option('--limit <n>', 'page size (1–1000)', '50')
    .option('--cursor <cursor>', 'continue from a previous page')
    .action(async (o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const page = await b.listArtifacts({
          state: o.state,
          name: o.name,
          limit: parseIntOption('--limit', o.limit, { min: 1, max: 1000 }),
          cursor: o.cursor,
        });
        output(opts, page, () => [
          ...page.items.map((i) =>
            'version' in i
              ? `${String(i.artifact_id)}  v${String(i.version)}  ${String(i.state).padEnd(12)} ${String(i.name)}`
              : `${String(i.artifact_id)}  ${String(i.name)}  latest v${String(i.latest_version)}`,
          ),
          ...(page.cursor ? [`next page: --cursor ${page.cursor}`] : []),
        ]);
      }),
    );

  artifact
    .command('get <id>')
    .description('write a version’s verified content to a file (or - for stdout); exit 5 and no file if it does not verify')
    .option('--version <n>', 'version, or @alias (default: the latest)')
    .requiredOption('--out <path>', 'output file, or - for stdout')
    .action(async (ref: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = await resolveArtifactRef(b, ref);
        const choice = await chooseVersion(b, id, o.version, 'latest');
        const version = await b.saveContent(id, choice.version, o.out);
        // The content went to stdout: only the note on the chosen version (on stderr) is left to print.
        if (o.out === '-') return noteChosen(opts, id, choice);
        outputChosen(
          opts,
          id,
          choice,
          { ...version, out: o.out },
          () => `wrote ${o.out} (v${version.version}, ${version.size} bytes, ${version.content_hash} verified)`,
        );
      }),
    );
}

/** Labels as `k=v, k=v` (or "none"), sorted by key. */
function labelsText(labels: Record<string, string> | undefined): string {
  const entries = Object.entries(labels ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return entries.length ? entries.map(([k, v]) => `${k}=${v}`).join(', ') : 'none';
}
