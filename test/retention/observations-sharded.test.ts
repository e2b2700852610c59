/**
 * The retention observation partition, write-sharded (issue 16 item 4): with index_shards > 1 an
 * observation lives in RET#{root}#{s}, s = shardOf(object key, index_shards); every publish
 * condition-checks the observation of each key it publishes in that shard (the key's directory decides
 * the shard, so one version's content and metadata are checked in one), and retention's readers
 * (ArtifactRetention.observations, which reads the layout from the installation record) see every
 * shard. With one shard the partition is RET#{root} exactly. On both profiles.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Conflict } from '../../src/core/errors.ts';
import { observationPartitions, observationShardOf, retentionPk } from '../../src/core/keys.ts';
import { contentKey } from '../../src/core/object-keys.ts';
import { shardOf, shardSuffix } from '../../src/core/shard.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { publishChecks } from '../../src/retention/guard.ts';
import { contentRootId, observationKey } from '../../src/retention/model.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { type Layout, UNSHARDED } from '../../src/system/layout.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

after(() => stopDistributedServers());

const SHARDED: Layout = { ...UNSHARDED, index_shards: 8 };

const profiles: Array<{ name: string; open: (layout: Layout) => Promise<{ ctx: ServiceContext; close: () => Promise<void> }> }> = [
  {
    name: 'embedded (SQLite + directory)',
    open: async (layout) => {
      const ctx = await embeddedContext(undefined, { layout });
      return { ctx, close: () => ctx.items.close() };
    },
  },
  {
    name: 'distributed (DynamoDB Local + s3rver)',
    open: async (layout) => {
      const i = await distributedInstallation(undefined, { layout });
      return { ctx: i.ctx, close: () => i.close() };
    },
  },
];

describe('retention observation keys', () => {
  it('RET#{root} with one shard; RET#{root}#{s} by the object key with several, the same in the guard and the model', () => {
    const root = 'abc';
    const keys = Array.from({ length: 40 }, (_, i) => `artifacts/A${i}/v1/f`);
    for (const key of keys) {
      assert.deepEqual(observationKey(root, key, 1), { PK: retentionPk(root), SK: `OBS#${key}` });
      const pk = `RET#${root}${shardSuffix(shardOf(key.slice(0, key.lastIndexOf('/') + 1), 8), 8)}`;
      assert.equal(observationKey(root, key, 8).PK, pk);
      assert.equal(observationShardOf(key, 8), observationShardOf(key.replace(/f$/, 'metadata.json'), 8));
    }
    assert.deepEqual(observationPartitions(root, 1), [retentionPk(root)]);
    assert.equal(new Set(keys.map((k) => observationKey(root, k, 8).PK)).size > 4, true);
  });
});

for (const profile of profiles) {
  describe(`retention observation shards, ${profile.name}`, () => {
    for (const layout of [UNSHARDED, SHARDED]) {
      it(`index_shards ${layout.index_shards}: a publish of a quarantined key fails; retention reads the observation back`, async () => {
        const { ctx, close } = await profile.open(layout);
        try {
          await initInstallation(ctx);
          const { version } = await createArtifact(ctx, agent, { name: 'guarded', filename: 'f.sh', body: bytesOf('v1\n') });
          const root = contentRootId(ctx.content.location);
          const next = contentKey(version.artifact_id, 2, 'f.sh');
          const guard = publishChecks(ctx.content, [next], ctx.layout);
          assert.deepEqual(
            guard.map((op) => (op.op === 'check' ? op.key : undefined)),
            [observationKey(root, next, layout.index_shards)],
          );
          // Retention decided about the key meanwhile (an upload in flight): the commit must refuse.
          await ctx.items.put({
            ...observationKey(root, next, layout.index_shards),
            type: 'retention_observation',
            key: next,
            digest: 'sha256:00',
            size: 3,
            state: 'QUARANTINED',
            first_observed_at: '2026-01-01T00:00:00.000Z',
          });
          await assert.rejects(addVersion(ctx, agent, version.artifact_id, { filename: 'f.sh', body: bytesOf('v2\n') }), Conflict);
          // Read with the layout of the installation record (no layout given), and with the context's.
          for (const r of [
            new ArtifactRetention(ctx.items, ctx.content, { clock: ctx.clock }),
            new ArtifactRetention(ctx.items, ctx.content, { clock: ctx.clock, layout: ctx.layout }),
          ]) {
            const seen = await r.observations();
            assert.deepEqual([...seen.keys()], [next]);
            assert.equal(seen.get(next)?.PK, observationKey(root, next, layout.index_shards).PK);
          }
        } finally {
          await close();
        }
      });
    }
  });
}
