import { type Command, Option } from 'commander';
import { parseCheckpoint, takeCheckpoint } from '../../audit/counter.ts';
import { installationLogNamed } from '../../audit/tlog/chains.ts';
import { parseCheckpointBody } from '../../audit/tlog/checkpoint.ts';
import { checkpointNow } from '../../audit/tlog/checkpoint-now.ts';
import { verifyInclusion } from '../../audit/tlog/merkle.ts';
import { type NoteVerifier, parseVerifierKey, splitNote, verifierOf } from '../../audit/tlog/note.ts';
import { isSignedCheckpoint } from '../../audit/tlog/verify.ts';
import { verifyAllAudit } from '../../audit/verify-all.ts';
import { Conflict, ExitCode, IntegrityError, UsageError } from '../../core/errors.ts';
import type { IndexQuery } from '../../lifecycle/queries.ts';
import type { ServiceContext } from '../../system/context.ts';
import { installationSigner } from '../../system/installation-key.ts';
import { localLookup } from '../backend-local.ts';
import { readUserTextFile, writeNewUserFile } from '../files.ts';
import { progressBar } from '../progress.ts';
import { errorLine, output, parseIntOption, withRuntime } from '../runtime.ts';
import { withBackend } from '../session.ts';
import { resolveArtifactRef } from '../targets.ts';
import { registerHistoryCompact } from './history-compact.ts';

const collect = (value: string, previous: string[] = []) => [...previous, value];

async function showHistory(ref: string | undefined, cmd: Command): Promise<void> {
  return withBackend(cmd, async (b, opts) => {
    if (!ref) throw new UsageError('give an artifact id (or its name): alp history ID');
    const shown = await b.history(await resolveArtifactRef(b, ref));
    const entries = shown.entries as Array<Record<string, unknown>>;
    output(opts, shown, () =>
      entries.map((e) => {
        const actor = (e.actor ?? e.started_by ?? e.finished_by ?? e.uploaded_by ?? e.recorded_by ?? e.created_by) as
          | { id: string }
          | string
          | undefined;
        const who = typeof actor === 'string' ? actor : actor?.id;
        const what =
          e.type === 'transition'
            ? `v${String(e.version)} ${String(e.from ?? '∅')} → ${String(e.to)}${e.reason ? ` (${String(e.reason)})` : ''}`
            : e.type === 'approval'
              ? `v${String(e.version)} ${String(e.decision)} evidence=${String(e.evidence_ref)}${e.counted ? '' : ` not counted: ${String(e.not_counted_reason)}`}`
              : e.type === 'provenance'
                ? `step ${String(e.step)} ${String(e.action)}`
                : `${String(e.run_id ?? e.comp_artifact_id ?? '')} ${String(e.name ?? e.status ?? '')}`;
        return `${String(e.seq).padStart(5)}  ${String(e.timestamp)}  ${String(e.type).padEnd(16)} ${String(who ?? '').padEnd(16)} ${what}`;
      }),
    );
  });
}

/** The recording principal always; a differing actor shown as a claim. */
function stepWho(s: Record<string, unknown>): string {
  const by = (s.recorded_by as { id?: string } | undefined)?.id ?? '?';
  return s.actor_claimed ? `${by} (claims actor ${String(s.actor)})` : by;
}

export function registerAuditCommands(program: Command): void {
  registerHistoryCommands(program);
  registerAuditChainCommands(program);
  registerProvenanceCommands(program);
  registerQueryCommands(program);
}

/** alp history [id] | show | compact */
function registerHistoryCommands(program: Command): void {
  // `alp history ID` (kept) and `alp history show ID` print a history; `alp history compact` packs it.
  const historyCmd = program
    .command('history [id]')
    .description('the merged, ordered audit history of an artifact (hot and packed); `history compact` packs old history')
    .action(async (id: string | undefined, _o, cmd: Command) => showHistory(id, cmd));
  historyCmd
    .command('show <id>')
    .description('the merged, ordered audit history of an artifact')
    .action(async (id: string, _o, cmd: Command) => showHistory(id, cmd));
  registerHistoryCompact(historyCmd);
}

/** alp audit verify | checkpoint */
function registerAuditChainCommands(program: Command): void {
  const audit = program.command('audit').description('the tamper-evident audit chain');
  registerAuditProve(audit);
  audit
    .command('verify [id]')
    .description(
      'recompute every chain (one artifact, or all) and name the first broken link; for all, also the installation-wide append counter',
    )
    .option(
      '--checkpoint <file>',
      'also prove the installation still extends this checkpoint: a signed transparency-log checkpoint (alp audit checkpoint), or the JSON chain checkpoint (--format chains)',
    )
    .option(
      '--key <vkey>',
      "the signed-note verifier key that must have signed --checkpoint (default: this installation's public key; pin it out of band)",
    )
    .action(async (ref: string | undefined, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const id = ref === undefined ? undefined : await resolveArtifactRef(localLookup(rt.ctx), ref);
        const text = o.checkpoint ? await readUserTextFile(o.checkpoint, '--checkpoint') : undefined;
        const signed = text !== undefined && isSignedCheckpoint(text);
        const checkpoint = text !== undefined && !signed ? parseCheckpoint(text) : undefined;
        const bar = progressBar('audit', rt.opts.json);
        const logCheckpoint = signed ? { note: text, verifier: await pinnedVerifier(rt.ctx, o.key) } : undefined;
        const summary = await verifyAllAudit(rt.ctx, { artifactId: id, checkpoint, logCheckpoint, progress: bar }).finally(() =>
          bar.stop(),
        );
        const { counter, broken, log } = summary;
        output(rt.opts, summary, () => [
          `${summary.artifacts} chain(s), ${summary.entries} entries: ${broken.length === 0 ? 'intact' : `${broken.length} broken`}`,
          ...(counter ? [`append counter: ${counter.detail}`] : []),
          ...(summary.log_state ? [`transparency log: ${summary.log_state.detail}`] : []),
          ...(log
            ? [
                `signed checkpoint of ${log.checkpoint_size} leaves (log ${log.log_size}): ${log.ok ? 'the installation extends it' : 'BROKEN'}`,
              ]
            : []),
          ...broken.flatMap((r) => r.findings.map((f) => `BROKEN ${f.row}: ${f.problem}`)),
        ]);
        const first = broken[0]?.findings[0];
        if (first) {
          const broken = new IntegrityError(`audit chain broken at ${first.row}: ${first.problem}`, { row: first.row });
          process.stderr.write(errorLine(broken, rt.opts.json === true));
          process.exitCode = ExitCode.INTEGRITY;
        }
      }),
    );

  audit
    .command('checkpoint')
    .description(
      'sequence what is pending into the transparency log (taking its lease for one round) and print its signed checkpoint: keep it elsewhere; audit verify --checkpoint FILE --key VKEY proves the installation extends it. --format chains: the older JSON of every chain’s length and head hash',
    )
    .option('--out <file>', 'write the checkpoint to this file (default: stdout)')
    .addOption(
      new Option('--format <format>', 'note: the signed C2SP checkpoint; chains: the JSON chain checkpoint')
        .choices(['note', 'chains'])
        .default('note'),
    )
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const chains = o.format === 'chains';
        const cp = chains ? await takeCheckpoint(rt.ctx) : undefined;
        const note = chains ? undefined : await checkpointNow(rt.ctx);
        const text = cp ? `${JSON.stringify(cp, null, 2)}\n` : (note?.checkpoint as string);
        if (!o.out) {
          if (rt.opts.json && note) output(rt.opts, note, () => '');
          else process.stdout.write(text);
          return;
        }
        await writeNewUserFile(o.out, '--out', text);
        output(
          rt.opts,
          cp ? { out: o.out, artifacts: Object.keys(cp.artifacts).length, counter: cp.counter } : { out: o.out, size: note?.size },
          () =>
            cp
              ? `wrote ${o.out} (${Object.keys(cp.artifacts).length} chains)`
              : `wrote ${o.out} (transparency log of ${String(note?.size)} leaves)`,
        );
      }),
    );
}

/** The chain id of `--log NAME`; USAGE for a name that is not an installation log. */
function installationLog(name: string): string {
  const id = installationLogNamed(name);
  if (!id) throw new UsageError(`--log takes keys, tokens, webhooks or approval-policy, not ${JSON.stringify(name)}`);
  return id;
}

/** alp audit prove ARTIFACT SEQ: where an audit entry is in the transparency log, with its inclusion proof and the checkpoint it is proved against. */
function registerAuditProve(audit: Command): void {
  audit
    .command('prove <artifact> <seq>')
    .description(
      "the transparency log's leaf of an audit entry (ARTIFACT id or name, SEQ its seq in the chain): leaf index, tree size, the RFC 9162 inclusion proof and the signed checkpoint whose root it reaches (works with --server)",
    )
    .option('--log', 'ARTIFACT names an installation log instead: keys, tokens, webhooks or approval-policy (its entries are leaves too)')
    .action(async (ref: string, seqText: string, o: { log?: boolean }, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = o.log ? installationLog(ref) : await resolveArtifactRef(b, ref);
        const seq = parseIntOption('SEQ', seqText, { min: 1 }) as number;
        let at = await b.logEntry(id, seq);
        // Sequenced within a round (ALP_TLOG_INTERVAL_MS) by the server, or at once by a local command.
        for (let i = 0; at.pending && i < 50; i++) {
          await new Promise((r) => setTimeout(r, 100));
          at = await b.logEntry(id, seq);
        }
        if (at.leaf_index === null)
          throw new Conflict(`entry ${seq} of ${id} is still waiting for the transparency log's sequencer; retry`);
        const checkpoint = await b.logCheckpoint();
        const cp = parseCheckpointBody(splitNote(checkpoint).text);
        const proof = await b.logInclusion(at.leaf_index, cp.size);
        const b64 = (x: string) => Buffer.from(x, 'base64');
        if (
          proof.root !== Buffer.from(cp.root).toString('base64') ||
          !verifyInclusion(at.leaf_index, cp.size, b64(proof.leaf_hash), proof.proof.map(b64), cp.root)
        )
          throw new IntegrityError(`the inclusion proof of leaf ${at.leaf_index} does not reach the checkpoint's root`, {
            leaf_index: at.leaf_index,
          });
        const result = { ...proof, checkpoint };
        output(opts, result, () => [
          `entry ${seq} of ${id} (${proof.entry.hash}) is leaf ${proof.leaf_index} of ${proof.tree_size}`,
          `root ${proof.root}`,
          'inclusion proof (RFC 9162):',
          ...proof.proof.map((h) => `  ${h}`),
          'checkpoint:',
          checkpoint.trimEnd(),
        ]);
      }),
    );
}

/** The key a signed checkpoint must be signed by: --key, else this installation's own public key. */
async function pinnedVerifier(ctx: ServiceContext, vkey: string | undefined): Promise<NoteVerifier> {
  return vkey ? parseVerifierKey(vkey) : verifierOf(await installationSigner(ctx));
}

/** alp provenance add | show */
function registerProvenanceCommands(program: Command): void {
  const prov = program.command('provenance').description('provenance steps of an artifact');
  prov
    .command('add <id>')
    .description('append a provenance step')
    .requiredOption('--action <action>', 'what was done')
    .option('--actor <who>', 'who did it (default: the caller)')
    .option('--input <digest>', 'an input digest (repeatable)', collect, [])
    .option('--output <digest>', 'an output digest (repeatable)', collect, [])
    .option('--tool <name@version>', 'tool identity')
    .option('--model <id>', 'model identity')
    .option('--note <text>', 'note')
    .action(async (ref: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = await resolveArtifactRef(b, ref);
        const given = { actor: o.actor, tool: o.tool, model: o.model, note: o.note } as Record<string, string | undefined>;
        const step = await b.addProvenance(id, {
          action: o.action,
          inputs: o.input,
          outputs: o.output,
          ...Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)),
        });
        output(opts, step, () => `step ${String(step.step)} ${String(step.action)} recorded`);
      }),
    );
  prov
    .command('show <id>')
    .description('the provenance chain, an in-toto Statement (SLSA Provenance v1), or that statement signed (DSSE)')
    .option('--format <format>', 'json | in-toto | dsse', 'json')
    .action(async (ref: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = await resolveArtifactRef(b, ref);
        if (o.format === 'in-toto') {
          process.stdout.write(`${JSON.stringify(await b.inToto(id), null, 2)}\n`);
          return;
        }
        if (o.format === 'dsse') {
          process.stdout.write(`${JSON.stringify(await b.signedProvenance(id))}\n`);
          return;
        }
        if (o.format !== 'json') throw new UsageError('--format is json, in-toto or dsse');
        const chain = await b.provenance(id);
        output(opts, chain, () =>
          chain.steps.map((s) => `${String(s.step).padStart(4)}  ${String(s.timestamp)}  ${stepWho(s)}  ${String(s.action)}`),
        );
      }),
    );
}

/** alp query: the GSI1 access patterns, paginated */
function registerQueryCommands(program: Command): void {
  const query = program.command('query').description('the GSI1 access patterns of RFC-012 §9.1, paginated');
  const patterns: Array<[IndexQuery, string, string]> = [
    ['transitions', '--date <yyyy-mm-dd>', 'transitions on a day'],
    ['approvals', '--approver <id>', 'approvals and rejections by a principal'],
    ['runs', '--date <yyyy-mm-dd>', 'executions started on a day'],
    ['provenance', '--date <yyyy-mm-dd>', 'provenance steps recorded on a day'],
    ['compensations', '--state <state>', 'compensations by the state of their artifact'],
  ];
  for (const [kind, flag, description] of patterns) {
    query
      .command(kind)
      .description(description)
      .requiredOption(flag, 'key')
      .option('--limit <n>', 'page size (1–1000)', '50')
      .option('--cursor <cursor>', 'continue from a previous page')
      .action(async (o, cmd: Command) =>
        withBackend(cmd, async (b, opts) => {
          const key = (o.date ?? o.approver ?? o.state) as string;
          const page = await b.query(kind, key, {
            limit: parseIntOption('--limit', o.limit, { min: 1, max: 1000 }),
            cursor: o.cursor,
          });
          output(opts, page, () => [
            ...page.items.map((i: Record<string, unknown>) => `${String(i.artifact_id)}  ${String(i.timestamp)}  ${String(i.type)}`),
            ...(page.cursor ? [`next page: --cursor ${page.cursor}`] : []),
          ]);
        }),
      );
  }
}
