/**
 * Issue 14, retention and recovery paths (items 4 and 5), on both profiles (SQLite + fs and DynamoDB
 * Local + s3rver). Time moves only through the injected clock. A "crash" of a purge is a content
 * store whose first delete throws (the fault-injection approach of test/retention/suite.ts).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DAY_MS } from '../../src/core/clock.ts';
import { readFence } from '../../src/recovery/maintenance.ts';
import { recoverMaintenance } from '../../src/recovery/recovery-steps.ts';
import { advanceEpoch } from '../../src/recovery/system.ts';
import { localTrustedHost } from '../../src/retention/host.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import { stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf, collect } from '../helpers/tmp.ts';
import { distributed, type Engine, embedded, epochOf, host, operator, type RetentionInstallation } from '../retention/harness.ts';

after(stopDistributedServers);

function retentionSafety(engine: Engine): void {
  describe(`retention safety (issue 14) on ${engine.name}`, () => {
    const opened: RetentionInstallation[] = [];
    const fresh = async () => {
      const i = await engine.open();
      opened.push(i);
      return i;
    };
    after(async () => {
      for (const i of opened) await i.close();
    });
    const orphan = async (i: RetentionInstallation, key: string, data: string) => (await i.ctx.content.put(key, bytesOf(data))).digest;
    const run = async (i: RetentionInstallation, action: 'QUARANTINE' | 'PURGE', restore: string, pins: string[] = []) => {
      const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
      return retention.run(await epochOf(i.ctx), action, host(i.ctx, { restore, pins }));
    };
    const observation = async (i: RetentionInstallation, key: string) =>
      (await new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock }).observations()).get(key);

    /** Quarantines what is orphaned now, lets the quarantine pass, then starts a PURGE that dies at its first delete. */
    const purgeDiesAfterPrepared = async (i: RetentionInstallation, restore: string, pins: string[]) => {
      await run(i, 'QUARANTINE', restore);
      i.ctx.clock.advance(7 * DAY_MS);
      await run(i, 'QUARANTINE', restore);
      i.ctx.clock.advance(30 * DAY_MS);
      const realDelete = i.ctx.content.delete.bind(i.ctx.content);
      i.ctx.content.delete = async () => {
        throw new Error('killed before the first unlink');
      };
      // The CLI's host for a PURGE: the fence stays held when the purge dies midway.
      const cliHost = localTrustedHost(i.ctx, {
        owner: 'retention os:operator',
        approver: operator,
        evidenceRef: 'CHG-14',
        restore,
        pins,
        holdOnFailure: true,
      });
      const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
      await assert.rejects(retention.run(await epochOf(i.ctx), 'PURGE', cliHost), /killed before the first unlink/);
      i.ctx.content.delete = realDelete;
      assert.ok(await readFence(i.ctx), 'the dead purge left its fence');
      await advanceEpoch(i.ctx.items, operator.id, 'purge died', i.ctx.clock.now().toISOString());
    };

    it('issue 14 item 4: pins survive a PURGE that dies after PREPARED — recovery honours the recorded pins and its own, and never unlinks a pinned object', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      const keep = await orphan(i, 'artifacts/p/v1/keep-me', 'the operator decides to keep this after the crash');
      await orphan(i, 'artifacts/p/v1/reclaim-me', 'really unwanted');
      const pinnedAtRun = await orphan(i, 'artifacts/p/v1/pinned-at-run', 'pinned by the purge itself');
      await purgeDiesAfterPrepared(i, restore, [pinnedAtRun]);
      const prepared = await observation(i, 'artifacts/p/v1/keep-me');
      assert.equal(prepared?.state, 'PREPARED');
      assert.deepEqual(prepared?.pins, [pinnedAtRun], 'the pins in force are recorded with the prepared purge');

      const r = await recoverMaintenance(i.ctx, await epochOf(i.ctx), 'recovery by os:operator', undefined, { pins: [keep] });
      const step = r.steps.find((s) => s.name.startsWith('retention'))?.result as Record<string, unknown>;
      assert.equal(step.pins, 2, 'the recovery scan used the recorded pin and the recovery pin');
      assert.deepEqual(step.cancelled, ['artifacts/p/v1/keep-me']);
      assert.deepEqual(step.purged, []);
      assert.equal((await observation(i, 'artifacts/p/v1/reclaim-me'))?.state, 'QUARANTINED', 'never prepared: left for the next purge');
      // The pinned object is still there and verifies against its digest.
      const bytes = await collect(await i.ctx.content.get('artifacts/p/v1/keep-me', keep));
      assert.equal(bytes.toString(), 'the operator decides to keep this after the crash');
      await collect(await i.ctx.content.get('artifacts/p/v1/pinned-at-run', pinnedAtRun));
      assert.equal(await observation(i, 'artifacts/p/v1/keep-me'), undefined, 'its purge is cancelled, not left PREPARED');
      assert.equal(await readFence(i.ctx), undefined, 'recovery released the fence');
    });
  });
}

retentionSafety(embedded);
retentionSafety(distributed);
