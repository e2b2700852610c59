/**
 * Issue 14 item 2: an upload reservation names its owner (process instance + host + pid, with a lease
 * for owners this host cannot check), and a dead owner's reservation is released at once by the next
 * attempt and not shown as in progress. Service level on both profiles, and kill -9 of a real
 * `alp serve` (`alp start`) in the middle of an output upload.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { Conflict } from '../../src/core/errors.ts';
import { instanceLeaseKey } from '../../src/core/keys.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { compensate } from '../../src/lifecycle/compensation.ts';
import { executionView, finishExecution, readExecution, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import { LEASE_MS, type ProcessInstance } from '../../src/lifecycle/instance.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { readVersion } from '../../src/lifecycle/versions.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import { startAlpProcess } from '../helpers/alp-process.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';
import { heldBody, PROFILES } from './profiles.ts';

/** A pid no process has (above Linux's largest pid_max, 2^22). */
const DEAD_PID = 4_194_304 + 12_345;
const as = <C extends ServiceContext>(ctx: C, instance: ProcessInstance): C => ({ ...ctx, instance });

async function runningExecution(ctx: ServiceContext, name: string) {
  const { version } = await createArtifact(ctx, agent, { name, filename: 'run.sh', body: bytesOf('echo\n') });
  const id = version.artifact_id;
  await propose(ctx, agent, id, 1);
  await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'CR-1' });
  return { id, run: await startExecution(ctx, agent, id, 1) };
}

for (const profile of PROFILES) {
  describe(`upload reservations and their owners (${profile.name})`, () => {
    it('issue 14 item 2: a reservation of a dead process on this host is released at once by the next upload', async () => {
      const ctx = await profile.open();
      const { run } = await runningExecution(ctx, 'dead-owner');
      for (const [output, owner] of [
        ['stdout.log', { id: 'deadpid', host: os.hostname(), pid: DEAD_PID }],
        // This very process restarted: the same pid under another instance id.
        ['stderr.log', { id: 'restarted', host: os.hostname(), pid: process.pid }],
      ] as const) {
        const dead = heldBody('never finished by its writer', '');
        const interrupted = uploadOutput(as(ctx, owner), agent, run.run_id, output, dead.body).catch((e: unknown) => e);
        await dead.pulled;
        assert.equal(executionView(await readExecution(ctx, run.run_id)).uploads_in_progress, undefined, 'a dead owner is not in progress');
        const retry = await uploadOutput(ctx, agent, run.run_id, output, bytesOf(`retried ${output}`));
        assert.equal((await readExecution(ctx, run.run_id)).outputs[output]?.digest, retry.digest);
        dead.release();
        assert.ok((await interrupted) instanceof Conflict, 'the dead owner, had it lived on, loses at the key');
      }
      // A live owner elsewhere (its lease fresh) still holds its reservation; when the lease expires it is released.
      const exec = await readExecution(ctx, run.run_id);
      const nodeB = 'nodeb@node-b.invalid:4242';
      await ctx.items.update(
        { PK: exec.PK, SK: exec.SK },
        { set: { 'reserved:output.json': ctx.clock.now().toISOString(), 'reserved:output.json#owner': nodeB } },
      );
      await ctx.items.put({
        ...instanceLeaseKey('nodeb'),
        type: 'instance_lease',
        instance: nodeB,
        lease_until: new Date(ctx.clock.now().getTime() + LEASE_MS).toISOString(),
      });
      await assert.rejects(uploadOutput(ctx, agent, run.run_id, 'output.json', bytesOf('{}')), /in progress/);
      assert.deepEqual(executionView(await readExecution(ctx, run.run_id)).uploads_in_progress, ['output.json']);
      ctx.clock.advance(LEASE_MS + 1);
      await uploadOutput(ctx, agent, run.run_id, 'output.json', bytesOf('{}'));
      await finishExecution(ctx, agent, run.run_id, { status: 'SUCCEEDED', exitCode: 0 });
    });

    it('issue 14 item 2: a compensation upload of a dead process is released at once by the next attempt', async () => {
      const ctx = await profile.open();
      const { id, run } = await runningExecution(ctx, 'dead-comp');
      await finishExecution(ctx, agent, run.run_id, { status: 'FAILED', exitCode: 1 });
      const dead = heldBody('never finished', '');
      const interrupted = compensate(as(ctx, { id: 'deadpid', host: os.hostname(), pid: DEAD_PID }), agent, id, 1, {
        filename: 'undo.sh',
        body: dead.body,
      }).catch((e: unknown) => e);
      await dead.pulled;
      const retry = await compensate(ctx, agent, id, 1, { filename: 'undo.sh', body: bytesOf('undo\n') });
      assert.equal(retry.compensated.state, 'COMPENSATING');
      dead.release();
      assert.ok((await interrupted) instanceof Conflict);
      assert.equal((await readVersion(ctx.items, id, 1)).rollback_upload_at, undefined);
    });
  });
}

describe('upload reservations after kill -9 of alp serve', () => {
  it('issue 14 item 2: after kill -9 during an output upload, the restarted server takes the retry at once and shows nothing in progress', async () => {
    const data = path.join(tempDir('alp-kill-upload'), 'd');
    let server = await startAlpProcess({ args: ['--data', data] });
    const token = (kind: string) => server.status.tokens.find((t) => t.kind === kind)?.token as string;
    const tokens = { agent: token('agent'), human: token('human') };
    const call = async (who: 'agent' | 'human', method: string, p: string, body?: unknown, raw?: string) => {
      const headers: Record<string, string> = { authorization: `Bearer ${tokens[who]}` };
      if (raw !== undefined) headers['content-type'] = 'application/octet-stream';
      else if (body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(`${server.url}${p}`, { method, headers, ...((raw ?? body) ? { body: raw ?? JSON.stringify(body) } : {}) });
      const text = await res.text();
      return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
    };
    const created = await call('agent', 'POST', '/v1/artifacts?name=killed&filename=run.sh', undefined, 'echo\n');
    const id = created.body.artifact_id as string;
    assert.equal((await call('agent', 'POST', `/v1/artifacts/${id}/versions/1/transitions`, { to: 'PROPOSED' })).status, 200);
    const approved = await call('human', 'POST', `/v1/artifacts/${id}/versions/1/approvals`, {
      decision: 'APPROVE',
      evidence_ref: 'CR-1',
      expires_in: '30d',
    });
    assert.ok(approved.status < 300, JSON.stringify(approved.body));
    const runId = (await call('agent', 'POST', `/v1/artifacts/${id}/versions/1/executions`)).body.run_id as string;

    // A slow upload: the body stays open while the server is killed.
    const url = new URL(`${server.url}/v1/executions/${runId}/stdout.log`);
    const slow = http.request({
      hostname: url.hostname,
      port: url.port,
      path: url.pathname,
      method: 'PUT',
      headers: { authorization: `Bearer ${tokens.agent}`, 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' },
    });
    slow.on('error', () => {});
    slow.write('the first bytes of a long log\n');
    for (let i = 0; ; i++) {
      const view = await call('agent', 'GET', `/v1/executions/${runId}`);
      if ((view.body.uploads_in_progress as string[] | undefined)?.includes('stdout.log')) break;
      assert.ok(i < 200, 'the upload never showed as in progress');
      await new Promise((r) => setTimeout(r, 25));
    }
    server.child.kill('SIGKILL');
    assert.equal((await server.exited).signal, 'SIGKILL');
    slow.destroy();

    server = await startAlpProcess({ args: ['--data', data] });
    try {
      const before = await call('agent', 'GET', `/v1/executions/${runId}`);
      assert.equal(before.body.uploads_in_progress, undefined, JSON.stringify(before.body));
      const retry = await call('agent', 'PUT', `/v1/executions/${runId}/stdout.log`, undefined, 'the whole log, retried\n');
      assert.ok(retry.status === 200 || retry.status === 201, `retry answered ${retry.status}: ${JSON.stringify(retry.body)}`);
      const after = await call('agent', 'GET', `/v1/executions/${runId}`);
      assert.equal(after.body.uploads_in_progress, undefined);
      assert.ok((after.body.outputs as Record<string, unknown>)['stdout.log']);
    } finally {
      await server.stop();
    }
  });
});
