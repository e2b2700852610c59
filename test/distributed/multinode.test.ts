/**
 * Many stateless nodes (issue 5): two `alp start` processes on different ports share one DynamoDB
 * table and one bucket. The same transitions, approvals and execution starts are raced through both:
 * exactly one wins each race, the losers get 409, and every audit chain stays intact.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { listExecutions } from '../../src/lifecycle/executions.ts';
import { createToken } from '../../src/lifecycle/principals.ts';
import { readVersion } from '../../src/lifecycle/versions.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { type ServerProcess, startServerProcess } from '../api/server-process.ts';
import { call, expectStatus } from '../helpers/api-harness.ts';
import { type DistributedInstallation, distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { tempDir } from '../helpers/tmp.ts';

const nodes: ServerProcess[] = [];
let inst: DistributedInstallation | undefined;
after(async () => {
  for (const n of nodes) await n.stop('SIGTERM').catch(() => {});
  await inst?.close();
  await stopDistributedServers();
});

describe('two alp nodes on one DynamoDB table and one bucket', () => {
  it('races transitions, approvals and execution starts through both: one winner each, 409 for the rest, chains intact', async () => {
    inst = await distributedInstallation(new Date().toISOString());
    await initInstallation(inst.ctx);
    const admin = { id: 'os:test', kind: 'human' as const };
    const agent = (await createToken(inst.ctx, { principal: 'agent-1', kind: 'agent' }, admin)).token;
    const alice = (await createToken(inst.ctx, { principal: 'alice', kind: 'human' }, admin)).token;
    const bob = (await createToken(inst.ctx, { principal: 'bob', kind: 'human' }, admin)).token;
    const args = ['--metadata', inst.metadataUrl, '--content', inst.contentUrl];
    const env = Object.fromEntries(Object.entries(inst.env).filter(([k]) => k.startsWith('AWS_')));
    for (let n = 0; n < 2; n++) nodes.push(await startServerProcess(tempDir('alp-node'), args, env));
    const [a, b] = nodes.map((n) => n.url) as [string, string];
    assert.notEqual(a, b);

    const ids: string[] = [];
    for (let k = 0; k < 4; k++) {
      const created = expectStatus(
        await call(k % 2 ? a : b, 'POST', `/v1/artifacts?name=race-${k}&filename=run.sh`, { token: agent, body: `echo ${k}\n` }),
        201,
      );
      ids.push(created.json.artifact_id as string);
    }
    const outcomes: Record<'propose' | 'approve' | 'start', [number, number]> = { propose: [0, 0], approve: [0, 0], start: [0, 0] };
    const tally = (kind: keyof typeof outcomes, statuses: number[]) => {
      for (const s of statuses) {
        assert.ok(s < 300 || s === 409, `${kind}: unexpected ${s}`);
        outcomes[kind][s < 300 ? 0 : 1]++;
      }
      assert.equal(statuses.filter((s) => s < 300).length, 1, `${kind}: exactly one winner (${statuses.join(',')})`);
    };
    for (const id of ids) {
      const propose = await Promise.all(
        [a, b, a, b].map((node) =>
          call(node, 'POST', `/v1/artifacts/${id}/versions/1/transitions`, { token: agent, json: { to: 'PROPOSED' } }),
        ),
      );
      tally(
        'propose',
        propose.map((r) => r.status),
      );
      const approve = await Promise.all(
        [
          [a, alice],
          [b, bob],
        ].map(([node, token]) =>
          call(node as string, 'POST', `/v1/artifacts/${id}/versions/1/approvals`, {
            token: token as string,
            json: { decision: 'APPROVE', evidence_ref: 'race' },
          }),
        ),
      );
      // Quorum 1: both approvals may be recorded only if the first did not yet approve the version;
      // the transition to APPROVED happens exactly once.
      assert.ok(approve.some((r) => r.status < 300));
      for (const r of approve) assert.ok(r.status < 300 || r.status === 409, `approve: ${r.status} ${r.text}`);
      outcomes.approve[0] += approve.filter((r) => r.status < 300).length;
      outcomes.approve[1] += approve.filter((r) => r.status === 409).length;
      const start = await Promise.all(
        [a, b, a].map((node) => call(node, 'POST', `/v1/artifacts/${id}/versions/1/executions`, { token: agent })),
      );
      tally(
        'start',
        start.map((r) => r.status),
      );
      assert.equal((await readVersion(inst.ctx.items, id, 1)).state, 'EXECUTING');
      assert.equal((await listExecutions(inst.ctx, id)).length, 1);
      const report = await verifyArtifactAudit(inst.ctx, id);
      assert.deepEqual(report.findings, [], id);
      const transitions = (await import('../../src/audit/history.ts')).history(inst.ctx, id);
      const toApproved = (await transitions).filter((e) => e.type === 'transition' && e.to === 'APPROVED');
      assert.equal(toApproved.length, 1, 'one APPROVED transition');
    }
    process.stdout.write(`# multinode outcomes ${JSON.stringify(outcomes)}\n`);
  });
});
