/**
 * Issue 16, item 1: the conformance-level contention test. A mixed workload over many artifacts (each
 * 2 versions × the full lifecycle, plus an agent's listings, the token looked up on every request) on
 * both engines with a sharded layout, every call recorded by the ContentionStore model
 * (test/helpers/contention-store.ts). DynamoDB Local serialises transactions and cannot show a
 * conflict or a hot partition, so the property is asserted on the recorded key traces: no item or base
 * partition written (or condition-checked) by operations on different artifacts unless its key carries
 * a shard suffix of the layout, and at most c/N of the operations of a kind on one sharded key, GSI1
 * partition key or strongly read key (test/helpers/contention-analysis.ts states c and why). The
 * bearer token, which every request looks up through the node's token cache, is held to the cache's
 * own rule instead: at most ⌊clock span ÷ TTL⌋ + 1 strong reads over the run (rule (c)); which
 * operation kinds happen to miss depends on how the concurrent walkers interleave (it once put 18 of 40
 * list-transitions reads on the agent's token under heavy load, over the c/N bound of 15).
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { APPROVAL_POLICY_PK } from '../../src/core/keys.ts';
import { policyCacheOf } from '../../src/lifecycle/policy-cache.ts';
import { createToken, localOperator, resolveToken } from '../../src/lifecycle/principals.ts';
import { configureTokenCache, tokenCacheOf } from '../../src/lifecycle/token-cache.ts';
import {
  type CachedReads,
  cachedReadBound,
  cachedReadOffenders,
  DEFAULT_C,
  describe as describeOffender,
  readOffenders,
  writeOffenders,
} from '../helpers/contention-analysis.ts';
import { ContentionStore } from '../helpers/contention-store.ts';
import { contentionInstallation, type Engine, runWorkload, SHARDED_8 } from '../helpers/contention-workload.ts';
import { embeddedContext } from '../helpers/context.ts';
import { stopDistributedServers } from '../helpers/distributed.ts';

after(stopDistributedServers);

const ARTIFACTS = 40;

/** P(X ≥ k) for X ~ Binomial(n, p). */
function binomialTail(n: number, p: number, k: number): number {
  let sum = 0;
  let term = (1 - p) ** n;
  for (let i = 0; i <= n; i++) {
    if (i >= k) sum += term;
    term *= ((n - i) / (i + 1)) * (p / (1 - p));
  }
  return sum;
}

test('c = 3 over N = 8 shards: a uniform hash of 40 operations of a kind exceeds the bound with probability ~1e-5 per key', () => {
  const n = ARTIFACTS;
  const bound = (DEFAULT_C * n) / SHARDED_8.index_shards;
  const p = binomialTail(n, 1 / SHARDED_8.index_shards, Math.floor(bound) + 1);
  assert.ok(p < 2e-5, `P(Bin(${n}, 1/8) > ${bound}) = ${p}`);
  assert.ok(bound < n, 'an unsharded key touched by every operation of its kind is over the bound');
});

for (const engine of ['sqlite', 'dynamodb'] as Engine[]) {
  describe(`contention model on ${engine} (layout index=8, telemetry=8, fence=8)`, () => {
    test(`${ARTIFACTS} artifacts × 2 versions × the full lifecycle: no shared hot item, GSI1 keys spread`, {
      timeout: 600_000,
    }, async () => {
      const inst = await contentionInstallation(engine, SHARDED_8);
      try {
        const result = await runWorkload(inst, { artifacts: ARTIFACTS, concurrency: engine === 'sqlite' ? 4 : 8 });
        const traces = inst.store.traces;
        assert.equal(result.versions, 2 * ARTIFACTS);
        // The model saw the workload: every audit operation made a transaction, GSI1 entries were written.
        const kinds = new Set(traces.map((t) => t.kind));
        for (const k of ['create', 'version', 'propose', 'approve', 'exec-start', 'upload', 'finish', 'provenance'])
          assert.ok(kinds.has(k), k);
        assert.ok(
          traces.filter((t) => t.kind === 'propose').every((t) => (t.calls.transactWrite ?? 0) >= 1),
          'propose transacts',
        );
        assert.ok(
          traces.some((t) => t.accesses.some((a) => a.table === 'GSI1' && a.mode === 'write')),
          'GSI1 writes recorded',
        );
        // Both rules are evaluated before asserting, so one run names every offending key.
        const tokenRule: CachedReads = {
          pkPrefix: 'TOKEN#',
          ttlMs: tokenCacheOf(inst.ctx.items).options.ttlMs,
          spanMs: result.seconds * 1000,
        };
        assert.ok(
          tokenRule.ttlMs > 0 && cachedReadBound(tokenRule) < result.requests / 4,
          'the cache rule is far below a read per request',
        );
        // The approval policy, read by every decision and execution start, is cached per node the same way.
        const policyRule: CachedReads = {
          pkPrefix: APPROVAL_POLICY_PK,
          ttlMs: policyCacheOf(inst.ctx.items).ttlMs,
          spanMs: result.seconds * 1000,
        };
        const decisions = traces.filter((t) => t.kind === 'approve' || t.kind === 'exec-start').length;
        assert.ok(
          policyRule.ttlMs > 0 && cachedReadBound(policyRule) < decisions / 2,
          `the policy cache rule (${cachedReadBound(policyRule)} reads) is far below a read per decision (${decisions})`,
        );
        const writes = writeOffenders(traces, SHARDED_8).map(describeOffender);
        const reads = readOffenders(traces, SHARDED_8, DEFAULT_C, [tokenRule, policyRule]).map(describeOffender);
        assert.deepEqual(
          { writes, reads },
          { writes: [], reads: [] },
          `contention on ${engine}:\n  writes:\n    ${writes.join('\n    ')}\n  strong reads:\n    ${reads.join('\n    ')}`,
        );
      } finally {
        await inst.close();
      }
    });
  });
}

describe('the token cache rule of the contention model (rule (c))', () => {
  test('concurrent lookups of one token read it at most once per TTL of clock time; with the cache off the rule fails', async () => {
    const base = await embeddedContext();
    const store = new ContentionStore(base.items);
    const ctx = { ...base, items: store, clock: new ManualClock('2026-03-02T08:00:00.000Z') };
    try {
      const { token } = await createToken(ctx, { principal: 'walker', kind: 'agent' }, localOperator());
      const run = async (ttlMs: number) => {
        configureTokenCache(store, { ttlMs });
        const before = store.traces.length;
        const started = ctx.clock.now().getTime();
        // 8 walkers × 60 requests, 100 ms of clock each, all in flight together.
        await Promise.all(
          Array.from({ length: 8 }, (_, w) =>
            (async () => {
              for (let i = 0; i < 60; i++)
                await store.operation(`req-${i % 3}`, `artifact-${w}`, async () => {
                  ctx.clock.advance(100);
                  await resolveToken(ctx, token, { cached: true });
                });
            })(),
          ),
        );
        const traces = store.traces.slice(before);
        const rule = { pkPrefix: 'TOKEN#', ttlMs: Math.max(ttlMs, 1_000), spanMs: ctx.clock.now().getTime() - started };
        return { traces, rule };
      };
      const cachedRun = await run(1_000);
      assert.deepEqual(cachedReadOffenders(cachedRun.traces, cachedRun.rule).map(describeOffender), [], 'single flight keeps the bound');
      const reads = cachedRun.traces.flatMap((t) => t.accesses).filter((a) => a.op === 'get' && a.pk.startsWith('TOKEN#')).length;
      assert.ok(reads >= 1 && reads <= cachedReadBound(cachedRun.rule), `${reads} reads`);
      const uncached = await run(0);
      assert.equal(
        cachedReadOffenders(uncached.traces, uncached.rule).length,
        1,
        'a read per request is over the bound: the rule can fail',
      );
    } finally {
      await base.content.close();
      await base.items.close();
    }
  });
});
