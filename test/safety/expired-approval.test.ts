import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { history } from '../../src/audit/history.ts';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import type { ManualClock } from '../../src/core/clock.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { Conflict } from '../../src/core/errors.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { startExecution } from '../../src/lifecycle/executions.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { readVersion } from '../../src/lifecycle/versions.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice, bob } from '../helpers/walk.ts';

after(stopDistributedServers);

const profiles: Array<[string, () => Promise<ServiceContext & { clock: ManualClock }>]> = [
  ['SQLite + directory', () => embeddedContext()],
  ['DynamoDB Local + s3rver', async () => (await distributedInstallation()).ctx],
];

for (const [profile, open] of profiles) {
  describe(`issue 14 item 14: an expired approval has a legal way back (${profile})`, () => {
    it('issue 14 item 14: APPROVED with expired approvals → PROPOSED by propose, recorded with the reason; fresh approvals then run', async () => {
      const ctx = await open();
      const { version } = await createArtifact(ctx, agent, { name: 'expiry', filename: 'run.sh', body: bytesOf('echo hi\n') });
      const id = version.artifact_id;
      await propose(ctx, agent, id, 1);
      await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'CR-1', expiresInMs: DAY_MS });
      ctx.clock.advance(2 * DAY_MS);

      const refused = await startExecution(ctx, agent, id, 1).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(refused instanceof Conflict, 'an expired approval does not run');
      assert.match(refused.message, new RegExp(`alp artifact propose ${id} --version 1`), 'the message names the command');

      const reopened = await propose(ctx, agent, id, 1, 'approval lapsed over the weekend');
      assert.equal(reopened.state, 'PROPOSED');
      const move = (await history(ctx, id)).filter((e) => e.type === 'transition').at(-1) as Record<string, unknown>;
      assert.equal(move.from, 'APPROVED');
      assert.equal(move.to, 'PROPOSED');
      assert.match(String(move.reason), /^approvals expired: 0 of 1 still valid; approval lapsed over the weekend$/);

      // The expired approval of the earlier round never counts again; a fresh one does.
      await decide(ctx, bob, id, 1, { decision: 'APPROVE', evidenceRef: 'CR-2' });
      assert.equal((await readVersion(ctx.items, id, 1)).state, 'APPROVED');
      const run = await startExecution(ctx, agent, id, 1);
      assert.equal(run.status, 'RUNNING');
      assert.deepEqual((await verifyArtifactAudit(ctx, id)).findings, []);
    });

    it('issue 14 item 14: an APPROVED version whose quorum is still valid cannot be proposed again', async () => {
      const ctx = await open();
      const { version } = await createArtifact(ctx, agent, { name: 'valid', filename: 'run.sh', body: bytesOf('echo ok\n') });
      const id = version.artifact_id;
      await propose(ctx, agent, id, 1);
      await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'CR-1', expiresInMs: DAY_MS });
      await assert.rejects(propose(ctx, agent, id, 1), (e: unknown) => e instanceof Conflict && /still|valid approval/.test(e.message));
      assert.equal((await readVersion(ctx.items, id, 1)).state, 'APPROVED');
    });
  });
}
