import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { compensate } from '../../src/lifecycle/compensation.ts';
import { finishExecution, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import type { Principal } from '../../src/lifecycle/model.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import { propose, withdraw } from '../../src/lifecycle/transitions.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import { bytesOf } from './tmp.ts';

export const agent: Principal = { id: 'agent-7', kind: 'agent' };
export const alice: Principal = { id: 'alice', kind: 'human' };
export const bob: Principal = { id: 'bob', kind: 'human' };

/** Approves (as alice) and runs a version to its end with the given outcome. */
export async function approveAndRun(ctx: ServiceContext, id: string, version: number, status: 'SUCCEEDED' | 'FAILED', logs = true) {
  await propose(ctx, agent, id, version);
  await decide(ctx, alice, id, version, { decision: 'APPROVE', evidenceRef: 'CR-1' });
  const run = await startExecution(ctx, agent, id, version);
  if (logs) {
    await uploadOutput(ctx, agent, run.run_id, 'stdout.log', bytesOf(`out of v${version}\n`));
    await uploadOutput(ctx, agent, run.run_id, 'output.json', bytesOf('{"ok":true}'));
  }
  await finishExecution(ctx, agent, run.run_id, { status, exitCode: status === 'SUCCEEDED' ? 0 : 1 });
  return run.run_id;
}

/**
 * Walks one artifact through every state of DESIGN §5 (the compensation artifacts walk their own).
 * Returns the artifact id and the compensation ids; every version ends ARCHIVED.
 */
export async function walkEveryState(ctx: ServiceContext, seen: (state: string) => void = () => {}) {
  const { version: v1 } = await createArtifact(ctx, agent, { name: 'walk', filename: 'run.sh', body: bytesOf('echo 1\n') });
  const id = v1.artifact_id;
  seen('DRAFT');
  seen((await propose(ctx, agent, id, 1)).state);
  seen((await withdraw(ctx, agent, id, 1)).state);
  await propose(ctx, agent, id, 1);
  seen((await decide(ctx, alice, id, 1, { decision: 'REJECT', evidenceRef: 'review-1' })).version.state);
  await addVersion(ctx, agent, id, { filename: 'run.sh', body: bytesOf('echo 2\n') });
  await addProvenance(ctx, agent, id, { action: 'generate', model: 'model-x', outputs: [v1.content_hash] });
  await propose(ctx, agent, id, 2);
  seen((await decide(ctx, alice, id, 2, { decision: 'APPROVE', evidenceRef: 'CR-2' })).version.state);
  const run2 = await startExecution(ctx, agent, id, 2);
  seen('EXECUTING');
  await uploadOutput(ctx, agent, run2.run_id, 'stderr.log', bytesOf('boom\n'));
  await finishExecution(ctx, agent, run2.run_id, { status: 'FAILED', exitCode: 2 });
  seen('FAILED');
  const c1 = await compensate(ctx, agent, id, 2, { filename: 'undo.sh', body: bytesOf('undo 2\n') });
  seen(c1.compensated.state);
  await approveAndRun(ctx, c1.compensation.artifact_id, 1, 'SUCCEEDED');
  seen('COMPENSATED');
  await addVersion(ctx, agent, id, { filename: 'run.sh', body: bytesOf('echo 3\n') });
  await addVersion(ctx, agent, id, { filename: 'run.sh', body: bytesOf('echo 4\n') });
  await approveAndRun(ctx, id, 4, 'SUCCEEDED');
  seen('SUPERSEDED');
  seen('EXECUTED');
  const c2 = await compensate(ctx, agent, id, 4, { filename: 'undo4.sh', body: bytesOf('undo 4\n') });
  await approveAndRun(ctx, c2.compensation.artifact_id, 1, 'FAILED');
  await archiveArtifact(ctx, alice, id);
  seen('ARCHIVED');
  return { id, compensations: [c1.compensation.artifact_id, c2.compensation.artifact_id] };
}
