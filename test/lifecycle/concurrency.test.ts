import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, it } from 'node:test';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { decide, listApprovals } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { listExecutions } from '../../src/lifecycle/executions.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { readVersion } from '../../src/lifecycle/versions.ts';
import { fromSource } from '../helpers/cli-bundle.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';

const worker = path.resolve(import.meta.dirname, '../fixtures/race-worker.ts');

function race(args: string[][]): Promise<Array<{ ok: boolean; code?: string; exit?: number }>> {
  return Promise.all(
    args.map(
      (a) =>
        new Promise<{ ok: boolean; code?: string; exit?: number }>((resolve, reject) => {
          const child = spawn(process.execPath, [...fromSource(worker), ...a], { stdio: ['ignore', 'pipe', 'inherit'] });
          let out = '';
          child.stdout.on('data', (d: Buffer) => (out += d.toString()));
          child.on('error', reject);
          child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out.trim())) : reject(new Error(`racer exited ${code}: ${out}`))));
        }),
    ),
  );
}

describe('processes racing on one SQLite file', () => {
  it('the same transition from 6 processes: exactly one winner, every loser refused with exit 4, chain intact', async () => {
    const ctx = await embeddedContext(new Date().toISOString());
    const { version } = await createArtifact(ctx, agent, { name: 'race', filename: 'f', body: bytesOf('x') });
    const start = String(Date.now() + 2500);
    const results = await race(
      Array.from({ length: 6 }, (_, i) => [ctx.dbPath, ctx.contentRoot, start, 'propose', version.artifact_id, '1', `agent-${i}`]),
    );
    assert.equal(results.filter((r) => r.ok).length, 1, JSON.stringify(results));
    for (const r of results.filter((x) => !x.ok)) {
      assert.equal(r.exit, 4);
      assert.ok(r.code === 'CONFLICT' || r.code === 'ILLEGAL_TRANSITION', String(r.code));
    }
    assert.equal((await readVersion(ctx.items, version.artifact_id, 1)).state, 'PROPOSED');
    const report = await verifyArtifactAudit(ctx, version.artifact_id);
    assert.deepEqual(report.findings, []);
    assert.equal(report.entries, 2, 'creation + one PROPOSED transition, nothing of the losers');
  });

  it('execution start from 4 processes: one run, one EXECUTING transition', async () => {
    const ctx = await embeddedContext(new Date().toISOString());
    const { version } = await createArtifact(ctx, agent, { name: 'race', filename: 'f', body: bytesOf('x') });
    await propose(ctx, agent, version.artifact_id, 1);
    await decide(ctx, alice, version.artifact_id, 1, { decision: 'APPROVE', evidenceRef: 'e' });
    const start = String(Date.now() + 2500);
    const results = await race(
      Array.from({ length: 4 }, (_, i) => [ctx.dbPath, ctx.contentRoot, start, 'start', version.artifact_id, '1', `agent-${i}`]),
    );
    assert.equal(results.filter((r) => r.ok).length, 1, JSON.stringify(results));
    assert.equal((await listExecutions(ctx, version.artifact_id)).length, 1);
    assert.deepEqual((await verifyArtifactAudit(ctx, version.artifact_id)).findings, []);
  });

  it('approvals by 4 different humans at once are all recorded and counted once each (quorum 3)', async () => {
    const ctx = await embeddedContext(new Date().toISOString());
    const { version } = await createArtifact(ctx, agent, { name: 'race', filename: 'f', body: bytesOf('x'), quorum: 3 });
    await propose(ctx, agent, version.artifact_id, 1);
    const start = String(Date.now() + 2500);
    const results = await race(
      Array.from({ length: 4 }, (_, i) => [ctx.dbPath, ctx.contentRoot, start, 'approve', version.artifact_id, '1', `human-${i}`]),
    );
    const approvals = await listApprovals(ctx, version.artifact_id);
    assert.equal((await readVersion(ctx.items, version.artifact_id, 1)).state, 'APPROVED');
    // Approvals arriving after the quorum find the version APPROVED and are refused.
    assert.equal(approvals.length, results.filter((r) => r.ok).length);
    assert.ok(approvals.length >= 3);
    assert.equal(new Set(approvals.map((a) => a.actor.id)).size, approvals.length);
    assert.deepEqual((await verifyArtifactAudit(ctx, version.artifact_id)).findings, []);
  });
});
