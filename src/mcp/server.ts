/**
 * The MCP server for agents: one McpServer bound to a ServiceContext and the caller's Principal, whose
 * tools call the same services as the CLI and the HTTP routes (src/lifecycle/*). It is an entry point
 * beside cli/ and api/: `alp mcp` serves it on stdio (src/cli/commands/mcp.ts), `alp serve` at
 * POST /mcp (src/api/mcp-route.ts). The services check who may do what (lifecycle/access.ts), so a
 * tool never decides that itself; approving and rejecting are offered by no tool at all — humans
 * decide over HTTP, the web UI or the CLI.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Principal } from '../lifecycle/model.ts';
import type { ServiceContext } from '../system/context.ts';
import { MCP_MAX_READ_BYTES } from './content.ts';
import { MCP_POLL_MS, MCP_WAIT_DEFAULT_SECONDS, MCP_WAIT_MAX_SECONDS, type ToolEnv } from './env.ts';
import type { ToolErrorLog } from './results.ts';
import { registerArtifactTools } from './tools-artifacts.ts';
import { registerExecutionTools } from './tools-executions.ts';
import { registerReviewTools } from './tools-review.ts';
import { type Sleep, timerSleep } from './wait.ts';

export { MCP_POLL_MS, MCP_WAIT_DEFAULT_SECONDS, MCP_WAIT_MAX_SECONDS };

/** Every tool the server offers. No approve or reject: decisions are human, made elsewhere. */
export const MCP_TOOLS = [
  'create_artifact',
  'create_version',
  'propose',
  'get_status',
  'wait_for_decision',
  'get_content',
  'start_execution',
  'record',
  'finish_execution',
  'get_execution',
  'add_provenance',
  'list_artifacts',
  'list_versions',
  'query',
] as const;

export interface McpServerOptions {
  /** Whether tools may read a file path (stdio: the server runs on the agent's side; never over HTTP). */
  allowFilePaths: boolean;
  /** Where internal failures are logged. */
  log: ToolErrorLog;
  /** Rewrites error messages before they leave (HTTP scrubs absolute paths); default: unchanged. */
  renderMessage?: (message: string) => string;
  version?: string;
  /** Largest get_content answer in bytes (default MCP_MAX_READ_BYTES). */
  maxReadBytes?: number;
  /** wait_for_decision's poll interval (default MCP_POLL_MS) and sleep (tests may shorten either). */
  pollMs?: number;
  sleep?: Sleep;
}

const INSTRUCTIONS = [
  'ALP stores artifacts (scripts, configs, migrations, reports) immutably and moves each version through a governed lifecycle.',
  'The usual walk: create_artifact (or create_version) → propose → wait_for_decision (a human approves or rejects over HTTP, the web UI or the CLI; no tool decides) →',
  'when APPROVED: start_execution → record (stdout.log, stderr.log, output.json; each once) → finish_execution. get_content returns verified bytes.',
  'Errors are tool errors whose text starts with a stable code (INVALID, NOT_FOUND, CONFLICT, ILLEGAL_TRANSITION, FORBIDDEN, TOO_LARGE, INTEGRITY, …).',
].join(' ');

export function buildMcpServer(ctx: ServiceContext, principal: Principal, options: McpServerOptions): McpServer {
  const server = new McpServer({ name: 'alp', version: options.version ?? 'dev' }, { instructions: INSTRUCTIONS });
  const env: ToolEnv = {
    ctx,
    principal,
    allowFilePaths: options.allowFilePaths,
    results: { log: options.log, renderMessage: options.renderMessage ?? ((m) => m) },
    maxReadBytes: options.maxReadBytes ?? MCP_MAX_READ_BYTES,
    wait: {
      maxSeconds: MCP_WAIT_MAX_SECONDS,
      defaultSeconds: MCP_WAIT_DEFAULT_SECONDS,
      pollMs: options.pollMs ?? MCP_POLL_MS,
      sleep: options.sleep ?? timerSleep,
    },
  };
  registerArtifactTools(server, env);
  registerReviewTools(server, env);
  registerExecutionTools(server, env);
  return server;
}
