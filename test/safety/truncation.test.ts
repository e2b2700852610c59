/**
 * Issue 14 item 12: tail truncation. A human rejection's audit entries are deleted and the HEAD and
 * the version item are set back to values they held before (all of them valid, chained rows), which
 * passes every per-chain check. The installation-wide append counter (telemetry STATE item) and an
 * operator's checkpoint detect it: `alp audit verify`, `alp audit verify --checkpoint` and reconcile.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { readHead } from '../../src/audit/chain.ts';
import { establishAuditBaseline } from '../../src/audit/counter.ts';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { artifactPk } from '../../src/core/keys.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { readVersion } from '../../src/lifecycle/versions.ts';
import { reconcile } from '../../src/recovery/reconcile.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import { queryAll } from '../../src/store/item-store.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { cliErrorText } from '../helpers/cli.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';
import { cli, distributedProfile, embeddedProfile, type Profile } from './checks.ts';

after(stopDistributedServers);

const profiles: Array<[string, () => Promise<Profile>]> = [
  ['SQLite + directory', async () => embeddedProfile(await embeddedContext())],
  ['DynamoDB Local + s3rver', async () => distributedProfile(await distributedInstallation())],
];

for (const [profile, open] of profiles) {
  describe(`issue 14 item 12: tail truncation (${profile})`, () => {
    it('issue 14 item 12: deleting a rejection’s audit entries and setting HEAD and version back is detected by the append counter and a checkpoint', async () => {
      const p = await open();
      const { ctx } = p;
      // As every entry point: the telemetry sink counts appends; init records the baseline.
      await (await attachAuditSinks(ctx)).open();
      await initInstallation(ctx);
      assert.equal(await establishAuditBaseline(ctx), 0);
      const { version } = await createArtifact(ctx, agent, { name: 'risky', filename: 'r.sh', body: bytesOf('rm -rf /tmp/x\n') });
      const other = await createArtifact(ctx, agent, { name: 'other', filename: 'o.sh', body: bytesOf('true\n') });
      const id = version.artifact_id;
      await propose(ctx, agent, id, 1);
      const headBefore = await readHead(ctx, id);
      const versionBefore = await readVersion(ctx.items, id, 1);
      const before = new Set((await queryAll(ctx.items, { pk: artifactPk(id), consistent: true })).map((i) => i.SK));
      await decide(ctx, alice, id, 1, { decision: 'REJECT', evidenceRef: 'CR-9 too dangerous' });
      assert.equal((await readVersion(ctx.items, id, 1)).state, 'REJECTED');
      const checkpointFile = path.join(tempDir('alp-cp'), 'cp.json');
      const taken = await cli(p, ['audit', 'checkpoint', '--format', 'chains', '--out', checkpointFile]);
      assert.equal(taken.code, 0, taken.stderr);
      const intact = await cli(p, ['audit', 'verify', '--checkpoint', checkpointFile]);
      assert.equal(intact.code, 0, intact.stdout);
      assert.equal(JSON.parse(intact.stdout).counter.status, 'checked');

      // The attack: the rejection's entries go, the HEAD and the version get their earlier rows back.
      const added = (await queryAll(ctx.items, { pk: artifactPk(id), consistent: true })).filter((i) => !before.has(i.SK));
      // The transaction's transparency-log record is in the HEAD's queue (issue 20 item 1): putting the
      // earlier HEAD back removes it too, so the chain verifies.
      assert.deepEqual(added.map((i) => i.type).sort(), ['approval', 'transition']);
      for (const i of added) await ctx.items.delete({ PK: i.PK, SK: i.SK });
      await ctx.items.put(headBefore);
      await ctx.items.put(versionBefore);
      assert.equal((await verifyArtifactAudit(ctx, id)).ok, true, 'the truncated chain verifies on its own');
      assert.equal((await readHead(ctx, other.head.artifact_id)).audit_seq, 1);

      const verify = await cli(p, ['audit', 'verify']);
      assert.equal(verify.code, 5, verify.stdout);
      const report = JSON.parse(verify.stdout) as {
        counter: { status: string; ok: boolean; sum: number; appended: number; detail: string };
      };
      assert.deepEqual([report.counter.status, report.counter.ok, report.counter.sum, report.counter.appended], ['checked', false, 3, 5]);
      assert.match(report.counter.detail, /tail truncation/);
      assert.match(cliErrorText(verify.stderr), /INTEGRITY: audit chain broken at TELQ#outbox STATE/);

      const withCheckpoint = await cli(p, ['audit', 'verify', id, '--checkpoint', checkpointFile]);
      assert.equal(withCheckpoint.code, 5);
      assert.match(withCheckpoint.stdout, /the chain has 2 entries, fewer than the checkpoint's 4 \(truncated\)/);

      const rec = await reconcile(ctx, { actor: 'test' });
      assert.equal(rec.status, 'FAILED');
      assert.ok(rec.findings.some((f) => f.kind === 'audit' && f.problem === 'truncated'));

      // What is not prevented, only detected: the set-back version can be approved.
      await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'CR-10' });
      assert.equal((await readVersion(ctx.items, id, 1)).state, 'APPROVED');
      assert.equal((await cli(p, ['audit', 'verify'])).code, 5, 'still detected after later appends');
      fs.rmSync(path.dirname(checkpointFile), { recursive: true, force: true });
    });
  });
}
