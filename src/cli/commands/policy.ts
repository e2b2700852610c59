/**
 * `alp policy show|set|log` (issue 20 item 4): the installation approval policy. Reading is anyone's;
 * `set` is a human's or the local operator's (the access table's setApprovalPolicy: an agent token is
 * refused, exit 6 FORBIDDEN) and records an entry of the approval policy log with the policy before
 * and after. Locally or with `--server` (through the Backend, like the artifact commands): over HTTP
 * they are `GET /v1/policy`, `PUT /v1/policy` (the server refuses a non-human token: 403, exit 6) and
 * `GET /v1/policy/log`, with the same output.
 *
 * Rule selectors (`--quorum-for`, `--require-evidence`): `*` (every artifact), `kind=K`,
 * `label:KEY=VALUE`, several joined by `,` (all must hold), then `:` and the value — a quorum, or the
 * regular expression the whole evidence reference must match. A label value written here cannot hold
 * `,` or `:`; `--file` takes any policy as JSON.
 */
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type * as T from '../../client/types.ts';
import { parseDuration } from '../../core/clock.ts';
import { UsageError } from '../../core/errors.ts';
import { DEFAULT_APPROVAL_POLICY, type PolicyMatch } from '../../lifecycle/approval-policy.ts';
import { output, parseIntOption } from '../runtime.ts';
import { withBackend } from '../session.ts';

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** `kind=script,label:env=prod:VALUE` → the match and VALUE. */
export function parseRule(text: string, flag: string): { match: PolicyMatch; value: string } {
  const match: PolicyMatch = {};
  let rest = text;
  for (;;) {
    if (rest.startsWith('*')) rest = rest.slice(1);
    else if (rest.startsWith('kind=')) {
      const end = rest.search(/[,:]/);
      if (end < 0) break;
      match.kind = rest.slice(5, end);
      rest = rest.slice(end);
    } else if (rest.startsWith('label:')) {
      const eq = rest.indexOf('=');
      const end = rest.slice(eq + 1).search(/[,:]/);
      if (eq < 0 || end < 0) break;
      match.labels = { ...match.labels, [rest.slice(6, eq)]: rest.slice(eq + 1, eq + 1 + end) };
      rest = rest.slice(eq + 1 + end);
    } else break;
    if (rest.startsWith(',')) rest = rest.slice(1);
    else if (rest.startsWith(':')) return { match, value: rest.slice(1) };
    else break;
  }
  throw new UsageError(`${flag} ${JSON.stringify(text)}: expected SELECTOR:VALUE, SELECTOR = * | kind=K | label:KEY=VALUE (joined by ,)`);
}

function matchText(m: PolicyMatch): string {
  const parts = [...(m.kind ? [`kind=${m.kind}`] : []), ...Object.entries(m.labels ?? {}).map(([k, v]) => `label:${k}=${v}`)];
  return parts.length ? parts.join(',') : '*';
}

function durationText(ms: number): string {
  const day = 86_400_000;
  return ms % day === 0 ? `${ms / day}d` : ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : `${ms} ms`;
}

function policyLines(s: T.PolicyState): string[] {
  const p = s.policy;
  return [
    `version ${s.version}${s.version === 0 ? ' (never set: the defaults)' : ` by ${s.updated_by?.id} at ${s.updated_at}`}  ${s.hash}`,
    `min quorum:            ${p.min_quorum}`,
    ...p.quorum_rules.map((r) => `quorum for ${matchText(r.match)}: ${r.quorum}`),
    `self-approval:         ${p.self_approval}`,
    `max approval lifetime: ${durationText(p.max_approval_lifetime_ms)}`,
    ...p.evidence_rules.map((r) => `evidence for ${matchText(r.match)}: /${r.pattern}/ (whole reference)`),
  ];
}

interface SetFlags {
  file?: string;
  reset?: boolean;
  quorum?: string;
  quorumFor: string[];
  clearQuorumRules?: boolean;
  selfApproval?: string;
  maxApprovalLifetime?: string;
  requireEvidence: string[];
  clearEvidence?: boolean;
}

/** --file: a JSON object; anything else (unreadable, not JSON) is a usage error, never INTERNAL. */
async function readPolicyFile(file: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new UsageError(`--file ${JSON.stringify(file)}: cannot read it (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  try {
    const doc = JSON.parse(text) as unknown;
    if (typeof doc === 'object' && doc !== null && !Array.isArray(doc)) return doc as Record<string, unknown>;
  } catch {
    // answered below
  }
  throw new UsageError(`--file ${JSON.stringify(file)}: not a JSON object (the policy, as alp policy show --json prints it under .policy)`);
}

/** The policy `set` writes: the base (the file, the defaults with --reset, else the policy in force) with the flags applied. */
async function desiredPolicy(current: T.PolicyState['policy'], o: SetFlags): Promise<Record<string, unknown>> {
  const base: Record<string, unknown> = o.file ? await readPolicyFile(o.file) : { ...(o.reset ? DEFAULT_APPROVAL_POLICY : current) };
  const quorum = parseIntOption('--quorum', o.quorum, { min: 1, max: 10 });
  if (quorum !== undefined) base.min_quorum = quorum;
  if (o.clearQuorumRules) base.quorum_rules = [];
  if (o.quorumFor.length > 0)
    base.quorum_rules = o.quorumFor.map((t) => {
      const { match, value } = parseRule(t, '--quorum-for');
      return { match, quorum: parseIntOption('--quorum-for', value, { min: 1, max: 10 }) };
    });
  if (o.selfApproval !== undefined) base.self_approval = o.selfApproval;
  if (o.maxApprovalLifetime !== undefined) {
    const ms = parseDuration(o.maxApprovalLifetime);
    if (ms === undefined) throw new UsageError('--max-approval-lifetime must be a duration like 30d, 12h or 90m');
    base.max_approval_lifetime_ms = ms;
  }
  if (o.clearEvidence) base.evidence_rules = [];
  if (o.requireEvidence.length > 0)
    base.evidence_rules = o.requireEvidence.map((t) => {
      const { match, value } = parseRule(t, '--require-evidence');
      return { match, pattern: value };
    });
  return base;
}

export function registerPolicyCommands(program: Command): void {
  const policy = program
    .command('policy')
    .description('the installation approval policy (quorum minimums, self-approval, lifetime, evidence)');
  policy
    .command('show')
    .description('the policy in force; with --artifact and --version, what it means for that version and you')
    .option('--artifact <id>', 'an artifact id')
    .option('--version <n>', 'its version')
    .action(async (o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        if ((o.artifact === undefined) !== (o.version === undefined)) throw new UsageError('give --artifact and --version together');
        const n = parseIntOption('--version', o.version, { min: 1 });
        const state = await b.policy(o.artifact && n ? { artifactId: o.artifact, version: n } : undefined);
        const { review } = state;
        output(opts, state, () => [
          ...policyLines(state),
          ...(review
            ? [
                `${review.artifact_id} v${review.version} (${review.state}): quorum ${review.quorum} (installation ${review.installation_quorum}, artifact ${review.artifact_quorum}), ${review.counted_so_far} counted so far`,
                `your approval: ${review.your_approval.counts ? 'would count' : `would not count (${review.your_approval.reason})`}`,
              ]
            : []),
        ]);
      }),
    );
  policy
    .command('set')
    .description('change the policy (humans only; recorded in the approval policy log with before and after)')
    .option('--file <policy.json>', 'the whole policy as JSON (`alp policy show --json` → .policy); flags apply on top')
    .option('--reset', 'start from the defaults instead of the policy in force')
    .option('--quorum <n>', 'the minimum quorum for every artifact (1–10)')
    .option(
      '--quorum-for <selector:n>',
      'a minimum quorum for matching artifacts, e.g. kind=migration:2, label:env=prod:3 (repeatable; replaces the rules)',
      collect,
      [],
    )
    .option('--clear-quorum-rules', 'no per-kind/label quorum rules')
    .option('--self-approval <mode>', "counted | not-counted: whether a proposer's own approval counts")
    .option('--max-approval-lifetime <duration>', 'an approval counts at most this long after it was given (e.g. 7d, 12h)')
    .option(
      '--require-evidence <selector:regex>',
      "evidence the whole reference must match, e.g. '*:CR-[0-9]+' (repeatable; replaces the rules)",
      collect,
      [],
    )
    .option('--clear-evidence', 'no evidence rules')
    .option('--expected-version <n>', 'refuse unless this policy version is in force (exit 4)')
    .option('--reason <text>', 'why (kept in the approval policy log)')
    .action(async (o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const current = await b.policy();
        const desired = await desiredPolicy(current.policy, o as SetFlags);
        const expected = parseIntOption('--expected-version', o.expectedVersion, { min: 0 }) ?? current.version;
        const r = await b.setPolicy(desired, { expectedVersion: expected, reason: o.reason });
        output(opts, r, () => [
          r.changed ? `approval policy version ${r.version} in force` : 'unchanged (that policy is in force)',
          ...policyLines(r),
        ]);
      }),
    );
  policy
    .command('log')
    .description('every change of the policy, with before and after (hash-chained; alp audit verify checks it)')
    .action(async (_o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const { events } = await b.policyLog();
        output(opts, { events }, () =>
          events.length === 0
            ? ['no changes: the default policy is in force']
            : events.map(
                (e) =>
                  `#${e.seq}  ${e.timestamp}  version ${e.version}  by ${e.by.id} (${e.by.kind})  ${e.before_hash} -> ${e.after_hash}${e.reason ? `  reason ${JSON.stringify(e.reason)}` : ''}`,
              ),
        );
      }),
    );
}
