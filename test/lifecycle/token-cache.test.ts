/**
 * Token lookups cached per node (issue 16 item 8): two nodes (two store instances, two contexts) over
 * one installation on both profiles, one injected clock. A token revoked on one node is refused there
 * at once and keeps working on the other for at most the bound (ALP_TOKEN_CACHE_MS), then is refused;
 * negative answers are not cached; the cache is a bounded LRU.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { Unauthenticated } from '../../src/core/errors.ts';
import { createToken, resolveToken, revokeToken } from '../../src/lifecycle/principals.ts';
import { configureTokenCache, DEFAULT_TOKEN_CACHE_MS, TokenCache, tokenCacheOptionsFromEnv } from '../../src/lifecycle/token-cache.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import { DynamoItemStore } from '../../src/store/dynamodb/dynamodb-item-store.ts';
import type { ItemStore } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, distributedServers, stopDistributedServers } from '../helpers/distributed.ts';
import { alice } from '../helpers/walk.ts';

after(stopDistributedServers);

const BOUND_MS = 5_000;
const cached = { cached: true };

interface TwoNodes {
  a: ServiceContext;
  b: ServiceContext;
  clock: ManualClock;
  close(): Promise<void>;
}

/** Counts the strong TOKEN# reads a node's store answers. */
function countReads(items: ItemStore): { n: number } {
  const count = { n: 0 };
  const original = items.get.bind(items);
  items.get = (key, opts) => {
    if (key.PK.startsWith('TOKEN#')) count.n++;
    return original(key, opts);
  };
  return count;
}

const engines: { name: string; open: () => Promise<TwoNodes> }[] = [
  {
    name: 'SQLite + directory',
    open: async () => {
      const a = await embeddedContext();
      const itemsB = new SqliteItemStore(a.dbPath);
      const b = createContext({ items: itemsB, content: a.content, clock: a.clock });
      return {
        a,
        b,
        clock: a.clock,
        close: async () => {
          await itemsB.close();
          await a.items.close();
        },
      };
    },
  },
  {
    name: 'DynamoDB Local + s3rver',
    open: async () => {
      const inst = await distributedInstallation();
      const { dynamo, s3 } = await distributedServers();
      const itemsB = await DynamoItemStore.open(
        { engine: 'dynamodb', table: inst.table, region: dynamo.region, endpoint: dynamo.endpoint },
        { credentials: s3.credentials, baseDelayMs: 10, maxDelayMs: 200 },
      );
      const b = createContext({ items: itemsB, content: inst.ctx.content, clock: inst.ctx.clock });
      return {
        a: inst.ctx,
        b,
        clock: inst.ctx.clock,
        close: async () => {
          await itemsB.close();
          await inst.close();
        },
      };
    },
  },
];

for (const engine of engines) {
  describe(`token lookups cached per node on ${engine.name}`, () => {
    it('a token revoked on node A is refused on A at once and on node B within the bound', async () => {
      const nodes = await engine.open();
      try {
        const { a, b, clock } = nodes;
        configureTokenCache(a.items, { ttlMs: BOUND_MS });
        configureTokenCache(b.items, { ttlMs: BOUND_MS });
        const readsB = countReads(b.items);
        const { token } = await createToken(a, { principal: 'agent-9', kind: 'agent' }, alice);
        assert.deepEqual(await resolveToken(b, token, cached), { id: 'agent-9', kind: 'agent' }, 'a token minted on A works on B at once');
        assert.deepEqual(await resolveToken(a, token, cached), { id: 'agent-9', kind: 'agent' });
        await resolveToken(b, token, cached);
        assert.equal(readsB.n, 1, 'B read the token item once, then answered from its cache');
        clock.advance(1_000);
        await revokeToken(a, token);
        await assert.rejects(resolveToken(a, token, cached), Unauthenticated, 'refused on the revoking node at once');
        // B read the token at t0; it may still answer from that read until t0 + bound, never later.
        clock.advance(BOUND_MS - 1_000 - 1);
        assert.deepEqual(await resolveToken(b, token, cached), { id: 'agent-9', kind: 'agent' }, 'within the bound B may still accept it');
        clock.advance(1);
        await assert.rejects(resolveToken(b, token, cached), Unauthenticated, 'past the bound B refuses it');
        assert.equal(readsB.n, 2);
        clock.advance(60_000);
        await assert.rejects(resolveToken(b, token, cached), Unauthenticated, 'and keeps refusing it: refusals are read, never cached');
        assert.equal(readsB.n, 3);
      } finally {
        await nodes.close();
      }
    });

    it('unknown tokens are not cached; a cache of 0 ms reads every time', async () => {
      const nodes = await engine.open();
      try {
        const { a, b } = nodes;
        configureTokenCache(b.items, { ttlMs: 0 });
        const readsB = countReads(b.items);
        await assert.rejects(resolveToken(b, 'alp_unknown', cached), Unauthenticated);
        await assert.rejects(resolveToken(b, 'alp_unknown', cached), Unauthenticated);
        assert.equal(readsB.n, 2, 'each unknown token is read again');
        const { token } = await createToken(a, { principal: 'svc-1', kind: 'service' }, alice);
        await resolveToken(b, token, cached);
        await resolveToken(b, token, cached);
        assert.equal(readsB.n, 4, 'with the cache off every lookup reads');
      } finally {
        await nodes.close();
      }
    });
  });
}

describe('the token cache', () => {
  it('is a bounded LRU on the injected clock; the default bound is 5 s and the environment sets it', () => {
    const clock = new ManualClock('2026-03-01T12:00:00.000Z');
    const cache = new TokenCache({ ttlMs: 1_000, maxEntries: 3 });
    const p = (id: string) => ({ id, kind: 'agent' as const });
    for (const h of ['h1', 'h2', 'h3']) cache.set(h, p(h), clock.now().getTime());
    assert.deepEqual(cache.get('h1', clock), p('h1'), 'h1 used: h2 is now the least recently used');
    cache.set('h4', p('h4'), clock.now().getTime());
    assert.equal(cache.size, 3);
    assert.equal(cache.get('h2', clock), undefined, 'the least recently used entry went first');
    assert.deepEqual(cache.get('h3', clock), p('h3'));
    clock.advance(1_000);
    assert.equal(cache.get('h1', clock), undefined, 'an entry as old as the bound is stale');
    const late = cache.generation();
    cache.invalidate('h9');
    cache.set('h5', p('h5'), clock.now().getTime(), late);
    assert.equal(cache.get('h5', clock), undefined, 'a read issued before an invalidation is not cached');
    cache.set('h6', p('h6'), clock.now().getTime());
    clock.advance(-10);
    assert.equal(cache.get('h6', clock), undefined, 'a clock that went back counts as stale');
    assert.equal(tokenCacheOptionsFromEnv({}).ttlMs, DEFAULT_TOKEN_CACHE_MS);
    assert.equal(DEFAULT_TOKEN_CACHE_MS, 5_000);
    assert.deepEqual(tokenCacheOptionsFromEnv({ ALP_TOKEN_CACHE_MS: '250', ALP_TOKEN_CACHE_MAX: '7' }), { ttlMs: 250, maxEntries: 7 });
    assert.throws(() => tokenCacheOptionsFromEnv({ ALP_TOKEN_CACHE_MS: '-1' }), /ALP_TOKEN_CACHE_MS must be a whole number of ms ≥ 0/);
  });
});
