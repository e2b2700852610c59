/**
 * Write-sharded GSI1 keys (docs/data-model.md "Write-sharded index keys"), on both profiles (SQLite +
 * directory, DynamoDB Local + s3rver): the same workload on an unsharded installation and on one with
 * index_shards 8 gives the same listings — same items, same order, same pages — for versions by state,
 * artifacts by name, transitions / approvals / runs / provenance by day and compensations by state.
 * Every GSI1PK of a sharded kind written under 8 shards ends with a shard suffix, and with 1 shard none
 * does (the RFC-012 §9.1 values exactly). Artifact and run ids differ between the two installations
 * (random), so listings are compared after naming each artifact by its (unique) name; the clock moves
 * between operations so no two commits share a timestamp (DynamoDB leaves the order of equal index
 * sort keys unspecified).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { ManualClock } from '../../src/core/clock.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { createArtifact, listArtifacts } from '../../src/lifecycle/artifacts.ts';
import { compensate } from '../../src/lifecycle/compensation.ts';
import { finishExecution, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import { countVersionsByState, type IndexQuery, queryIndex } from '../../src/lifecycle/queries.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import type { Item } from '../../src/store/item-store.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { type Layout, UNSHARDED } from '../../src/system/layout.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { allItems } from '../helpers/items.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice, bob } from '../helpers/walk.ts';

after(() => stopDistributedServers());

const SHARDED: Layout = { ...UNSHARDED, index_shards: 8 };
const START = '2026-03-01T12:00:00.000Z';
type Ctx = ServiceContext & { clock: ManualClock };

const profiles: Array<{ name: string; open: (layout: Layout) => Promise<{ ctx: Ctx; close: () => Promise<void> }> }> = [
  {
    name: 'embedded (SQLite + directory)',
    open: async (layout) => {
      const ctx = await embeddedContext(START, { layout });
      return { ctx, close: () => ctx.items.close() };
    },
  },
  {
    name: 'distributed (DynamoDB Local + s3rver)',
    open: async (layout) => {
      const inst = await distributedInstallation(START, { layout });
      return { ctx: inst.ctx, close: () => inst.close() };
    },
  },
];

/** A deterministic workload over 12 artifacts (two share a name), one second between operations. */
async function workload(ctx: Ctx): Promise<void> {
  const tick = () => ctx.clock.advance(1000);
  const ids: string[] = [];
  for (let k = 0; k < 12; k++) {
    tick();
    const name = k === 5 ? 'art-4' : `art-${k}`;
    const { version } = await createArtifact(ctx, agent, { name, filename: 'f.sh', body: bytesOf(`echo ${k}\n`) });
    ids.push(version.artifact_id);
  }
  for (const [k, id] of ids.entries()) {
    if (k % 4 === 3) continue; // stays DRAFT
    tick();
    await propose(ctx, agent, id, 1);
    if (k % 4 === 2) continue; // stays PROPOSED
    tick();
    await decide(ctx, k % 2 ? alice : bob, id, 1, { decision: 'APPROVE', evidenceRef: `CR-${k}` });
    tick();
    const run = await startExecution(ctx, agent, id, 1);
    tick();
    await uploadOutput(ctx, agent, run.run_id, 'stdout.log', bytesOf(`run ${k}\n`));
    tick();
    await addProvenance(ctx, agent, id, { action: `build ${k}`, tool: 'make' });
    if (k === 4) continue; // stays EXECUTING
    tick();
    await finishExecution(ctx, agent, run.run_id, { status: k % 3 ? 'SUCCEEDED' : 'FAILED', exitCode: k % 3 ? 0 : 1 });
  }
  tick();
  // Day two: a compensation of a failed run (its COMP_STATE# entry) and more transitions.
  ctx.clock.advance(24 * 3600 * 1000);
  await compensate(ctx, agent, ids[0] as string, 1, { filename: 'undo.sh', body: bytesOf('undo\n') });
}

/** Every page of a listing, with artifact and run ids replaced by the artifact's name. */
async function pages(
  ctx: Ctx,
  list: (cursor: string | undefined) => Promise<{ items: Record<string, unknown>[]; cursor?: string }>,
): Promise<unknown[][]> {
  const names = await namesOf(ctx);
  const out: unknown[][] = [];
  let cursor: string | undefined;
  do {
    const page = await list(cursor);
    out.push(page.items.map((i) => normalise(i, names)));
    cursor = page.cursor;
  } while (cursor);
  return out;
}

async function namesOf(ctx: Ctx): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const i of await allItems(ctx.items)) {
    if (i.type === 'head') names.set(i.artifact_id as string, `${i.name as string}@${i.created_at as string}`);
    if (i.type === 'run_pointer') names.set(i.run_id as string, `run of ${i.artifact_id as string}`);
  }
  for (const [k, v] of names) if (v.startsWith('run of ')) names.set(k, `run of ${names.get(v.slice(7)) ?? '?'}`);
  return names;
}

/** The listing item with every id (artifact, run, compensation) replaced by its name; hashes dropped. */
function normalise(item: Record<string, unknown>, names: Map<string, string>): unknown {
  const ids = [...names.keys()];
  return JSON.parse(JSON.stringify(item), (key, value) => {
    if (['hash', 'prev_hash', 'policy', 'content_key', 'metadata_key', 'metadata_hash', 'key', 'audit_head_hash'].includes(key))
      return undefined;
    if (typeof value !== 'string') return value;
    let v = value;
    for (const id of ids) if (v.includes(id)) v = v.split(id).join(names.get(id) as string);
    return v;
  });
}

async function listings(ctx: Ctx): Promise<Record<string, unknown[][]>> {
  const out: Record<string, unknown[][]> = {};
  for (const limit of [2, 50]) {
    out[`all/${limit}`] = await pages(ctx, (cursor) => listArtifacts(ctx, { limit, cursor }));
    for (const state of ['DRAFT', 'PROPOSED', 'EXECUTING', 'EXECUTED', 'FAILED', 'COMPENSATING'])
      out[`state ${state}/${limit}`] = await pages(ctx, (cursor) => listArtifacts(ctx, { state, limit, cursor }));
    out[`name/${limit}`] = await pages(ctx, (cursor) => listArtifacts(ctx, { name: 'art-4', limit, cursor }));
    const queries: Array<[IndexQuery, string]> = [
      ['transitions', '2026-03-01'],
      ['transitions', '2026-03-02'],
      ['approvals', 'alice'],
      ['approvals', 'bob'],
      ['runs', '2026-03-01'],
      ['provenance', '2026-03-01'],
      ['compensations', 'DRAFT'],
    ];
    for (const [kind, key] of queries)
      out[`${kind} ${key}/${limit}`] = await pages(ctx, (cursor) => queryIndex(ctx, kind, key, { limit, cursor }));
  }
  return out;
}

const SHARDED_KINDS = /^(STATE|TRANS|RUN|PROV|COMP_STATE|APPROVER)#/;

for (const profile of profiles) {
  describe(`write-sharded index keys, ${profile.name}`, () => {
    it('8 index shards list exactly what one shard lists (items, order, pages); every sharded GSI1PK carries a suffix', async () => {
      const one = await profile.open(UNSHARDED);
      const eight = await profile.open(SHARDED);
      try {
        for (const i of [one, eight]) {
          await initInstallation(i.ctx);
          await workload(i.ctx);
        }
        const [a, b] = [await listings(one.ctx), await listings(eight.ctx)];
        for (const key of Object.keys(a)) assert.deepEqual(b[key], a[key], `listing ${key}`);
        // The listings are not trivially empty.
        assert.equal((a['transitions 2026-03-01/50'] ?? []).flat().length, 12 + 9 + 6 + 6 + 5);
        assert.equal((a['runs 2026-03-01/2'] ?? []).flat().length, 6);
        assert.equal((a['name/2'] ?? []).flat().length, 2);
        assert.deepEqual(await countVersionsByState(eight.ctx), await countVersionsByState(one.ctx));

        const gsi = async (ctx: Ctx) => (await allItems(ctx.items)).filter((i: Item) => SHARDED_KINDS.test(String(i.GSI1PK ?? '')));
        const unsharded = await gsi(one.ctx);
        const sharded = await gsi(eight.ctx);
        assert.ok(unsharded.length > 40 && sharded.length === unsharded.length);
        assert.deepEqual(
          unsharded.filter((i) => /#\d+$/.test(i.GSI1PK as string)).map((i) => i.GSI1PK),
          [],
        );
        assert.deepEqual(
          sharded.filter((i) => !/#[0-7]$/.test(i.GSI1PK as string)).map((i) => i.GSI1PK),
          [],
        );
        // More than one shard is used (12 artifacts over 8 shards).
        assert.ok(new Set(sharded.map((i) => (i.GSI1PK as string).slice(-1))).size > 2);
        // Index entries are off the items rewritten often: no HEAD and no execution item carries one,
        // but for the transparency log's pending flag on a HEAD (TLOGH#{s}: one constant entry while
        // the chain waits for a round, docs/design.md §10 "Sequencing").
        const all = await allItems(eight.ctx.items);
        assert.deepEqual(
          all.filter(
            (i) => (i.type === 'head' || i.type === 'execution') && i.GSI1PK !== undefined && !String(i.GSI1PK).startsWith('TLOGH#'),
          ),
          [],
        );
      } finally {
        await one.close();
        await eight.close();
      }
    });
  });
}
