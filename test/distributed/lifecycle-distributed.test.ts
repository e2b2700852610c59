import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { showArtifact } from '../../src/lifecycle/artifacts.ts';
import { VERSION_STATES } from '../../src/lifecycle/state-machine.ts';
import { collectRefs, verifyObjects } from '../../src/lifecycle/verify-content.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { type DistributedInstallation, distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { walkEveryState } from '../helpers/walk.ts';

const opened: DistributedInstallation[] = [];
after(async () => {
  for (const i of opened) await i.close();
  await stopDistributedServers();
});

describe('the lifecycle on DynamoDB Local + s3rver', () => {
  it('walks every state of DESIGN §5 with intact chains and verified objects, unchanged from the embedded test', async () => {
    const inst = await distributedInstallation();
    opened.push(inst);
    const seen = new Set<string>();
    const { id, compensations } = await walkEveryState(inst.ctx, (s) => seen.add(s));
    assert.deepEqual([...seen].sort(), [...VERSION_STATES].sort());
    assert.deepEqual(
      (await showArtifact(inst.ctx, id)).versions.map((v) => v.state),
      ['ARCHIVED', 'ARCHIVED', 'ARCHIVED', 'ARCHIVED'],
    );
    for (const a of [id, ...compensations]) assert.deepEqual((await verifyArtifactAudit(inst.ctx, a)).findings, [], a);
    const report = await verifyObjects(inst.ctx, await collectRefs(inst.ctx));
    assert.deepEqual(report.findings, []);
    const archived = await inst.ctx.content.head(((await showArtifact(inst.ctx, id)).versions[0]?.archive_key as string) ?? '');
    assert.equal(archived?.storageClass, 'GLACIER', 'archive copies are written as GLACIER on S3');
  });

  it('the CLI works against the distributed profile: init creates the table, create/get/verify/audit', async () => {
    const inst = await distributedInstallation();
    opened.push(inst);
    const env = { ...inst.env, ALP_METADATA: inst.metadataUrl.replace(inst.table, `${inst.table}-cli`) };
    const init = await alpJson(['init'], { env });
    assert.equal(init.created, true);
    const created = await alpJson(['artifact', 'create', '--name', 'remote', '--file', '-', '--filename', 'r.txt'], {
      env,
      input: 'remote bytes',
    });
    const got = await runAlp(['artifact', 'get', created.artifact_id as string, '--out', '-'], { env });
    assert.equal(got.code, 0, got.stderr);
    assert.equal(got.stdout, 'remote bytes');
    assert.equal((await alpJson(['verify', '--all'], { env })).ok, 2);
    assert.equal((await alpJson(['audit', 'verify'], { env })).ok, true);
    const status = await alpJson<{ engine: string; summary: Record<string, unknown> }>(['lifecycle', 'status'], { env });
    assert.equal(status.engine, 's3');
    const apply = await runAlp(['lifecycle', 'apply'], { env });
    assert.equal(apply.code, 1, 's3rver has no lifecycle API: a clear error, not a silent success');
    assert.match(apply.stderr, /does not implement bucket lifecycle configuration/);
  });
});
