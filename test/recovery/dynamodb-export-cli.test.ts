/**
 * `alp backup-native export | status | list | restore` as an operator runs it (real processes), then
 * `alp reconcile --activate` on the restored table. The DynamoDB PITR / export / import APIs are
 * answered by the MODEL in test/helpers/dynamodb-export-model.ts (DynamoDB Local has none of them): the
 * installation's metadata URL names the model's endpoint, which forwards every other request to
 * DynamoDB Local.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { runAlp } from '../helpers/cli.ts';
import { distributedInstallation, distributedServers, stopDistributedServers } from '../helpers/distributed.ts';
import { startExportModel } from '../helpers/dynamodb-export-model.ts';

type Json = Record<string, unknown>;
const agent = { id: 'agent-1', kind: 'agent' as const };

describe('alp backup-native (MODEL of the DynamoDB export APIs in front of DynamoDB Local)', () => {
  after(stopDistributedServers);

  it('export --enable-pitr --wait, list, status, restore (ImportTable) → VERIFIED, then reconcile --activate on the new table', async () => {
    const { dynamo, s3 } = await distributedServers();
    const inst = await distributedInstallation();
    const model = await startExportModel(dynamo.endpoint, s3.client());
    try {
      await initInstallation(inst.ctx);
      await createArtifact(inst.ctx, agent, { name: 'cli-native', filename: 'f.txt', body: [Buffer.from('native backup bytes')] });
      const url = (table: string) => `dynamodb://${table}?region=${dynamo.region}&endpoint=${encodeURIComponent(model.endpoint)}`;
      const env = { ...inst.env, ALP_METADATA: url(inst.table) };
      const alp = async (args: string[], e = env) => {
        const r = await runAlp([...args, '--json'], { env: e });
        assert.equal(r.code, 0, `alp ${args.join(' ')}: ${r.stderr}`);
        return JSON.parse(r.stdout) as Json;
      };

      const refused = await runAlp(['backup-native', 'export'], { env });
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /point-in-time recovery is DISABLED/);

      const rec = await alp(['backup-native', 'export', '--enable-pitr', '--wait', '--poll-ms', '50']);
      assert.equal(rec.status, 'COMPLETED');
      assert.match(String(rec.manifest_digest), /^sha256:[0-9a-f]{64}$/);
      const id = String(rec.native_backup_id);
      assert.deepEqual(
        ((await alp(['backup-native', 'list'])).native_backups as Json[]).map((b) => b.native_backup_id),
        [id],
      );
      assert.equal((await alp(['backup-native', 'status', id])).status, 'COMPLETED');
      // `alp backups` (the engine-neutral registry retention reads) does not list it.
      assert.deepEqual((await alp(['backups'])).backups, []);

      const table = `native-cli-${randomUUID().slice(0, 8)}`;
      const restored = await alp(['backup-native', 'restore', id, '--table', table, '--poll-ms', '50']);
      assert.equal((restored.reconcile as Json).status, 'VERIFIED', JSON.stringify(restored.reconcile));
      const activated = await alp(['reconcile', '--activate'], { ...env, ALP_METADATA: url(table) });
      assert.equal(activated.status, 'VERIFIED');
      assert.ok(model.answered.includes('ImportTable'));
    } finally {
      await model.stop();
      await inst.close();
    }
  });
});
