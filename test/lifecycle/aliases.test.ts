/**
 * Aliases and search (issue 20 item 6) on both profiles: humans move aliases to APPROVED or EXECUTED
 * versions (agents and services FORBIDDEN), `@name` resolves wherever a version is read, an alias
 * keeps naming its version after it moves on (and after archive), every change is a chained entry
 * that audit verify replays; search by name prefix, labels and state pages through everything once.
 * Alias names and random move sequences are fast-check properties (SQLite).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { readHead } from '../../src/audit/chain.ts';
import { history } from '../../src/audit/history.ts';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { AlpError } from '../../src/core/errors.ts';
import {
  ALIAS_NAME_PATTERN,
  listAliases,
  removeAlias,
  resolveVersionRef,
  setAlias,
  validateAliasName,
} from '../../src/lifecycle/aliases.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { addVersion, createArtifact, openVersionContent } from '../../src/lifecycle/artifacts.ts';
import { finishExecution, startExecution } from '../../src/lifecycle/executions.ts';
import type { Principal } from '../../src/lifecycle/model.ts';
import { type SearchHit, type SearchInput, searchArtifacts } from '../../src/lifecycle/search.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice, approveAndRun, bob } from '../helpers/walk.ts';

after(stopDistributedServers);

const service: Principal = { id: 'exporter', kind: 'service' };
const layout = { index_shards: 4, telemetry_shards: 1, fence_shards: 1 };

const engines: { name: string; open: () => Promise<{ ctx: ServiceContext; close(): Promise<void> }> }[] = [
  {
    name: 'SQLite + directory',
    open: async () => {
      const ctx = await embeddedContext();
      return { ctx, close: async () => ctx.items.close() };
    },
  },
  {
    name: 'SQLite, 4 index shards',
    open: async () => {
      const ctx = await embeddedContext(undefined, { layout });
      return { ctx, close: async () => ctx.items.close() };
    },
  },
  { name: 'DynamoDB Local + s3rver, 4 index shards', open: () => distributedInstallation(undefined, { layout }) },
];

async function rejects(p: Promise<unknown>, code: string, detail?: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof AlpError, String(e));
    assert.equal(e.code, code, e.message);
    if (detail) assert.match(e.message, detail);
    return true;
  });
}

async function textOf(ctx: ServiceContext, id: string, ref: string | number): Promise<string> {
  const { stream } = await openVersionContent(ctx, id, ref);
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.from(c as Uint8Array));
  return Buffer.concat(chunks).toString('utf8');
}

async function approved(ctx: ServiceContext, name: string, labels: Record<string, string> = {}): Promise<string> {
  const { version } = await createArtifact(ctx, agent, { name, labels, filename: 'run.sh', body: bytesOf(`${name} v1\n`) });
  await propose(ctx, agent, version.artifact_id, 1);
  await decide(ctx, alice, version.artifact_id, 1, { decision: 'APPROVE', evidenceRef: 'CR-1' });
  return version.artifact_id;
}

async function searchAll(ctx: ServiceContext, input: SearchInput): Promise<SearchHit[]> {
  const out: SearchHit[] = [];
  let cursor: string | undefined;
  do {
    const page = await searchArtifacts(ctx, { ...input, cursor });
    out.push(...page.items);
    cursor = page.cursor;
  } while (cursor);
  return out;
}

for (const engine of engines) {
  describe(`aliases and search: ${engine.name}`, () => {
    it('humans set and move @prod to APPROVED or EXECUTED versions; it resolves, survives later moves and archive, and the chain replays it', async () => {
      const { ctx, close } = await engine.open();
      try {
        const { version } = await createArtifact(ctx, agent, { name: 'deploy', filename: 'run.sh', body: bytesOf('v1\n') });
        const id = version.artifact_id;
        await rejects(setAlias(ctx, alice, id, 'prod', 1), 'CONFLICT', /APPROVED or EXECUTED version; v1 is DRAFT/);
        await propose(ctx, agent, id, 1);
        await decide(ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'CR-1' });
        await rejects(setAlias(ctx, agent, id, 'prod', 1), 'FORBIDDEN');
        await rejects(setAlias(ctx, service, id, 'prod', 1), 'FORBIDDEN');
        const set = await setAlias(ctx, alice, id, 'prod', 1, 'first release');
        assert.equal(set.changed, true);
        assert.equal(set.alias?.state, 'APPROVED');
        assert.equal(await resolveVersionRef(ctx, id, '@prod'), 1);
        assert.equal(await textOf(ctx, id, '@prod'), 'v1\n');
        assert.equal((await setAlias(ctx, bob, id, 'prod', 1)).changed, false, 'the same target again records nothing');

        const run = await startExecution(ctx, agent, id, 1);
        await finishExecution(ctx, agent, run.run_id, { status: 'SUCCEEDED', exitCode: 0 });
        await addVersion(ctx, agent, id, { filename: 'run.sh', body: bytesOf('v2\n') });
        await rejects(setAlias(ctx, alice, id, 'staging', 2), 'CONFLICT', /v2 is DRAFT/);
        await approveAndRun(ctx, id, 2, 'SUCCEEDED', false);
        await setAlias(ctx, alice, id, 'staging', '@prod');
        await setAlias(ctx, bob, id, 'prod', 2, 'v2 is out');
        assert.equal(await resolveVersionRef(ctx, id, '@prod'), 2);
        assert.equal(await resolveVersionRef(ctx, id, '@staging'), 1, 'set from another alias: its version then, not a link');
        await setAlias(ctx, alice, id, 'old', 1);
        await rejects(removeAlias(ctx, agent, id, 'old'), 'FORBIDDEN');
        assert.equal((await removeAlias(ctx, alice, id, 'old', 'cleanup')).removed.version, 1);
        await rejects(resolveVersionRef(ctx, id, '@old'), 'NOT_FOUND', /no alias @old/);
        await rejects(removeAlias(ctx, alice, id, 'old'), 'NOT_FOUND');
        await rejects(resolveVersionRef(ctx, id, '@Prod'), 'INVALID', /did you mean @prod/);

        const entries = (await history(ctx, id)).filter((e) => e.type === 'alias');
        assert.deepEqual(
          entries.map((e) => [e.alias, e.action, e.version, e.previous_version, (e.actor as Principal).id]),
          [
            ['prod', 'set', 1, null, 'alice'],
            ['staging', 'set', 1, null, 'alice'],
            ['prod', 'moved', 2, 1, 'bob'],
            ['old', 'set', 1, null, 'alice'],
            ['old', 'removed', 1, 1, 'alice'],
          ],
        );
        assert.deepEqual((await verifyArtifactAudit(ctx, id)).findings, []);

        await archiveArtifact(ctx, alice, id);
        const views = await listAliases(ctx, id);
        assert.deepEqual(
          views.map((a) => [a.name, a.version, a.state]),
          [
            ['prod', 2, 'ARCHIVED'],
            ['staging', 1, 'ARCHIVED'],
          ],
        );
        assert.equal(await textOf(ctx, id, '@prod'), 'v2\n', 'an archived alias target is still read (its archive copy)');
        await rejects(setAlias(ctx, alice, id, 'prod', 1), 'CONFLICT', /archived/);
        assert.deepEqual((await verifyArtifactAudit(ctx, id)).findings, []);
      } finally {
        await close();
      }
    });

    it('search pages by name prefix, labels (all must match) and state, each hit once', async () => {
      const { ctx, close } = await engine.open();
      try {
        const ids: Record<string, string> = {};
        for (let i = 0; i < 7; i++) {
          const name = `svc-${i}`;
          const labels = { team: i % 2 === 0 ? 'ops' : 'dev', tier: i < 3 ? 'gold' : 'bronze' };
          const { version } = await createArtifact(ctx, agent, { name, labels, filename: 'a.sh', body: bytesOf(name) });
          ids[name] = version.artifact_id;
          if (i < 4) await propose(ctx, agent, version.artifact_id, 1);
        }
        await createArtifact(ctx, agent, { name: 'other', labels: { team: 'ops' }, filename: 'a.sh', body: bytesOf('o') });
        const names = (hits: SearchHit[]) => hits.map((h) => h.name).sort();

        assert.deepEqual(names(await searchAll(ctx, { namePrefix: 'svc-', limit: 2 })), Object.keys(ids).sort());
        const byPrefix = await searchArtifacts(ctx, { namePrefix: 'svc-' });
        assert.deepEqual(
          byPrefix.items.map((h) => h.name),
          Object.keys(ids).sort(),
          'one page, in name order',
        );
        assert.deepEqual(names(await searchAll(ctx, { labels: { team: 'ops' }, limit: 1 })), ['other', 'svc-0', 'svc-2', 'svc-4', 'svc-6']);
        assert.deepEqual(names(await searchAll(ctx, { labels: { team: 'ops', tier: 'gold' }, limit: 3 })), ['svc-0', 'svc-2']);
        const proposed = await searchAll(ctx, { state: 'proposed', namePrefix: 'svc-', labels: { team: 'dev' }, limit: 1 });
        assert.deepEqual(proposed.map((h) => [h.name, h.version, h.state]).sort(), [
          ['svc-1', 1, 'PROPOSED'],
          ['svc-3', 1, 'PROPOSED'],
        ]);
        assert.deepEqual(names(await searchAll(ctx, { state: 'DRAFT', limit: 2 })), ['other', 'svc-4', 'svc-5', 'svc-6']);
        assert.deepEqual((await searchArtifacts(ctx, { namePrefix: 'nothing' })).items, []);
        const first = await searchArtifacts(ctx, { namePrefix: 'svc-', limit: 1 });
        assert.ok(first.cursor);
        await rejects(searchArtifacts(ctx, { namePrefix: 'sv', cursor: first.cursor }), 'INVALID', /cursor/);
        await rejects(searchArtifacts(ctx, { state: 'NOPE' }), 'INVALID');
      } finally {
        await close();
      }
    });
  });
}

describe('alias properties (fast-check, SQLite)', () => {
  it('a name is accepted exactly when it matches the documented pattern (with or without @)', () => {
    const pattern = new RegExp(ALIAS_NAME_PATTERN);
    const names = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.stringMatching(/^[a-zA-Z0-9_-]{0,34}$/),
      fc.constantFrom('prod', 'Prod', 'a', '-a', '1a', ''),
    );
    fc.assert(
      fc.property(names, fc.boolean(), (name, at) => {
        const given = at ? `@${name}` : name;
        let accepted: string | undefined;
        try {
          accepted = validateAliasName(given);
        } catch (e) {
          assert.ok(e instanceof AlpError && e.code === 'INVALID');
        }
        // One leading @ is dropped (the generated name may itself start with one: "@a" given bare is "a").
        const bare = given.startsWith('@') ? given.slice(1) : given;
        assert.equal(accepted !== undefined, pattern.test(bare), JSON.stringify(given));
        if (accepted !== undefined) assert.equal(accepted, bare);
      }),
      { numRuns: 500 },
    );
  });

  it('after any sequence of sets, moves and removals, the HEAD, resolution and audit verify agree with a model', async () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('set' as const),
        name: fc.constantFrom('prod', 'staging', 'qa'),
        version: fc.integer({ min: 1, max: 3 }),
      }),
      fc.record({ kind: fc.constant('rm' as const), name: fc.constantFrom('prod', 'staging', 'qa') }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 8 }), async (ops) => {
        const ctx = await embeddedContext();
        try {
          const id = await approved(ctx, 'prop');
          await addVersion(ctx, agent, id, { filename: 'run.sh', body: bytesOf('v2\n') }); // DRAFT: never a target
          await addVersion(ctx, agent, id, { filename: 'run.sh', body: bytesOf('v3\n') });
          const model = new Map<string, number>();
          for (const o of ops) {
            if (o.kind === 'set') {
              const p = setAlias(ctx, alice, id, o.name, o.version);
              if (o.version === 1) {
                await p;
                model.set(o.name, 1);
              } else await rejects(p, 'CONFLICT');
            } else if (model.has(o.name)) {
              await removeAlias(ctx, bob, id, o.name);
              model.delete(o.name);
            } else await rejects(removeAlias(ctx, bob, id, o.name), 'NOT_FOUND');
          }
          const head = await readHead(ctx, id);
          assert.deepEqual(Object.keys(head.aliases ?? {}).sort(), [...model.keys()].sort());
          for (const [name, v] of model) assert.equal(await resolveVersionRef(ctx, id, `@${name}`), v);
          assert.deepEqual((await verifyArtifactAudit(ctx, id)).findings, []);
        } finally {
          await ctx.items.close();
        }
      }),
      { numRuns: 12 },
    );
  });
});
