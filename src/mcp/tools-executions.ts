/**
 * Executions and provenance over MCP: start a run of an APPROVED version (the service re-checks the
 * approvals), record its outputs, finish it, read it back, and append provenance steps.
 *
 * Outputs are immutable in the executions service: each of stdout.log, stderr.log and output.json is
 * recorded once per run (a second `record` of the same output is CONFLICT). An agent that produces a
 * log in pieces keeps it and records it whole before finish_execution.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { resolveVersionRef } from '../lifecycle/aliases.ts';
import { executionView, finishExecution, readExecution, startExecution, uploadOutput } from '../lifecycle/executions.ts';
import { SIGNAL_NAME_PATTERN } from '../lifecycle/model.ts';
import { addProvenance, provenanceStepView } from '../lifecycle/provenance.ts';
import { contentBody, storing } from './content.ts';
import type { ToolEnv } from './env.ts';
import { runTool } from './results.ts';
import { artifactId, contentFields, outputName, runId, versionNumber } from './schemas.ts';

const WRITE = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false } as const;
const sha256List = z.array(z.string().max(80)).max(256);

export function registerExecutionTools(server: McpServer, env: ToolEnv): void {
  registerRunTools(server, env);
  registerProvenanceTool(server, env);
}

function registerRunTools(server: McpServer, env: ToolEnv): void {
  const { ctx, principal } = env;
  server.registerTool(
    'start_execution',
    {
      title: 'Start an execution',
      description:
        'APPROVED → EXECUTING, after re-checking that the approvals still count (unexpired, binding the digest). Returns the run (run_id). Then run the artifact yourself, record its outputs and finish_execution.',
      inputSchema: { artifact_id: artifactId, version: versionNumber },
      annotations: WRITE,
    },
    (args) =>
      runTool('start_execution', env.results, async () =>
        executionView(await startExecution(ctx, principal, args.artifact_id, await resolveVersionRef(ctx, args.artifact_id, args.version))),
      ),
  );
  server.registerTool(
    'record',
    {
      title: 'Record an output of a running execution',
      description:
        'Stores stdout.log, stderr.log or output.json of a RUNNING run. Each output is written once (outputs are immutable): send the whole log in one call, before finish_execution.',
      inputSchema: { run_id: runId, output: outputName, ...contentFields(env.allowFilePaths) },
      annotations: WRITE,
    },
    (args) =>
      runTool('record', env.results, async () => {
        const c = await contentBody(args, env.allowFilePaths);
        const rec = await storing(c, () =>
          uploadOutput(ctx, principal, args.run_id, args.output, c.body, {
            size: c.size,
            ...(c.expectedDigest ? { expectedDigest: c.expectedDigest } : {}),
          }),
        );
        return { run_id: args.run_id, output: args.output, ...rec };
      }),
  );
  server.registerTool(
    'finish_execution',
    {
      title: 'Finish an execution',
      description:
        'EXECUTING → EXECUTED (status SUCCEEDED) or FAILED, with the exit code (and the signal, if one ended it). Returns the run.',
      inputSchema: {
        run_id: runId,
        status: z.enum(['SUCCEEDED', 'FAILED']),
        exit_code: z.number().int().describe('the process exit code'),
        signal: z
          .string()
          .regex(new RegExp(SIGNAL_NAME_PATTERN), 'a signal name such as SIGKILL')
          .optional()
          .describe('the signal that ended it (status FAILED)'),
      },
      annotations: WRITE,
    },
    (args) =>
      runTool('finish_execution', env.results, async () =>
        executionView(
          await finishExecution(ctx, principal, args.run_id, {
            status: args.status,
            exitCode: args.exit_code,
            ...(args.signal !== undefined ? { signal: args.signal } : {}),
          }),
        ),
      ),
  );
  server.registerTool(
    'get_execution',
    {
      title: 'An execution and its outputs',
      description: 'The run: status, exit code, and the digest and size of each recorded output.',
      inputSchema: { run_id: runId },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) => runTool('get_execution', env.results, async () => executionView(await readExecution(ctx, args.run_id))),
  );
}

function registerProvenanceTool(server: McpServer, env: ToolEnv): void {
  const { ctx, principal } = env;
  server.registerTool(
    'add_provenance',
    {
      title: 'Append a provenance step',
      description:
        'Records how the artifact came to be: the action, its inputs and outputs by sha256 digest, the tool and model used. Hash-chained; recorded as you (actor, if given, is your claim).',
      inputSchema: {
        artifact_id: artifactId,
        action: z.string().min(1).max(200).describe('what was done, e.g. generate, review, test'),
        actor: z.string().min(1).max(200).optional().describe('who did it, when not you (e.g. the model acting for you)'),
        inputs: sha256List.optional().describe('digests of the inputs (sha256:…)'),
        outputs: sha256List.optional().describe('digests of the outputs (sha256:…)'),
        tool: z.string().max(200).optional(),
        model: z.string().max(200).optional(),
        note: z.string().max(4000).optional(),
      },
      annotations: WRITE,
    },
    (args) =>
      runTool('add_provenance', env.results, async () => {
        const { artifact_id, ...input } = args;
        return provenanceStepView(await addProvenance(ctx, principal, artifact_id, input));
      }),
  );
}
