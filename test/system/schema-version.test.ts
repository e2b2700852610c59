/**
 * Schema versions (issue 15 item 7) on both engines: a fresh store and a current one open; a newer
 * installation record or telemetry queue refuses with a coded error; an older one runs the registered
 * migrations once, in order, idempotently (again after a crash between the migration and its record,
 * and with two nodes racing). The migrations here are injected, one step past CURRENT_SCHEMA (the real
 * installation 1 → 2 migration has its own test: test/system/migration-execution-keys.test.ts).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { AlpError } from '../../src/core/errors.ts';
import { INSTALLATION_SK, SYS_PK, TELQ_PK, TELQ_STATE_SK } from '../../src/core/keys.ts';
import { openInstallation } from '../../src/runtime/open.ts';
import { DynamoItemStore } from '../../src/store/dynamodb/dynamodb-item-store.ts';
import type { ItemStore } from '../../src/store/item-store.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { initInstallation } from '../../src/system/installation.ts';
import type { Migration } from '../../src/system/migrations.ts';
import { CURRENT_SCHEMA, checkSchema, readSchemaVersion, SchemaTooNew } from '../../src/system/schema.ts';
import { TelemetryQueue } from '../../src/telemetry/queue.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { sharedDynamoLocal } from '../helpers/dynamodb-local.ts';
import { tempDir } from '../helpers/tmp.ts';

after(stopDistributedServers);

const installationKey = { PK: SYS_PK, SK: INSTALLATION_SK };
const queueKey = { PK: TELQ_PK, SK: TELQ_STATE_SK };
const MARK = { PK: 'TEST#migration', SK: 'MARK' };

/** A test migration CURRENT → CURRENT + 1 of the installation: adds one item; counts its runs; idempotent by condition. */
function markMigration(runs: { n: number }): Migration {
  return {
    id: 'test-0002-mark',
    component: 'installation',
    from: CURRENT_SCHEMA.installation,
    run: async (items: ItemStore) => {
      runs.n++;
      const existing = await items.get(MARK, { consistent: true });
      if (existing) return;
      await items.put({ ...MARK, type: 'test_mark', value: 'migrated' }).catch(() => undefined);
    },
  };
}

const NEWER = { ...CURRENT_SCHEMA, installation: CURRENT_SCHEMA.installation + 1 };
const CUR = CURRENT_SCHEMA.installation;

function schemaSuite(name: string, open: () => Promise<{ ctx: ServiceContext; close(): Promise<void> }>) {
  describe(`schema versions (${name})`, () => {
    test('a fresh store and a current installation pass without migrating', async () => {
      const { ctx, close } = await open();
      try {
        const fresh = await checkSchema(ctx.items);
        assert.deepEqual(
          fresh.map((s) => [s.component, s.stored, s.migrated.length]),
          [
            ['installation', undefined, 0],
            ['telemetry_queue', undefined, 0],
          ],
        );
        await initInstallation(ctx);
        await new TelemetryQueue(ctx.items, undefined, { clock: ctx.clock }).open();
        const current = await checkSchema(ctx.items);
        assert.deepEqual(
          current.map((s) => [s.component, s.stored, s.current, s.migrated.length]),
          [
            ['installation', CUR, CUR, 0],
            ['telemetry_queue', 1, 1, 0],
          ],
        );
      } finally {
        await close();
      }
    });

    test('an installation record newer than this code refuses with SchemaTooNew (CONFLICT, exit 4)', async () => {
      const { ctx, close } = await open();
      try {
        await initInstallation(ctx);
        await ctx.items.update(installationKey, { set: { schema_version: 7 } });
        const err = await checkSchema(ctx.items).catch((e: unknown) => e);
        assert.ok(err instanceof SchemaTooNew, String(err));
        assert.equal(err.code, 'CONFLICT');
        assert.equal(err.exitCode, 4);
        assert.deepEqual(err.details, { reason: 'schema_too_new', component: 'installation', stored: 7, supported: CUR });
        assert.match(err.message, new RegExp(`version 7, newer than this ALP supports \\(${CUR}\\): upgrade ALP`));
      } finally {
        await close();
      }
    });

    test("a telemetry queue newer than this code refuses with SchemaTooNew naming the queue's schema", async () => {
      const { ctx, close } = await open();
      try {
        await new TelemetryQueue(ctx.items, undefined, { clock: ctx.clock }).open();
        await ctx.items.update(queueKey, { set: { schema: 2 } });
        await assert.rejects(checkSchema(ctx.items), (e: unknown) => {
          assert.ok(e instanceof SchemaTooNew);
          assert.equal(e.details?.component, 'telemetry_queue');
          assert.match(e.message, /telemetry queue's schema is version 2/);
          return true;
        });
      } finally {
        await close();
      }
    });

    test('an older installation runs the registered migration once and records the new version', async () => {
      const { ctx, close } = await open();
      try {
        await initInstallation(ctx);
        const runs = { n: 0 };
        const migrations = [markMigration(runs)];
        const first = await checkSchema(ctx.items, { migrations, current: NEWER });
        assert.deepEqual(first[0]?.migrated, ['test-0002-mark']);
        assert.equal(await readSchemaVersion(ctx.items, 'installation'), CUR + 1);
        assert.equal((await ctx.items.get(MARK, { consistent: true }))?.value, 'migrated');
        const again = await checkSchema(ctx.items, { migrations, current: NEWER });
        assert.deepEqual(again[0]?.migrated, []);
        assert.equal(runs.n, 1);
        // The code of the current schema now refuses the migrated installation.
        await assert.rejects(checkSchema(ctx.items), SchemaTooNew);
      } finally {
        await close();
      }
    });

    test('a migration that ran but was not recorded (a crash) runs again with the same result', async () => {
      const { ctx, close } = await open();
      try {
        await initInstallation(ctx);
        const runs = { n: 0 };
        const m = markMigration(runs);
        await m.run(ctx.items); // the crashed attempt: its effect is there, the version is still CUR
        assert.equal(await readSchemaVersion(ctx.items, 'installation'), CUR);
        await checkSchema(ctx.items, { migrations: [m], current: NEWER });
        assert.equal(runs.n, 2);
        assert.equal(await readSchemaVersion(ctx.items, 'installation'), CUR + 1);
        const marks = await ctx.items.query({ pk: MARK.PK });
        assert.equal(marks.items.length, 1);
      } finally {
        await close();
      }
    });

    test('two nodes migrating at once both end at the new version', async () => {
      const { ctx, close } = await open();
      try {
        await initInstallation(ctx);
        const runs = { n: 0 };
        const migrations = [markMigration(runs)];
        const results = await Promise.all([
          checkSchema(ctx.items, { migrations, current: NEWER }),
          checkSchema(ctx.items, { migrations, current: NEWER }),
        ]);
        assert.equal(results.length, 2);
        assert.equal(await readSchemaVersion(ctx.items, 'installation'), CUR + 1);
        assert.equal((await ctx.items.query({ pk: MARK.PK })).items.length, 1);
      } finally {
        await close();
      }
    });

    test('an older installation without a registered migration fails with a coded internal error', async () => {
      const { ctx, close } = await open();
      try {
        await initInstallation(ctx);
        await assert.rejects(checkSchema(ctx.items, { migrations: [], current: NEWER }), (e: unknown) => {
          assert.ok(e instanceof AlpError);
          assert.equal(e.code, 'INTERNAL');
          assert.equal(e.details?.reason, 'no_migration');
          return true;
        });
        assert.equal(await readSchemaVersion(ctx.items, 'installation'), CUR);
      } finally {
        await close();
      }
    });
  });
}

schemaSuite('sqlite', async () => {
  const ctx = await embeddedContext();
  return { ctx, close: async () => ctx.items.close() };
});

schemaSuite('dynamodb', async () => {
  const inst = await distributedInstallation();
  return { ctx: inst.ctx, close: () => inst.close() };
});

test('opening an installation written by a newer ALP refuses before any service runs (runtime/open.ts)', async () => {
  const ctx = await embeddedContext();
  await initInstallation(ctx);
  await ctx.items.update(installationKey, { set: { schema_version: CUR + 1 } });
  await ctx.items.close();
  const config = {
    metadata: { engine: 'sqlite' as const, path: ctx.dbPath },
    content: { engine: 'fs' as const, root: ctx.contentRoot },
  };
  await assert.rejects(openInstallation(config, ctx.clock), SchemaTooNew);
});

test('the CLI refuses an installation written by a newer ALP with exit 4 and one coded line, and writes nothing', async () => {
  const dir = tempDir('alp-schema-cli');
  const data = path.join(dir, 'd');
  await alpJson(['init', '--data', data]);
  const db = new Database(path.join(data, 'alp.db'));
  try {
    const row = db.prepare('SELECT attrs FROM items WHERE PK = ? AND SK = ?').get(SYS_PK, INSTALLATION_SK) as { attrs: string };
    db.prepare('UPDATE items SET attrs = ? WHERE PK = ? AND SK = ?').run(
      JSON.stringify({ ...(JSON.parse(row.attrs) as object), schema_version: CUR + 1 }),
      SYS_PK,
      INSTALLATION_SK,
    );
    const before = (db.prepare('SELECT COUNT(*) AS n FROM items').get() as { n: number }).n;
    const file = path.join(dir, 'x.sh');
    fs.writeFileSync(file, 'echo x\n');
    for (const args of [['artifact', 'create', '--name', 'n', '--file', file], ['artifact', 'list'], ['init']]) {
      const r = await runAlp([...args, '--data', data]);
      assert.equal(r.code, 4, `${args.join(' ')}: ${r.stderr}`);
      assert.match(
        r.stderr,
        new RegExp(
          `^alp: CONFLICT: the installation's schema is version ${CUR + 1}, newer than this ALP supports \\(${CUR}\\): upgrade ALP`,
          'm',
        ),
      );
    }
    assert.equal((db.prepare('SELECT COUNT(*) AS n FROM items').get() as { n: number }).n, before);
  } finally {
    db.close();
  }
});

test('a DynamoDB table not created yet passes the opening check as unreadable (init creates it) and fails the strict one', async () => {
  const l = await sharedDynamoLocal();
  const items = await DynamoItemStore.open(
    { engine: 'dynamodb', table: l.tableName('unprepared'), region: l.region, endpoint: l.endpoint },
    { credentials: l.credentials, baseDelayMs: 5, maxDelayMs: 20, maxAttempts: 2 },
  );
  try {
    const skipped = await checkSchema(items, { unreadable: 'skip' });
    assert.deepEqual(
      skipped.map((s) => [s.component, s.unreadable]),
      [
        ['installation', true],
        ['telemetry_queue', true],
      ],
    );
    await assert.rejects(checkSchema(items), (e: unknown) => e instanceof AlpError && !(e instanceof SchemaTooNew));
  } finally {
    await items.close();
  }
});
