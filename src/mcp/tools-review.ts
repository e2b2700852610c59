/**
 * Review over MCP, from the agent's side: propose a version, read its status (state, the decisions
 * given and whether each counts toward the quorum now), and wait — bounded — for a human decision.
 * Deciding itself is not a tool (humans approve or reject over HTTP, the web UI or the CLI).
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { readHead } from '../audit/chain.ts';
import { resolveVersionRef } from '../lifecycle/aliases.ts';
import { listApprovals, quorumStatus } from '../lifecycle/approvals.ts';
import { resolveVersion } from '../lifecycle/artifacts.ts';
import type { VersionItem } from '../lifecycle/model.ts';
import { propose } from '../lifecycle/transitions.ts';
import { versionView } from '../lifecycle/versions.ts';
import type { ServiceContext } from '../system/context.ts';
import type { ToolEnv } from './env.ts';
import { runTool } from './results.ts';
import { artifactId, versionNumber } from './schemas.ts';
import { pollUntil } from './wait.ts';

/** What an agent can do next, by state (a hint in get_status and wait_for_decision). */
const NEXT: Partial<Record<string, string>> = {
  DRAFT: 'propose it for review',
  PROPOSED: 'wait_for_decision: a human approves or rejects it (over HTTP, the web UI or the CLI)',
  APPROVED: 'start_execution, then record its logs and finish_execution',
  REJECTED: 'store a corrected version (create_version) and propose that',
  EXECUTING: 'record the run’s logs, then finish_execution',
};

/** A version's state and every decision on it: counted when given, and whether it counts now. */
export async function versionStatus(ctx: ServiceContext, v: VersionItem): Promise<Record<string, unknown>> {
  const head = await readHead(ctx, v.artifact_id);
  const approvals = await listApprovals(ctx, v.artifact_id);
  const status = await quorumStatus(ctx, head, v, ctx.clock.now(), approvals);
  const counting = new Set(status.counting.map((a) => a.SK));
  const decisions = approvals
    .filter((a) => a.version === v.version)
    .map((a) => ({
      decision: a.decision,
      actor: a.actor,
      timestamp: a.timestamp,
      content_hash: a.content_hash,
      evidence_ref: a.evidence_ref,
      expires_at: a.expires_at,
      round: a.round,
      counted: a.counted,
      ...(a.not_counted_reason ? { not_counted_reason: a.not_counted_reason } : {}),
      counts_now: counting.has(a.SK),
      ...(a.comment ? { comment: a.comment } : {}),
    }));
  const { artifact_id, version, name, state, filename, content_hash, size, state_changed_at } = versionView(v);
  return {
    artifact_id,
    version,
    name,
    state,
    filename,
    content_hash,
    size,
    state_changed_at,
    proposal_round: v.proposal_round,
    approvals: { counting_now: counting.size, quorum: status.policy.quorum, policy_version: status.policy.version, decisions },
    ...(v.current_run ? { current_run: v.current_run } : {}),
    ...(NEXT[v.state] ? { next: NEXT[v.state] } : {}),
  };
}

export function registerReviewTools(server: McpServer, env: ToolEnv): void {
  const { ctx, principal, wait } = env;
  server.registerTool(
    'propose',
    {
      title: 'Propose a version for review',
      description:
        'DRAFT → PROPOSED (earlier open versions become SUPERSEDED); an APPROVED version whose approvals expired goes back to PROPOSED. Returns the version.',
      inputSchema: {
        artifact_id: artifactId,
        version: versionNumber.optional().describe('the version (default: the latest)'),
        reason: z.string().max(1000).optional().describe('why, for the reviewers and the audit chain'),
      },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    (args) =>
      runTool('propose', env.results, async () => {
        const version = args.version === undefined ? undefined : await resolveVersionRef(ctx, args.artifact_id, args.version);
        return versionView(await propose(ctx, principal, args.artifact_id, version, args.reason));
      }),
  );
  server.registerTool(
    'get_status',
    {
      title: 'The status of a version',
      description:
        'State, quorum, and every decision on the version: counted when it was given (and why not), and whether it counts now (unexpired, current round, binding the current digest).',
      inputSchema: { artifact_id: artifactId, version: versionNumber.optional().describe('the version (default: the latest)') },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) => runTool('get_status', env.results, async () => versionStatus(ctx, await resolveVersion(ctx, args.artifact_id, args.version))),
  );
  server.registerTool(
    'wait_for_decision',
    {
      title: 'Wait for a human decision',
      description: `Waits while the version is PROPOSED, up to timeout_seconds (at most ${wait.maxSeconds}; default ${wait.defaultSeconds}), reading the store every ${wait.pollMs} ms. Returns the status with outcome APPROVED, REJECTED, another state the version moved to, or TIMEOUT (call again to keep waiting).`,
      inputSchema: {
        artifact_id: artifactId,
        version: versionNumber,
        timeout_seconds: z.number().min(0).max(wait.maxSeconds).optional().describe(`how long to wait (0–${wait.maxSeconds} s)`),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args, extra) =>
      runTool('wait_for_decision', env.results, async () => {
        const polled = await pollUntil(
          () => resolveVersion(ctx, args.artifact_id, args.version),
          (v) => v.state !== 'PROPOSED',
          { timeoutMs: (args.timeout_seconds ?? wait.defaultSeconds) * 1000, pollMs: wait.pollMs, sleep: wait.sleep, signal: extra.signal },
        );
        const status = await versionStatus(ctx, polled.value);
        return { outcome: polled.done ? polled.value.state : 'TIMEOUT', waited_ms: polled.waitedMs, ...status };
      }),
  );
}
