import type { Command } from 'commander';
import { markBootstrapShown } from '../../lifecycle/installation.ts';
import { createToken, localOperator } from '../../lifecycle/principals.ts';
import { type Runtime, withRuntime } from '../runtime.ts';
import { initAndDescribe } from './admin.ts';
import { addServeOptions, parseServeOptions, serveUntilSignal } from './serve.ts';

/** The principal of the agent token a new installation starts with. */
export const BOOTSTRAP_AGENT = 'agent';

interface IssuedToken {
  principal: string;
  kind: string;
  token: string;
}

/** On a brand-new installation only: one human token (the local operator) and one agent token. */
async function bootstrapTokens(rt: Runtime): Promise<IssuedToken[]> {
  const operator = localOperator();
  const out: IssuedToken[] = [];
  for (const [principal, kind] of [
    [operator.id, 'human'],
    [BOOTSTRAP_AGENT, 'agent'],
  ] as const) {
    const { token } = await createToken(rt.ctx, { principal, kind, label: 'created by alp start on a new installation' }, operator);
    out.push({ principal, kind, token });
  }
  return out;
}

export function registerStartCommand(program: Command): void {
  addServeOptions(
    program
      .command('start')
      .description(
        'what `npm start` runs: open (or create) the installation and serve the HTTP API; a new installation gets one human and one agent token, printed once',
      ),
  ).action(async (o, cmd: Command) =>
    withRuntime(cmd, async (rt) => {
      const { bootstrapPending, ...status } = await initAndDescribe(rt, { bootstrapTokens: true });
      // Issued until a start has printed them: a first start killed before it printed issues them again.
      const tokens = bootstrapPending ? await bootstrapTokens(rt) : [];
      let shown: Promise<void> = Promise.resolve();
      const printed = () => {
        if (tokens.length)
          shown = markBootstrapShown(rt.ctx).catch((e: unknown) => {
            process.stderr.write(`alp: warning: could not record that the bootstrap tokens were shown: ${String(e)}\n`);
          });
      };
      await serveUntilSignal(rt, parseServeOptions(o), (url) => {
        if (rt.opts.json) {
          process.stdout.write(`${JSON.stringify({ ...status, url: url ?? null, tokens })}\n`);
          printed();
          return;
        }
        const lines = [
          `ALP installation ${status.installation_id} (${status.created ? 'created' : 'opened'})`,
          `  metadata: ${status.metadata}`,
          `  content:  ${status.content}`,
          url
            ? `  serving:  ${url}/   (web UI; API page ${url}/docs, OpenAPI ${url}/openapi.json)`
            : '  not serving: the server could not listen',
        ];
        if (tokens.length) {
          lines.push('  tokens for this new installation (shown once; only their hashes are stored):');
          for (const t of tokens) lines.push(`    ${t.kind.padEnd(6)} ${t.principal.padEnd(16)} ${t.token}`);
          lines.push('  use them as "Authorization: Bearer <token>"; create more with `alp token create`');
        }
        process.stdout.write(`${lines.join('\n')}\n`);
        printed();
      });
      await shown;
    }),
  );
}
