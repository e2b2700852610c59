/** History compaction on SQLite and on DynamoDB Local (fs content for both), plus the CLI. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { freshDynamoTable, stopSharedDynamoLocal } from '../helpers/dynamodb-local.ts';
import { tempDir } from '../helpers/tmp.ts';
import { compactionSuite } from './compaction-suite.ts';

compactionSuite({
  name: 'sqlite',
  open: async () => {
    const dir = tempDir('alp-compact');
    const contentRoot = path.join(dir, 'content');
    return { items: new SqliteItemStore(path.join(dir, 'alp.db')), content: await FsContentStore.open(contentRoot), contentRoot };
  },
});

after(stopSharedDynamoLocal);

compactionSuite({
  name: 'dynamodb',
  open: async () => {
    const items = await freshDynamoTable('compact');
    const contentRoot = path.join(tempDir('alp-compact-ddb'), 'content');
    return { items, content: await FsContentStore.open(contentRoot), contentRoot };
  },
});

describe('alp history compact', () => {
  it('packs through the CLI; `alp history ID`, `alp history show ID` and `alp audit verify` read packed history', async () => {
    const dir = tempDir('alp-compact-cli');
    const data = path.join(dir, 'd');
    const file = path.join(dir, 'x.sh');
    fs.writeFileSync(file, 'echo x\n');
    const at = (iso: string) => ({ env: { ALP_NOW: iso } });
    await alpJson(['init', '--data', data], at('2026-01-01T00:00:00.000Z'));
    const created = await alpJson(['artifact', 'create', '--name', 'old', '--file', file, '--data', data], at('2026-01-01T00:00:00.000Z'));
    const id = created.artifact_id as string;
    await alpJson(['artifact', 'propose', id, '--data', data], at('2026-01-01T01:00:00.000Z'));
    const before = await alpJson(['history', id, '--data', data], at('2026-06-01T00:00:00.000Z'));
    const refused = await runAlp(['history', 'compact', '--before', '2026-05-01', '--data', data], at('2026-06-01T00:00:00.000Z'));
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /^alp: INVALID: history stays hot for 90 days/m);
    const dry = await alpJson(
      ['history', 'compact', '--before', '2026-02-01', '--dry-run', '--data', data],
      at('2026-06-01T00:00:00.000Z'),
    );
    assert.deepEqual([dry.entries_packed, (dry.segments as unknown[]).length], [2, 0]);
    const report = await alpJson(['history', 'compact', '--before', '2026-02-01', '--data', data], at('2026-06-01T00:00:00.000Z'));
    assert.deepEqual([report.entries_packed, report.items_removed, (report.segments as unknown[]).length], [2, 2, 1]);
    assert.deepEqual(await alpJson(['history', id, '--data', data]), before);
    assert.deepEqual(await alpJson(['history', 'show', id, '--data', data]), before);
    const verify = await alpJson(['audit', 'verify', '--data', data]);
    assert.deepEqual([verify.ok, verify.entries], [true, 2]);
    const objects = await alpJson(['verify', id, '--data', data]);
    assert.equal(objects.ok, 3, 'content, metadata and the segment re-hashed');
    const usage = await runAlp(['history', '--data', data]);
    assert.equal(usage.code, 2);
  });
});
