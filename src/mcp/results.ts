/**
 * What a tool answers: a result (its JSON as text for the model, and as structuredContent for
 * programs), or a tool error (`isError: true`) that carries the stable code of the AlpError the
 * service threw, as the CLI prints it (`CODE: message`) and HTTP sends it (problem+json `code`).
 * Internal failures never show their message: the caller's log has it.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { toAlpError } from '../core/errors.ts';

/** Logs an internal failure of a tool (stderr on stdio, the request log over HTTP). */
export type ToolErrorLog = (error: unknown, tool: string) => void;

export interface ResultOptions {
  log: ToolErrorLog;
  /** Rewrites a message before it leaves (over HTTP: absolute paths scrubbed, as in problem+json). */
  renderMessage: (message: string) => string;
}

export function toolResult(value: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value, null, 2) }], structuredContent: value };
}

export function toolError(e: unknown, tool: string, opts: ResultOptions): CallToolResult {
  const err = toAlpError(e);
  const internal = err.code === 'INTERNAL';
  if (internal) opts.log(e, tool);
  const message = internal ? 'internal error: the server log has the details' : opts.renderMessage(err.message);
  const details = internal || !err.details ? undefined : publicDetails(err.details, opts.renderMessage);
  const error = { code: err.code, message, ...(details ? { details } : {}) };
  return { isError: true, content: [{ type: 'text', text: `${err.code}: ${message}` }], structuredContent: { error } };
}

/** The details a caller may see: plain values only (never a cause or a stack), strings rendered. */
function publicDetails(details: Record<string, unknown>, render: (s: string) => string): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(details)) {
    if (k === 'cause' || k === 'stack') continue;
    if (typeof v === 'string') out[k] = render(v);
    else if (typeof v === 'number' || typeof v === 'boolean' || v === null) out[k] = v;
  }
  return Object.keys(out).length ? out : undefined;
}

/** Runs a tool's body; a thrown error becomes the tool error of its code. */
export async function runTool(tool: string, opts: ResultOptions, body: () => Promise<Record<string, unknown>>): Promise<CallToolResult> {
  try {
    return toolResult(await body());
  } catch (e) {
    return toolError(e, tool, opts);
  }
}
