/**
 * The search entries' backfill (system/migrations/search-entries.ts; migration installation 2 → 3 and
 * `alp search reindex`) on both engines (SQLite with 4 index shards, DynamoDB Local with 4): artifacts
 * whose entries are removed — what an installation from before search holds — are found by a search
 * without a state again once it ran; each entry is exactly the one the creating transaction wrote; a
 * pass interrupted after a page resumes from its mark and ends with the same entries; a second pass
 * writes nothing; two racing passes write each entry once; schema 2 is migrated on open.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { artifactNamePk, INSTALLATION_SK, SEARCH_SK, SYS_PK } from '../../src/core/keys.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { searchArtifacts } from '../../src/lifecycle/search.ts';
import type { Item } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { backfillSearchEntries, SEARCH_BACKFILL_KEY } from '../../src/system/migrations/search-entries.ts';
import { CURRENT_SCHEMA, checkSchema, readSchemaVersion } from '../../src/system/schema.ts';
import { alpJson } from '../helpers/cli.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

after(stopDistributedServers);

const LAYOUT = { index_shards: 4, telemetry_shards: 4, fence_shards: 4 };
const N = 14;
const KEPT = 2;

/** N artifacts; all but KEPT lose their search entry (as if created before search). Returns the entries as created. */
async function oldInstallation(ctx: ServiceContext): Promise<{ ids: string[]; entries: Map<string, Item> }> {
  await initInstallation(ctx);
  const ids: string[] = [];
  for (let i = 0; i < N; i++) {
    const labels = { team: i % 2 ? 'ops' : 'data', n: String(i) };
    const { head } = await createArtifact(ctx, agent, {
      name: `svc-${String(i).padStart(2, '0')}`,
      filename: 'a.txt',
      labels,
      body: bytesOf(`a${i}`),
    });
    ids.push(head.artifact_id);
  }
  const entries = new Map<string, Item>();
  for (const id of ids) {
    const key = { PK: artifactNamePk(id), SK: SEARCH_SK };
    const e = await ctx.items.get(key, { consistent: true });
    assert.ok(e, `entry of ${id}`);
    entries.set(id, e);
  }
  for (const id of ids.slice(KEPT)) await ctx.items.delete({ PK: artifactNamePk(id), SK: SEARCH_SK });
  await ctx.items.update({ PK: SYS_PK, SK: INSTALLATION_SK }, { set: { schema_version: 2 } });
  return { ids, entries };
}

/** Every artifact a search without a state finds (all pages). */
async function found(ctx: ServiceContext, labels: Record<string, string> = {}): Promise<string[]> {
  const out: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await searchArtifacts(ctx, { namePrefix: 'svc-', labels, limit: 5, ...(cursor ? { cursor } : {}) });
    out.push(...page.items.map((h) => h.artifact_id));
    cursor = page.cursor;
  } while (cursor);
  return out.sort();
}

async function entriesOf(ctx: ServiceContext, ids: string[]): Promise<Map<string, Item | undefined>> {
  const out = new Map<string, Item | undefined>();
  for (const id of ids) out.set(id, await ctx.items.get({ PK: artifactNamePk(id), SK: SEARCH_SK }, { consistent: true }));
  return out;
}

function suite(name: string, open: () => Promise<{ ctx: ServiceContext; close(): Promise<void> }>) {
  describe(`search entries backfill (${name})`, () => {
    test('an interrupted pass resumes; entries equal the created ones; a second pass writes nothing; schema 2 migrates', async () => {
      const f = await open();
      try {
        const { ctx } = f;
        const { ids, entries } = await oldInstallation(ctx);
        assert.deepEqual(await found(ctx), ids.slice(0, KEPT).sort(), 'before: only the artifacts with entries');

        // Crash after the second page (small pages, so the pass spans many).
        let pages = 0;
        await assert.rejects(
          backfillSearchEntries(ctx.items, {
            pageSize: 4,
            onPage: () => {
              if (++pages === 2) throw new Error('crash');
            },
          }),
          /crash/,
        );
        const mark = await ctx.items.get(SEARCH_BACKFILL_KEY, { consistent: true });
        assert.equal(mark?.state, 'running');
        assert.equal(mark?.pages, 2);
        assert.equal(typeof mark?.cursor, 'string');

        const resumed = await backfillSearchEntries(ctx.items, { pageSize: 4 });
        assert.equal(resumed.resumed, true);
        assert.ok(resumed.pass.scanned > resumed.scanned, 'the resumed run did not scan the first pages again');
        assert.equal(resumed.pass.written, N - KEPT, 'the pass wrote every missing entry once');
        assert.equal((await ctx.items.get(SEARCH_BACKFILL_KEY, { consistent: true }))?.state, 'done');

        assert.deepEqual(await found(ctx), [...ids].sort(), 'after: every artifact');
        assert.deepEqual(await found(ctx, { team: 'ops' }), ids.filter((_, i) => i % 2).sort());
        const after1 = await entriesOf(ctx, ids);
        for (const id of ids) assert.deepEqual(after1.get(id), entries.get(id), `the entry of ${id} is the one its creation wrote`);

        // Twice = the same: a new pass reads everything and writes nothing.
        const again = await backfillSearchEntries(ctx.items);
        assert.equal(again.resumed, false);
        assert.equal(again.written, 0);
        assert.equal(again.already, N);
        assert.deepEqual(await entriesOf(ctx, ids), after1);

        // Two racing passes (two nodes opening at once) write each missing entry once.
        for (const id of ids.slice(KEPT)) await ctx.items.delete({ PK: artifactNamePk(id), SK: SEARCH_SK });
        const [a, b] = await Promise.all([
          backfillSearchEntries(ctx.items, { pageSize: 3, restart: true }),
          backfillSearchEntries(ctx.items, { pageSize: 5, restart: true }),
        ]);
        assert.equal(a.written + b.written, N - KEPT);
        assert.deepEqual(await entriesOf(ctx, ids), after1);

        // The migration: an installation at schema 2 is backfilled on open and recorded at 3.
        for (const id of ids.slice(KEPT)) await ctx.items.delete({ PK: artifactNamePk(id), SK: SEARCH_SK });
        const status = await checkSchema(ctx.items);
        assert.deepEqual(status[0]?.migrated, ['installation-3-search-entries']);
        assert.equal(await readSchemaVersion(ctx.items, 'installation'), CURRENT_SCHEMA.installation);
        assert.deepEqual(await entriesOf(ctx, ids), after1);
        assert.deepEqual((await checkSchema(ctx.items))[0]?.migrated, []);
      } finally {
        await f.close();
      }
    });
  });
}

suite('sqlite, 4 index shards', async () => {
  const ctx = await embeddedContext(undefined, { layout: LAYOUT });
  return { ctx, close: async () => ctx.items.close() };
});

suite('dynamodb, 4 index shards', async () => {
  const inst = await distributedInstallation(undefined, { layout: LAYOUT });
  return { ctx: inst.ctx, close: () => inst.close() };
});

test('alp search reindex: the operator backfills, with progress; --json reports the counts; a search then finds every artifact', async () => {
  const ctx = await embeddedContext();
  const { ids } = await oldInstallation(ctx);
  // Recorded at schema 3 without the backfill: only the command writes the entries here.
  await ctx.items.update({ PK: SYS_PK, SK: INSTALLATION_SK }, { set: { schema_version: CURRENT_SCHEMA.installation } });
  await ctx.items.close();
  const data = ['--data', ctx.dir];
  const before = await alpJson<{ items: unknown[] }>(['search', '--name-prefix', 'svc-', ...data]);
  assert.equal(before.items.length, KEPT);
  const report = await alpJson<{ written: number; already: number; heads: number; resumed: boolean }>(['search', 'reindex', ...data]);
  assert.deepEqual(
    { written: report.written, already: report.already, heads: report.heads, resumed: report.resumed },
    { written: N - KEPT, already: KEPT, heads: N, resumed: false },
  );
  const afterwards = await alpJson<{ items: Array<{ artifact_id: string }> }>(['search', '--name-prefix', 'svc-', ...data]);
  assert.deepEqual(afterwards.items.map((h) => h.artifact_id).sort(), [...ids].sort());
  const again = await alpJson<{ written: number }>(['search', 'reindex', ...data]);
  assert.equal(again.written, 0);
  const items = new SqliteItemStore(ctx.dbPath);
  try {
    assert.equal((await items.get(SEARCH_BACKFILL_KEY))?.state, 'done');
  } finally {
    await items.close();
  }
});
