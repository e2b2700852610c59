/**
 * Idempotent creates (issue 16 item 7) at the service level on both profiles: a retry after a lost
 * response answers the first result and writes nothing; a key reused for a different request is
 * refused with a stable reason; keys are per principal; concurrent requests with one key create once;
 * without a key nothing changes; an expired key is a new key.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { ManualClock } from '../../src/core/clock.ts';
import { type AlpError, InvalidInput, StorageFailure } from '../../src/core/errors.ts';
import { addVersionOnce, createArtifactOnce, IDEMPOTENCY_KEY_REUSED, IDEMPOTENCY_TTL_MS } from '../../src/lifecycle/idempotency.ts';
import { listVersions } from '../../src/lifecycle/versions.ts';
import type { TransactOp } from '../../src/store/item-store.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

after(stopDistributedServers);

type Ctx = ServiceContext & { clock: ManualClock };

const engines: { name: string; open: () => Promise<{ ctx: Ctx; close(): Promise<void> }> }[] = [
  {
    name: 'SQLite + directory',
    open: async () => {
      const ctx = await embeddedContext();
      return { ctx, close: async () => ctx.items.close() };
    },
  },
  { name: 'DynamoDB Local + s3rver', open: () => distributedInstallation() },
];

const other = { id: 'agent-8', kind: 'agent' } as const;
const create = (body = 'one', name = 'idem') => ({ name, filename: 'f.sh', body: bytesOf(body) });

async function headCount(ctx: ServiceContext): Promise<number> {
  let n = 0;
  let cursor: string | undefined;
  do {
    const page = await ctx.items.scan(cursor ? { cursor } : {});
    n += page.items.filter((i) => i.type === 'head').length;
    cursor = page.cursor;
  } while (cursor);
  return n;
}

/** The next audit transaction commits, then its answer is lost (as a timeout or a 503 would lose it). */
function loseNextResponse(ctx: ServiceContext): void {
  const store = ctx.items;
  const original = store.transactWrite.bind(store);
  let armed = true;
  store.transactWrite = async (ops: TransactOp[]) => {
    const r = await original(ops);
    if (armed && ops.some((o) => o.op === 'put' && String(o.item.PK).startsWith('IDEM#'))) {
      armed = false;
      throw new StorageFailure('the response was lost');
    }
    return r;
  };
}

const reused = (e: unknown) => (e as AlpError).code === 'CONFLICT' && (e as AlpError).details?.reason === IDEMPOTENCY_KEY_REUSED;

for (const engine of engines) {
  describe(`idempotent creates on ${engine.name}`, () => {
    it('a create retried after a lost response answers the first artifact; one artifact exists', async () => {
      const inst = await engine.open();
      try {
        const { ctx } = inst;
        loseNextResponse(ctx);
        await assert.rejects(createArtifactOnce(ctx, agent, create(), 'k-1'), StorageFailure);
        assert.equal(await headCount(ctx), 1, 'the first commit landed');
        const retry = await createArtifactOnce(ctx, agent, create(), 'k-1');
        assert.equal(retry.replayed, true);
        assert.equal(retry.version.version, 1);
        const again = await createArtifactOnce(ctx, agent, create(), 'k-1');
        assert.equal(again.version.artifact_id, retry.version.artifact_id);
        assert.equal(await headCount(ctx), 1, 'no second artifact');
        // Without a key, behaviour as today: every create is a new artifact.
        await createArtifactOnce(ctx, agent, create());
        await createArtifactOnce(ctx, agent, create());
        assert.equal(await headCount(ctx), 3);
      } finally {
        await inst.close();
      }
    });

    it('a new version retried answers the first version number; no second version, no gap', async () => {
      const inst = await engine.open();
      try {
        const { ctx } = inst;
        const first = await createArtifactOnce(ctx, agent, create());
        const id = first.version.artifact_id;
        loseNextResponse(ctx);
        const input = () => ({ filename: 'f.sh', body: bytesOf('two') });
        await assert.rejects(addVersionOnce(ctx, agent, id, input(), 'v-2'), StorageFailure);
        const retry = await addVersionOnce(ctx, agent, id, input(), 'v-2');
        assert.deepEqual([retry.replayed, retry.version.version], [true, 2]);
        assert.deepEqual(
          (await listVersions(ctx.items, id)).map((v) => v.version),
          [1, 2],
        );
        const next = await addVersionOnce(ctx, agent, id, input(), 'v-3');
        assert.equal(next.version.version, 3, 'the replay reserved no number');
        await assert.rejects(addVersionOnce(ctx, agent, id, { filename: 'f.sh', body: bytesOf('changed') }, 'v-2'), reused);
        await assert.rejects(addVersionOnce(ctx, agent, id, { filename: 'g.sh', body: bytesOf('two') }, 'v-2'), reused);
      } finally {
        await inst.close();
      }
    });

    it('a key reused with a different body or parameters is refused; keys of different principals are independent', async () => {
      const inst = await engine.open();
      try {
        const { ctx } = inst;
        const a = await createArtifactOnce(ctx, agent, create('one', 'n1'), 'shared');
        await assert.rejects(createArtifactOnce(ctx, agent, create('two', 'n1'), 'shared'), reused, 'different body');
        await assert.rejects(createArtifactOnce(ctx, agent, create('one', 'n2'), 'shared'), reused, 'different name');
        await assert.rejects(createArtifactOnce(ctx, agent, { ...create('one', 'n1'), quorum: 2 }, 'shared'), reused, 'different quorum');
        await assert.rejects(addVersionOnce(ctx, agent, a.version.artifact_id, create('one'), 'shared'), reused, 'another operation');
        const b = await createArtifactOnce(ctx, other, create('one', 'n1'), 'shared');
        assert.equal(b.replayed, false, 'another principal’s key of the same name is its own');
        assert.notEqual(b.version.artifact_id, a.version.artifact_id);
        assert.equal(await headCount(ctx), 2);
        await assert.rejects(createArtifactOnce(ctx, agent, create(), 'has space'), InvalidInput);
        await assert.rejects(createArtifactOnce(ctx, agent, create(), ''), InvalidInput);
      } finally {
        await inst.close();
      }
    });

    it('concurrent requests with one key create once and all answer that artifact (and version)', async () => {
      const inst = await engine.open();
      try {
        const { ctx } = inst;
        const results = await Promise.all([1, 2, 3, 4].map(() => createArtifactOnce(ctx, agent, create('same'), 'race')));
        assert.equal(new Set(results.map((r) => r.version.artifact_id)).size, 1, 'one artifact id');
        assert.equal(results.filter((r) => !r.replayed).length, 1, 'one creation, the rest replays');
        assert.equal(await headCount(ctx), 1);
        const id = results[0]?.version.artifact_id as string;
        const versions = await Promise.all(
          [1, 2, 3].map(() => addVersionOnce(ctx, agent, id, { filename: 'f.sh', body: bytesOf('next') }, 'race-v')),
        );
        assert.equal(new Set(versions.map((r) => r.version.version)).size, 1, 'one version number for all');
        assert.equal((await listVersions(ctx.items, id)).length, 2, 'one new version (the losers’ numbers are gaps)');
      } finally {
        await inst.close();
      }
    });

    it('a key past its 24 h expiry is a new key', async () => {
      const inst = await engine.open();
      try {
        const { ctx } = inst;
        const a = await createArtifactOnce(ctx, agent, create(), 'old');
        ctx.clock.advance(IDEMPOTENCY_TTL_MS - 1);
        assert.equal((await createArtifactOnce(ctx, agent, create(), 'old')).version.artifact_id, a.version.artifact_id);
        ctx.clock.advance(1);
        const b = await createArtifactOnce(ctx, agent, create('other body'), 'old');
        assert.equal(b.replayed, false);
        assert.notEqual(b.version.artifact_id, a.version.artifact_id);
        assert.equal((await createArtifactOnce(ctx, agent, create('other body'), 'old')).version.artifact_id, b.version.artifact_id);
      } finally {
        await inst.close();
      }
    });
  });
}
