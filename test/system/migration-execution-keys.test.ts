/**
 * The real installation 1 → 2 migration (issue 16 item 9) from a pre-change installation, on both
 * engines (SQLite + directory, DynamoDB Local + s3rver): execution output and finish records move out
 * of the `EXEC#` sort-key prefix, carrying `moved_from_sk`, with their audit hashes untouched.
 *
 * The schema-1 fixture is written by the current code and then put back into the old form through the
 * ItemStore: the two record kinds under their schema-1 keys (EXEC#{run}#OUTPUT#{name},
 * EXEC#{run}#FINISH), every chain re-hashed and re-linked as the old code hashed it (the hash covers
 * the SK), the HEAD's head hash set to match, `schema_version` 1. One artifact's history is then
 * packed into segments (immutable objects holding the old keys), and one packed entry is also left hot
 * (a compaction that crashed between its segment and the removal), as an old installation may hold.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { compactHistory } from '../../src/audit/compaction.ts';
import { history, loadChain } from '../../src/audit/history.ts';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { TransactionConflict } from '../../src/core/errors.ts';
import { artifactPk } from '../../src/core/keys.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { executionView, listExecutions, readExecution } from '../../src/lifecycle/executions.ts';
import type { Item, ItemStore } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { moveExecutionRecords } from '../../src/system/migrations/execution-keys.ts';
import { CURRENT_SCHEMA, checkSchema, readSchemaVersion } from '../../src/system/schema.ts';
import { alpJson } from '../helpers/cli.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { allItems } from '../helpers/items.ts';
import { legacySk, MOVED, toSchema1 } from '../helpers/schema1.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, approveAndRun, walkEveryState } from '../helpers/walk.ts';

after(stopDistributedServers);

const SCRIPT = path.resolve(import.meta.dirname, '../../scripts/verify-audit.py');
const DAY = 24 * 60 * 60 * 1000;

/** What the readers show: listings, `alp exec show` (executionView of readExecution) and `alp history`. */
async function readings(ctx: ServiceContext, ids: string[]) {
  const out: Record<string, unknown> = {};
  for (const id of ids) {
    const runs = await listExecutions(ctx, id);
    out[id] = {
      list: runs.map(executionView),
      show: await Promise.all(runs.map(async (r) => executionView(await readExecution(ctx, r.run_id)))),
      history: await history(ctx, id),
      verified: (await verifyArtifactAudit(ctx, id)).findings,
    };
  }
  return out;
}

async function legacyItems(items: ItemStore) {
  return (await allItems(items)).filter((i) => MOVED.includes(i.type as string) && i.SK.startsWith('EXEC#'));
}

function pyVerify(source: string, env: Record<string, string> = {}) {
  const r = spawnSync('python3', [SCRIPT, source], { encoding: 'utf8', env: { ...process.env, ...env } });
  assert.equal(r.stderr, '', r.stderr);
  return { code: r.status, report: JSON.parse(r.stdout) as { entries: number; findings: unknown[] } };
}

interface Fixture {
  ctx: ServiceContext & { clock: { advance(ms: number): void } };
  /** Where the Python verifier reads the metadata (a SQLite path or a dynamodb:// URL). */
  source: string;
  env?: Record<string, string>;
  close(): Promise<void>;
}

/** A schema-1 installation: walked, runs on a second artifact, back to the old keys, one artifact packed. */
async function schema1Installation(f: Fixture): Promise<string[]> {
  const { ctx } = f;
  await initInstallation(ctx);
  const walked = await walkEveryState(ctx);
  const { version } = await createArtifact(ctx, agent, { name: 'runs', filename: 'r.sh', body: bytesOf('echo r\n') });
  await approveAndRun(ctx, version.artifact_id, 1, 'SUCCEEDED');
  await toSchema1(ctx);
  const ids = [walked.id, ...walked.compensations, version.artifact_id];
  // An old installation may have packed history: segments hold the schema-1 keys for good.
  ctx.clock.advance(100 * DAY);
  const report = await compactHistory(ctx, { before: new Date(ctx.clock.now().getTime() - 95 * DAY), artifactId: walked.id });
  assert.ok(report.entries_packed > 0);
  // ... and a packed output record still hot too (a compaction crashed before removing it).
  const chain = await loadChain(ctx, walked.id);
  const packedOutput = chain.segments.flatMap((s) => s.entries).find((e) => e.type === 'execution_output');
  assert.ok(packedOutput, 'a packed execution_output');
  await ctx.items.put(packedOutput);
  return ids;
}

function migrationSuite(name: string, open: () => Promise<Fixture>) {
  describe(`the installation 1 → 2 migration from a pre-change installation (${name})`, () => {
    test('moves every record out of EXEC#, keeps every hash; chains verify (ALP and Python) and readers agree', async () => {
      const f = await open();
      try {
        const ids = await schema1Installation(f);
        const before = await readings(f.ctx, ids);
        for (const id of ids) assert.deepEqual((before[id] as { verified: unknown[] }).verified, [], `schema-1 ${id} verifies`);
        assert.deepEqual(pyVerify(f.source, f.env).report.findings, []);
        const legacy = await legacyItems(f.ctx.items);
        assert.ok(legacy.length >= 8, `${legacy.length} schema-1 records`);

        const status = await checkSchema(f.ctx.items);
        assert.deepEqual(status[0]?.migrated, ['installation-2-execution-record-keys', 'installation-3-search-entries']);
        assert.equal(await readSchemaVersion(f.ctx.items, 'installation'), CURRENT_SCHEMA.installation);
        assert.deepEqual(await legacyItems(f.ctx.items), []);
        const moved = (await allItems(f.ctx.items)).filter((i) => MOVED.includes(i.type as string));
        assert.equal(moved.length, legacy.length);
        for (const m of moved) {
          assert.match(m.SK, /^(OUTPUT#[^#]+#[^#]+|FINISH#[^#]+)$/);
          assert.equal(m.moved_from_sk, legacySk(m));
          assert.equal(m.hash, legacy.find((l) => l.PK === m.PK && l.SK === m.moved_from_sk)?.hash);
        }
        // begins_with(SK, 'EXEC#') is one item per run (§9.1).
        for (const id of ids) {
          const exec = (await f.ctx.items.query({ pk: artifactPk(id), sk: { beginsWith: 'EXEC#' }, consistent: true })).items;
          assert.deepEqual(
            exec.map((i) => i.type),
            exec.map(() => 'execution'),
          );
        }
        assert.deepEqual(await readings(f.ctx, ids), before);
        const py = pyVerify(f.source, f.env);
        assert.deepEqual(py.report.findings, []);
        assert.equal(py.code, 0);

        // A moved entry whose key is changed again no longer verifies (the hash still covers the key).
        const m = moved.find((i) => i.type === 'execution_finish') as Item;
        await f.ctx.items.put({ ...m, SK: `FINISH#${'0'.repeat(26)}` });
        await f.ctx.items.delete({ PK: m.PK, SK: m.SK });
        const id = (m.PK as string).slice(4);
        assert.match(JSON.stringify((await verifyArtifactAudit(f.ctx, id)).findings), /hash does not match/);
        assert.equal(pyVerify(f.source, f.env).code, 1);
      } finally {
        await f.close();
      }
    });

    test('a crash after k moves re-runs to completion; two migrators at once corrupt nothing', async () => {
      const f = await open();
      try {
        const ids = await schema1Installation(f);
        const before = await readings(f.ctx, ids);
        const total = (await legacyItems(f.ctx.items)).length;
        const crash = new Error('injected crash');
        await assert.rejects(
          moveExecutionRecords(f.ctx.items, {
            pageSize: 7,
            afterMove: (n) => {
              if (n === 3) throw crash;
            },
          }),
          (e) => e === crash,
        );
        assert.equal((await legacyItems(f.ctx.items)).length, total - 3);
        assert.equal(await readSchemaVersion(f.ctx.items, 'installation'), 1);
        assert.deepEqual(await readings(f.ctx, ids), before, 'a half-migrated installation reads the same');
        // Two nodes open it at once: both finish, every item moved exactly once.
        const [a, b] = await Promise.all([
          moveExecutionRecords(f.ctx.items, { pageSize: 5 }),
          moveExecutionRecords(f.ctx.items, { pageSize: 3 }),
        ]);
        assert.equal(a.moved + b.moved, total - 3);
        const both = await Promise.all([checkSchema(f.ctx.items), checkSchema(f.ctx.items)]);
        assert.equal(both.length, 2);
        assert.equal(await readSchemaVersion(f.ctx.items, 'installation'), CURRENT_SCHEMA.installation);
        assert.deepEqual(await legacyItems(f.ctx.items), []);
        assert.equal((await allItems(f.ctx.items)).filter((i) => MOVED.includes(i.type as string)).length, total);
        assert.deepEqual(await readings(f.ctx, ids), before);
        assert.deepEqual(pyVerify(f.source, f.env).report.findings, []);
        const again = await moveExecutionRecords(f.ctx.items);
        assert.equal(again.moved, 0);
      } finally {
        await f.close();
      }
    });

    test('a move cancelled by a concurrent transaction (modelled: DynamoDB Local serialises them) is retried', async () => {
      const f = await open();
      try {
        const ids = await schema1Installation(f);
        const before = await readings(f.ctx, ids);
        const total = (await legacyItems(f.ctx.items)).length;
        // The model: every other transaction is cancelled before it applies anything, as DynamoDB
        // cancels one of two concurrent transactions on an item (TransactionCanceled: TransactionConflict).
        let calls = 0;
        const conflicting = new Proxy(f.ctx.items, {
          get(target, prop, receiver) {
            if (prop === 'transactWrite')
              return async (...args: Parameters<ItemStore['transactWrite']>) => {
                if (calls++ % 2 === 0) throw new TransactionConflict('modelled: a concurrent transaction on the same item');
                return target.transactWrite(...args);
              };
            const v = Reflect.get(target, prop, receiver);
            return typeof v === 'function' ? v.bind(target) : v;
          },
        });
        const report = await moveExecutionRecords(conflicting);
        assert.equal(report.moved, total);
        assert.equal(calls, 2 * total);
        assert.deepEqual(await legacyItems(f.ctx.items), []);
        assert.deepEqual(await readings(f.ctx, ids), before);
      } finally {
        await f.close();
      }
    });
  });
}

migrationSuite('sqlite', async () => {
  const ctx = await embeddedContext();
  return { ctx, source: ctx.dbPath, close: async () => ctx.items.close() };
});

migrationSuite('dynamodb', async () => {
  const inst = await distributedInstallation();
  return { ctx: inst.ctx, source: inst.metadataUrl, env: inst.env, close: () => inst.close() };
});

test('the CLI opens a schema-1 installation, migrates it, and `alp exec show`, `alp history`, `alp audit verify` read the same', async () => {
  const ctx = await embeddedContext();
  await initInstallation(ctx);
  const walked = await walkEveryState(ctx);
  const ids = [walked.id, ...walked.compensations];
  await toSchema1(ctx);
  const runs = (await Promise.all(ids.map((id) => listExecutions(ctx, id)))).flat();
  assert.ok(runs.length >= 3);
  // What the schema-1 installation reads through the services the CLI calls (JSON as printed).
  const shown = JSON.parse(JSON.stringify(runs.map(executionView)));
  const histories = JSON.parse(JSON.stringify(await Promise.all(ids.map((id) => history(ctx, id)))));
  await ctx.items.close();
  const data = ['--data', ctx.dir];
  // The first command opens (and migrates) it; every later one finds schema 2.
  const cliShown = [];
  for (const r of runs) cliShown.push(await alpJson(['exec', 'show', r.run_id, ...data]));
  assert.deepEqual(cliShown, shown);
  const cliHistories = [];
  for (const id of ids) cliHistories.push(await alpJson<{ entries: unknown[] }>(['history', id, ...data]));
  assert.deepEqual(
    cliHistories.map((h) => h.entries),
    histories,
  );
  assert.equal((await alpJson<{ ok: boolean }>(['audit', 'verify', ...data])).ok, true);
  const items = new SqliteItemStore(ctx.dbPath);
  try {
    assert.equal(await readSchemaVersion(items, 'installation'), CURRENT_SCHEMA.installation);
    assert.equal((await allItems(items)).filter((i) => MOVED.includes(i.type as string) && i.SK.startsWith('EXEC#')).length, 0);
  } finally {
    await items.close();
  }
});
