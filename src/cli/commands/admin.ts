import type { Command } from 'commander';
import { readTokenLog, type TokenEvent } from '../../audit/token-log.ts';
import { ExitCode, UsageError } from '../../core/errors.ts';
import { createToken } from '../../lifecycle/principals.ts';
import { parseLifetime, type TokenInfo } from '../../lifecycle/token-records.ts';
import { listTokens, revokeTokenRef, rotateToken } from '../../lifecycle/tokens.ts';
import { type StartupStatus, startInstallation } from '../../runtime/startup.ts';
import { verifyAllContent } from '../backend-local.ts';
import { remoteTarget } from '../remote.ts';
import { actingPrincipal, type GlobalOptions, output, type Runtime, withRuntime } from '../runtime.ts';
import { withBackend } from '../session.ts';

/** The shared startup sequence (runtime/startup.ts), warning on stderr about each path it made private. */
export async function initAndDescribe(rt: Runtime, opts: { bootstrapTokens?: boolean } = {}): Promise<StartupStatus> {
  return startInstallation(rt.ctx, rt.config, {
    ...opts,
    onTightened: (t) =>
      process.stderr.write(`alp: warning: ${t.path} was open to other local users (mode ${t.from.toString(8)}); now ${t.to.toString(8)}\n`),
  });
}

export function registerAdminCommands(program: Command): void {
  program
    .command('init')
    .description('create or open the installation; prints its id')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const { bootstrapPending: _b, ...status } = await initAndDescribe(rt);
        output(rt.opts, status, () => [
          `${status.created ? 'created' : 'opened'} installation ${status.installation_id}`,
          `  metadata: ${status.metadata}`,
          `  content:  ${status.content}`,
          `  key:      ${status.signing_key ? `${status.signing_key.verifier_key} (${status.signing_key.source})` : 'none configured (set ALP_SIGNING_KEY=FILE to sign attestations)'}`,
        ]);
      }),
    );

  registerTokenCommands(program);

  program
    .command('verify [id]')
    .description('re-hash every object an artifact (or, with --all, every artifact) names')
    .option('--all', 'verify every artifact')
    .action(async (id: string | undefined, o, cmd: Command) => {
      if (!id && !o.all) throw new UsageError('give an artifact id or --all');
      // One artifact goes through the backend (over HTTP: the verification route); --all re-hashes the
      // whole installation, which only its host does (refused with a server selected, like any operator command).
      const verified = (opts: GlobalOptions, report: Awaited<ReturnType<typeof verifyAllContent>>) => {
        output(opts, report, () => [
          `${report.ok}/${report.objects} objects verified, ${report.bytes} bytes hashed`,
          ...report.findings.map(
            (f: Record<string, unknown>) =>
              `${String(f.problem).toUpperCase()} ${String(f.key)} (${String(f.source)}): ${String(f.detail)}`,
          ),
        ]);
        if (report.findings.length > 0) {
          process.stderr.write(
            `alp: INTEGRITY: ${report.findings.length} object(s) failed verification, first: ${String((report.findings[0] as Record<string, unknown> | undefined)?.key)}\n`,
          );
          process.exitCode = ExitCode.INTEGRITY;
        }
      };
      if (o.all) {
        if (await remoteTarget(cmd)) {
          throw new UsageError(
            'verify --all re-hashes every object of the installation: it runs only on its host; over HTTP verify one artifact (alp verify ID)',
          );
        }
        return withRuntime(cmd, async (rt) => verified(rt.opts, await verifyAllContent(rt)));
      }
      return withBackend(cmd, async (b, opts) => verified(opts, await b.verifyContent(id as string)));
    });
}

const EXPIRES_IN_HELP = 'lifetime: 90d, 12h, 30m, 2w, or never (default: agent tokens ALP_AGENT_TOKEN_EXPIRES_IN = 90d, others never)';

function expiresInOption(o: { expiresIn?: string }): { expiresInMs?: number | null } {
  return o.expiresIn === undefined ? {} : { expiresInMs: parseLifetime(String(o.expiresIn)) };
}

function tokenRow(t: TokenInfo): string {
  const cols = [
    t.token_id,
    t.principal.id,
    t.principal.kind,
    t.state,
    t.created_at,
    t.last_used_at ?? '-',
    t.expires_at ?? 'never',
    t.label ?? '',
  ];
  return cols.join('  ');
}

function eventLine(e: TokenEvent): string {
  const extra = [
    e.replaces ? `replaces ${e.replaces}` : '',
    e.expires_at ? `expires ${e.expires_at}` : '',
    e.label ? `label ${JSON.stringify(e.label)}` : '',
    e.reason ? `reason ${JSON.stringify(e.reason)}` : '',
  ].filter(Boolean);
  return [`#${e.seq}`, e.timestamp, e.action, e.token_id, `${e.principal_id} (${e.kind})`, `by ${e.by.id}`, ...extra].join('  ');
}

/**
 * Token administration, the local operator's or a human token's (the access table's createToken);
 * no HTTP route reaches it. Secrets are printed once, by create and rotate; list never shows one.
 */
function registerTokenCommands(program: Command): void {
  const token = program.command('token').description('bearer tokens for the HTTP API');
  token
    .command('create')
    .description('create a token for a principal; it is printed once and only its hash is stored')
    .requiredOption('--principal <id>', 'principal id')
    .requiredOption('--kind <kind>', 'human | agent | service')
    .option('--label <text>', 'a note on what the token is for')
    .option('--expires-in <duration>', EXPIRES_IN_HELP)
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const actor = await actingPrincipal(rt);
        const input = { principal: o.principal, kind: o.kind, label: o.label, ...expiresInOption(o) };
        const created = await createToken(rt.ctx, input, actor);
        output(rt.opts, created, () => created.token);
      }),
    );
  token
    .command('list')
    .description('every token: id, principal, kind, state, created, last used, expiry, label (never a secret)')
    .option('--principal <id>', 'only the tokens of this principal')
    .option('--active', 'only tokens that still authenticate')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const tokens = await listTokens(rt.ctx, await actingPrincipal(rt), { principal: o.principal, activeOnly: Boolean(o.active) });
        output(rt.opts, { tokens }, () =>
          tokens.length === 0
            ? ['no tokens']
            : ['ID  PRINCIPAL  KIND  STATE  CREATED  LAST USED (±1 h)  EXPIRES  LABEL', ...tokens.map(tokenRow)],
        );
      }),
    );
  token
    .command('revoke <id>')
    .description('revoke a token (its id from `token list`): refused at once here, on every server within ALP_TOKEN_CACHE_MS')
    .option('--reason <text>', 'why (kept in the token log)')
    .action(async (id: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const r = await revokeTokenRef(rt.ctx, id, await actingPrincipal(rt), o.reason);
        output(rt.opts, r, () =>
          r.already_revoked ? `${r.token_id} was already revoked at ${r.revoked_at}` : `revoked ${r.token_id} (${r.principal.id})`,
        );
      }),
    );
  token
    .command('rotate <id>')
    .description('a new secret for the same principal, kind and label (printed once); the old token is revoked')
    .option('--expires-in <duration>', "lifetime of the new token (default: the old one's lifetime): 90d, 12h, never")
    .action(async (id: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const r = await rotateToken(rt.ctx, id, await actingPrincipal(rt), expiresInOption(o));
        output(rt.opts, r, () => r.token);
      }),
    );
  token
    .command('log')
    .description('the token log: every creation, revocation and rotation, oldest first (hash-chained; alp audit verify checks it)')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const events: TokenEvent[] = [];
        for await (const e of readTokenLog(rt.ctx)) events.push(e);
        output(rt.opts, { events }, () => (events.length === 0 ? ['no token changes'] : events.map(eventLine)));
      }),
    );
}
