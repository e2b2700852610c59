/**
 * `alp mcp`: the MCP tools (src/mcp/server.ts) on stdin/stdout, for an agent runtime that spawns it.
 * stdout is the protocol: nothing else is written there; errors and logs go to stderr.
 *
 * Who the caller is: with `--token` / ALP_TOKEN, the token's principal, resolved exactly as over
 * HTTP (an unknown token is refused, exit 6). Without a token, `--principal NAME` names the agent the
 * local operator (who holds the storage) lets act: every write is recorded as the agent principal
 * NAME, held to the agent's kind. Neither is a usage error: an agent never runs as the operator.
 */

import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Command } from 'commander';
import { UsageError } from '../../core/errors.ts';
import type { Principal } from '../../lifecycle/model.ts';
import { validatePrincipalId } from '../../lifecycle/principals.ts';
import { buildMcpServer } from '../../mcp/server.ts';
import { type Runtime, withRuntime } from '../runtime.ts';
import { ALP_VERSION } from '../version.ts';

function mcpPrincipal(rt: Runtime, named: string | undefined): Principal {
  if (!rt.caller.operator) {
    if (named !== undefined) throw new UsageError('give --token or --principal, not both');
    return rt.caller.principal;
  }
  if (named === undefined) throw new UsageError('alp mcp needs --token T (or ALP_TOKEN), or --principal NAME for a named agent');
  return { id: validatePrincipalId(named), kind: 'agent' };
}

/** Serves until the client closes stdin, or SIGTERM / SIGINT. */
async function serveStdio(rt: Runtime, principal: Principal): Promise<void> {
  const server = buildMcpServer(rt.ctx, principal, {
    allowFilePaths: true,
    version: ALP_VERSION,
    log: (error, tool) =>
      process.stderr.write(`alp mcp: ${tool} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`),
  });
  let stop: () => void = () => {};
  const stopped = new Promise<void>((resolve) => {
    stop = resolve;
  });
  process.stdin.once('end', () => stop());
  process.stdin.once('close', () => stop());
  process.once('SIGTERM', () => stop());
  process.once('SIGINT', () => stop());
  await server.connect(new StdioServerTransport());
  process.stderr.write(`alp mcp: serving as ${principal.id} (${principal.kind}) on stdio\n`);
  await stopped;
  await server.close();
  process.stdin.destroy();
}

export function registerMcpCommand(program: Command): void {
  program
    .command('mcp')
    .description('serve the MCP tools for agents on stdin/stdout (the caller: --token / ALP_TOKEN, or --principal NAME)')
    .option('--principal <name>', 'without a token: act as this agent principal (recorded as NAME, kind agent)')
    .action(async (o: { principal?: string }, cmd: Command) =>
      withRuntime(cmd, async (rt) => serveStdio(rt, mcpPrincipal(rt, o.principal))),
    );
}
