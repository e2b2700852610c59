/**
 * Fence shards are live locks, never data: a backup taken by a fenced scan (DynamoDB: the backup holds
 * every shard while it reads the table) leaves them out, so a restore can never plant a held shard.
 * Both engines, 8 shards.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { fenceShardKey } from '../../src/core/keys.ts';
import { createBackup } from '../../src/recovery/backup.ts';
import { ITEMS_FILE, isNeverBackedUp, MANIFEST_FILE } from '../../src/recovery/backup-format.ts';
import { fenceKey } from '../../src/system/fence.ts';
import { stopDistributedServers } from '../helpers/distributed.ts';
import { tempDir } from '../helpers/tmp.ts';
import { ENGINES, installation } from './fence-harness.ts';

after(stopDistributedServers);

describe('fence shards are never backed up', () => {
  test('the backup filter names the master and every shard key', () => {
    assert.equal(isNeverBackedUp(fenceKey), true);
    for (const n of [2, 8, 256]) for (const s of [0, n - 1]) assert.equal(isNeverBackedUp(fenceShardKey(s, n)), true);
    assert.equal(isNeverBackedUp({ PK: 'SYS#fencer', SK: 'FENCE' }), false);
    assert.equal(isNeverBackedUp({ PK: 'SYS#fence#1', SK: 'OTHER' }), false);
  });

  for (const engine of ENGINES) {
    test(`a backup on ${engine} with 8 shards holds no fence item`, async () => {
      const { ctx, close } = await installation(engine, 8);
      try {
        const out = path.join(tempDir('alp-fence-bk'), 'b');
        await createBackup(ctx, { out, actor: 'test' });
        const lines = fs.readFileSync(path.join(out, ITEMS_FILE), 'utf8').split('\n').filter(Boolean);
        const keys = lines.map((l) => JSON.parse(l) as { PK: string; SK: string });
        assert.ok(keys.length > 0);
        assert.deepEqual(
          keys.filter((k) => k.SK === 'FENCE'),
          [],
        );
        const manifest = JSON.parse(fs.readFileSync(path.join(out, MANIFEST_FILE), 'utf8')) as { consistency: string; excluded: string[] };
        if (manifest.consistency === 'fenced-scan') {
          // The backup read the table while it held the master and all 8 shards: all were met and left out.
          const shards = manifest.excluded.filter((k) => k.startsWith('SYS#fence#'));
          assert.equal(shards.length, 8, manifest.excluded.join('; '));
        }
        assert.equal(manifest.consistency, engine === 'dynamodb' ? 'fenced-scan' : 'point-in-time');
      } finally {
        await close();
      }
    });
  }
});
