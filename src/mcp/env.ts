/** What every tool module receives from buildMcpServer (server.ts), and the wait bounds. */
import type { Principal } from '../lifecycle/model.ts';
import type { ServiceContext } from '../system/context.ts';
import type { ResultOptions } from './results.ts';
import type { Sleep } from './wait.ts';

/**
 * The longest wait_for_decision may wait: below the 60 s an MCP client waits for a response by
 * default (the SDK's request timeout), so a wait ends with an answer, not a client-side timeout.
 */
export const MCP_WAIT_MAX_SECONDS = 50;
export const MCP_WAIT_DEFAULT_SECONDS = 30;
export const MCP_POLL_MS = 1000;

export interface ToolEnv {
  ctx: ServiceContext;
  /** The caller: every write is recorded as this principal, and the services check its kind. */
  principal: Principal;
  allowFilePaths: boolean;
  results: ResultOptions;
  maxReadBytes: number;
  wait: { maxSeconds: number; defaultSeconds: number; pollMs: number; sleep: Sleep };
}
