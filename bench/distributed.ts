/**
 * Issue 5 figures: requests (and consumed capacity, where DynamoDB Local reports it) per lifecycle
 * operation on the distributed profile, against DynamoDB Local + s3rver on loopback. Goal: one
 * TransactWriteItems per transition, no Scan on any request path.
 */
import { decide } from '../src/lifecycle/approvals.ts';
import { addVersion, createArtifact, listArtifacts, openVersionContent } from '../src/lifecycle/artifacts.ts';
import { finishExecution, startExecution, uploadOutput } from '../src/lifecycle/executions.ts';
import { addProvenance } from '../src/lifecycle/provenance.ts';
import { propose, transition } from '../src/lifecycle/transitions.ts';
import { distributedInstallation, stopDistributedServers } from '../test/helpers/distributed.ts';
import { header } from './util.ts';

const agent = { id: 'bench-agent', kind: 'agent' as const };
const human = { id: 'bench-human', kind: 'human' as const };

export async function benchDistributed(): Promise<Record<string, Record<string, number>>> {
  const inst = await distributedInstallation(new Date().toISOString());
  const { ctx } = inst;
  const results: Record<string, Record<string, number>> = {};
  const measure = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    ctx.items.resetStats();
    ctx.content.resetStats();
    const value = await fn();
    const d = ctx.items.stats();
    const s = ctx.content.stats();
    results[name] = { ...prefixed('ddb', d), ...prefixed('s3', s) };
    return value;
  };
  try {
    header('distributed: requests per lifecycle operation (DynamoDB Local + s3rver)');
    const { version } = await measure('artifact create (4 KiB)', () =>
      createArtifact(ctx, agent, { name: 'cost', filename: 'f.sh', body: [Buffer.alloc(4096, 1)] }),
    );
    const id = version.artifact_id;
    await measure('artifact version (4 KiB)', () => addVersion(ctx, agent, id, { filename: 'f.sh', body: [Buffer.alloc(4096, 2)] }));
    await measure('propose (supersedes 1)', () => propose(ctx, agent, id, 2));
    await measure('withdraw (transition)', () => transition(ctx, agent, id, 2, 'DRAFT'));
    await propose(ctx, agent, id, 2);
    await measure('approve (quorum reached)', () => decide(ctx, human, id, 2, { decision: 'APPROVE', evidenceRef: 'bench' }));
    const run = await measure('exec start', () => startExecution(ctx, agent, id, 2));
    await measure('exec upload (4 KiB)', () => uploadOutput(ctx, agent, run.run_id, 'stdout.log', [Buffer.alloc(4096, 3)]));
    await measure('exec finish', () => finishExecution(ctx, agent, run.run_id, { status: 'SUCCEEDED', exitCode: 0 }));
    await measure('provenance add', () => addProvenance(ctx, agent, id, { action: 'bench' }));
    await measure('verified read (4 KiB)', async () => {
      const { stream } = await openVersionContent(ctx, id, 2);
      for await (const _ of stream) {
      }
    });
    await measure('list by state (page of 50)', () => listArtifacts(ctx, { state: 'EXECUTED', limit: 50 }));
    for (const [op, counts] of Object.entries(results)) {
      const text = Object.entries(counts)
        .filter(([k, v]) => v > 0 && !k.endsWith('bytesWritten'))
        .map(([k, v]) => `${k}=${Number.isInteger(v) ? v : v.toFixed(1)}`)
        .join(' ');
      console.log(`  ${op.padEnd(28)} ${text}`);
    }
    const scans = Object.entries(results).filter(([, c]) => (c['ddb.Scan'] ?? 0) > 0);
    const transitions = ['withdraw (transition)', 'propose (supersedes 1)', 'approve (quorum reached)', 'exec start', 'exec finish'];
    const oneTx = transitions.every((t) => results[t]?.['ddb.TransactWriteItems'] === 1);
    console.log(
      `  Scan on a request path: ${scans.length ? scans.map(([k]) => k).join(', ') : 'none'}; one TransactWriteItems per transition: ${oneTx ? 'yes' : 'NO'}`,
    );
  } finally {
    await inst.close();
    await stopDistributedServers();
  }
  return results;
}

function prefixed(p: string, counts: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(counts).map(([k, v]) => [`${p}.${k}`, v]));
}
