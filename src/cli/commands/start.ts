import type { Command } from 'commander';
import { bootstrapTokensShown, type IssuedToken, issueBootstrapTokens } from '../../runtime/startup.ts';
import { withRuntime } from '../runtime.ts';
import { initAndDescribe } from './admin.ts';
import { addServeOptions, parseServeOptions, serveUntilSignal } from './serve.ts';

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
      const tokens: IssuedToken[] = bootstrapPending ? await issueBootstrapTokens(rt.ctx) : [];
      let shown: Promise<void> = Promise.resolve();
      const printed = () => {
        if (tokens.length)
          shown = bootstrapTokensShown(rt.ctx).catch((e: unknown) => {
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
