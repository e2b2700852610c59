/**
 * The installation's write layout (issue 16): shard counts fixed at creation, recorded in the
 * installation record, read by every node at open; the embedded default and every installation
 * created before layouts are unsharded (RFC-012 §9.1 keys exactly).
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import fc from 'fast-check';
import { parseContentUrl, parseMetadataUrl } from '../../src/core/config.ts';
import { AlpError } from '../../src/core/errors.ts';
import { INSTALLATION_SK, SYS_PK } from '../../src/core/keys.ts';
import { allShards, shardOf, shardSuffix } from '../../src/core/shard.ts';
import { createContext } from '../../src/runtime/context.ts';
import { openInstallation } from '../../src/runtime/open.ts';
import { startInstallation } from '../../src/runtime/startup.ts';
import { initInstallation, readInstallation } from '../../src/system/installation.ts';
import { DISTRIBUTED_DEFAULT, defaultLayout, parseLayout, UNSHARDED } from '../../src/system/layout.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';

after(stopDistributedServers);

const installationKey = { PK: SYS_PK, SK: INSTALLATION_SK };

describe('shards', () => {
  test('shardOf is deterministic, in range, and 0 with one shard', () => {
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 1, max: 1024 }), (key, n) => {
        const s = shardOf(key, n);
        assert.ok(Number.isInteger(s) && s >= 0 && s < n);
        assert.equal(shardOf(key, n), s);
        if (n === 1) assert.equal(s, 0);
      }),
    );
  });

  test('shardOf spreads keys evenly (every one of 16 shards within 25 % of its share over 16,000 ids)', () => {
    const counts = new Array(16).fill(0) as number[];
    for (let i = 0; i < 16_000; i++) counts[shardOf(`01J${i.toString(36).padStart(23, '0')}`, 16)]! += 1;
    for (const c of counts) assert.ok(c > 750 && c < 1250, `shard count ${c} of 16,000`);
  });

  test('the suffix is empty with one shard and zero-padded to the widest shard number otherwise', () => {
    assert.equal(shardSuffix(0, 1), '');
    assert.equal(shardSuffix(7, 64), '#07');
    assert.equal(shardSuffix(255, 256), '#255');
    assert.equal(shardSuffix(3, 10), '#3');
    assert.throws(() => shardSuffix(64, 64), RangeError);
    assert.deepEqual(allShards(3), [0, 1, 2]);
  });
});

describe('layout', () => {
  test('ALP_LAYOUT overrides the engine default; a bad part is a usage error naming it', () => {
    assert.deepEqual(defaultLayout('sqlite', {}), UNSHARDED);
    assert.deepEqual(defaultLayout('dynamodb', {}), DISTRIBUTED_DEFAULT);
    assert.deepEqual(defaultLayout('dynamodb', { ALP_LAYOUT: 'index=8' }), { ...DISTRIBUTED_DEFAULT, index_shards: 8 });
    assert.deepEqual(parseLayout('index=2,telemetry=4,fence=8'), { index_shards: 2, telemetry_shards: 4, fence_shards: 8 });
    assert.throws(
      () => parseLayout('shards=4'),
      (e: unknown) => e instanceof AlpError && e.code === 'INVALID' && /shards/.test(e.message),
    );
    assert.throws(
      () => parseLayout('index=0'),
      (e: unknown) => e instanceof AlpError && e.code === 'INVALID',
    );
    assert.throws(
      () => parseLayout('fence=2000'),
      (e: unknown) => e instanceof AlpError && e.code === 'INVALID',
    );
  });

  test('embedded: a new installation is unsharded and records it; one written before layouts opens unsharded', async () => {
    const ctx = await embeddedContext();
    const config = { metadata: { engine: 'sqlite' as const, path: ctx.dbPath }, content: { engine: 'fs' as const, root: ctx.contentRoot } };
    const opened = await openInstallation(config, ctx.clock);
    try {
      assert.deepEqual(opened.ctx.layout, UNSHARDED);
      await startInstallation(opened.ctx, config);
      assert.deepEqual((await readInstallation(opened.ctx))?.layout, UNSHARDED);
      const record = await opened.ctx.items.get(installationKey, { consistent: true });
      const { layout: _dropped, ...older } = (record ?? installationKey) as Record<string, unknown>;
      await opened.ctx.items.put({ ...installationKey, ...older });
    } finally {
      await opened.close();
    }
    const again = await openInstallation(config, ctx.clock);
    try {
      assert.deepEqual(again.ctx.layout, UNSHARDED);
    } finally {
      await again.close();
    }
  });

  test('distributed: a new installation gets the distributed default (or ALP_LAYOUT) and every later node opens with it', async () => {
    const inst = await distributedInstallation();
    const config = { metadata: parseMetadataUrl(inst.metadataUrl), content: parseContentUrl(inst.contentUrl) };
    const saved = { ...process.env };
    Object.assign(process.env, inst.env, { ALP_LAYOUT: 'index=4,telemetry=2' });
    try {
      const first = await openInstallation(config, inst.ctx.clock);
      assert.deepEqual(first.ctx.layout, { ...DISTRIBUTED_DEFAULT, index_shards: 4, telemetry_shards: 2 });
      await initInstallation(first.ctx);
      await first.close();
      delete process.env.ALP_LAYOUT;
      const second = await openInstallation(config, inst.ctx.clock);
      assert.deepEqual(
        second.ctx.layout,
        { ...DISTRIBUTED_DEFAULT, index_shards: 4, telemetry_shards: 2 },
        'the stored layout, not the default',
      );
      await second.close();
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
      await inst.close();
    }
  });

  test('a node whose layout differs from the installation record is refused at init (CONFLICT, layout_mismatch)', async () => {
    const ctx = await embeddedContext();
    await initInstallation(ctx);
    const other = createContext({ items: ctx.items, content: ctx.content, clock: ctx.clock, layout: { ...UNSHARDED, fence_shards: 4 } });
    await assert.rejects(
      initInstallation(other),
      (e: unknown) => e instanceof AlpError && e.code === 'CONFLICT' && (e.details as { reason?: string }).reason === 'layout_mismatch',
    );
  });
});
