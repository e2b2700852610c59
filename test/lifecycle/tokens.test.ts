/**
 * Token lifecycle (issue 19 B8) on both profiles (SQLite + directory, DynamoDB Local + s3rver): list
 * (from the token index, never a secret or hash), revoke, rotate, expiry on the injected clock (the
 * node's cache never answers past it), the default agent lifetime, "last used" at most once per hour,
 * concurrent misses sharing one read, and the hash-chained token log — plus a fast-check property
 * comparing random create/revoke/rotate/advance/resolve sequences with a simple model.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { readTokenLog, verifyTokenLog } from '../../src/audit/token-log.ts';
import { DAY_MS, type ManualClock } from '../../src/core/clock.ts';
import { Conflict, Forbidden, InvalidInput, MaintenanceInProgress, NotFound, Unauthenticated } from '../../src/core/errors.ts';
import { TOKEN_INDEX_MARK_SK, TOKEN_SK, TOKENS_PK, tokenLogSk, tokenPk } from '../../src/core/keys.ts';
import type { Principal } from '../../src/lifecycle/model.ts';
import { createToken, resolveToken } from '../../src/lifecycle/principals.ts';
import { configureTokenCache } from '../../src/lifecycle/token-cache.ts';
import { agentTokenLifetime, lifetimeFor, parseLifetime, tokenHash } from '../../src/lifecycle/token-records.ts';
import { listTokens, revokeTokenRef, rotateToken } from '../../src/lifecycle/tokens.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import type { ItemStore } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { acquireMaintenance, releaseMaintenance } from '../../src/system/fence.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { alice } from '../helpers/walk.ts';

after(stopDistributedServers);

const cached = { cached: true };
const agentBot: Principal = { id: 'bot', kind: 'agent' };

interface Profile {
  ctx: ServiceContext & { clock: ManualClock };
  /** A second node over the same table (its own store, so its own token cache). */
  other: ServiceContext;
  close(): Promise<void>;
}

const profiles: { name: string; open: () => Promise<Profile> }[] = [
  {
    name: 'SQLite + directory',
    open: async () => {
      const ctx = await embeddedContext();
      const otherItems = new SqliteItemStore(ctx.dbPath);
      return {
        ctx,
        other: createContext({ items: otherItems, content: ctx.content, clock: ctx.clock }),
        close: async () => {
          await otherItems.close();
          await ctx.items.close();
          await ctx.content.close();
        },
      };
    },
  },
  {
    name: 'DynamoDB Local + s3rver',
    open: async () => {
      const inst = await distributedInstallation();
      return { ctx: inst.ctx, other: inst.ctx, close: () => inst.close() };
    },
  },
];

async function readTokenLogAll(ctx: ServiceContext) {
  const out = [];
  for await (const e of readTokenLog(ctx)) out.push(e);
  return out;
}

/** Counts the strong TOKEN# reads a store answers. */
function countTokenReads(items: ItemStore): { n: number } {
  const count = { n: 0 };
  const original = items.get.bind(items);
  items.get = (key, opts) => {
    if (key.PK.startsWith('TOKEN#')) count.n++;
    return original(key, opts);
  };
  return count;
}

for (const profile of profiles) {
  describe(`token lifecycle on ${profile.name}`, () => {
    it('lists every token from the index with its state and never its secret or hash; revoke and rotate refuse the old token at once', async () => {
      const p = await profile.open();
      const { ctx } = p;
      try {
        const human = await createToken(ctx, { principal: 'carol', kind: 'human', label: 'laptop' }, alice);
        assert.equal(human.expires_at, undefined, 'human tokens do not expire unless told');
        ctx.clock.advance(10);
        const agent = await createToken(ctx, { principal: 'bot', kind: 'agent', label: 'ci' }, alice);
        assert.equal(agent.expires_at, new Date(ctx.clock.now().getTime() + 90 * DAY_MS).toISOString(), 'agent default: 90 days');
        ctx.clock.advance(10);
        const svc = await createToken(ctx, { principal: 'dash', kind: 'service', expiresInMs: 12 * 3_600_000 }, alice);
        assert.equal(svc.expires_at, new Date(ctx.clock.now().getTime() + 12 * 3_600_000).toISOString());

        const listed = await listTokens(ctx, alice);
        assert.deepEqual(
          listed.map((t) => [t.token_id, t.principal.id, t.principal.kind, t.state, t.label, t.created_by?.id]),
          [
            [human.token_id, 'carol', 'human', 'active', 'laptop', alice.id],
            [agent.token_id, 'bot', 'agent', 'active', 'ci', alice.id],
            [svc.token_id, 'dash', 'service', 'active', undefined, alice.id],
          ],
        );
        const text = JSON.stringify(listed);
        for (const t of [human, agent, svc]) {
          assert.ok(!text.includes(t.token) && !text.includes(tokenHash(t.token)), 'no secret, no hash');
        }
        assert.ok(!text.includes('alp_'));
        await assert.rejects(listTokens(ctx, agentBot), Forbidden, 'an agent cannot list tokens');
        await assert.rejects(revokeTokenRef(ctx, human.token_id, agentBot), Forbidden);
        await assert.rejects(rotateToken(ctx, human.token_id, { id: 'dash', kind: 'service' }), Forbidden);

        assert.deepEqual(await resolveToken(ctx, agent.token, cached), { id: 'bot', kind: 'agent' });
        const revoked = await revokeTokenRef(ctx, agent.token_id, alice, 'left the team');
        assert.equal(revoked.already_revoked, false);
        await assert.rejects(resolveToken(ctx, agent.token, cached), Unauthenticated, 'refused at once on the revoking node');
        await assert.rejects(resolveToken(ctx, agent.token), Unauthenticated, 'and by a strong read');
        assert.equal((await revokeTokenRef(ctx, agent.token_id, alice)).already_revoked, true, 'a second revoke writes nothing');
        await assert.rejects(rotateToken(ctx, agent.token_id, alice), Conflict, 'a revoked token is not rotated');

        ctx.clock.advance(1_000);
        const rotated = await rotateToken(ctx, human.token_id, alice);
        assert.equal(rotated.replaces, human.token_id);
        await assert.rejects(resolveToken(ctx, human.token, cached), Unauthenticated, 'the old secret is refused at once');
        assert.deepEqual(await resolveToken(ctx, rotated.token, cached), { id: 'carol', kind: 'human' });
        assert.deepEqual(await resolveToken(p.other, rotated.token), { id: 'carol', kind: 'human' }, 'on another node too');
        ctx.clock.advance(10);
        const svcRotated = await rotateToken(ctx, svc.token, alice);
        assert.equal(svcRotated.expires_at, new Date(ctx.clock.now().getTime() + 12 * 3_600_000).toISOString(), 'the old lifetime is kept');

        const after = await listTokens(ctx, alice);
        const byId = new Map(after.map((t) => [t.token_id, t]));
        assert.equal(byId.get(agent.token_id)?.state, 'revoked');
        assert.equal(byId.get(human.token_id)?.replaced_by, rotated.token_id);
        assert.equal(byId.get(rotated.token_id)?.label, 'laptop', 'the label is kept');
        assert.deepEqual(
          (await listTokens(ctx, alice, { activeOnly: true })).map((t) => t.token_id),
          [rotated.token_id, svcRotated.token_id],
        );
        assert.deepEqual(
          (await listTokens(ctx, alice, { principal: 'carol' })).map((t) => t.token_id),
          [human.token_id, rotated.token_id],
        );
        await assert.rejects(revokeTokenRef(ctx, 'tok_0000000000000000', alice), NotFound);
        await assert.rejects(revokeTokenRef(ctx, 'alp_not-a-real-token', alice), NotFound);

        const log = [];
        for await (const e of readTokenLog(ctx)) log.push([e.seq, e.action, e.token_id, e.by.id]);
        assert.deepEqual(log, [
          [1, 'created', human.token_id, alice.id],
          [2, 'created', agent.token_id, alice.id],
          [3, 'created', svc.token_id, alice.id],
          [4, 'revoked', agent.token_id, alice.id],
          [5, 'rotated', rotated.token_id, alice.id],
          [6, 'rotated', svcRotated.token_id, alice.id],
        ]);
        assert.deepEqual(await verifyTokenLog(ctx), { artifact_id: 'token-log', entries: 6, ok: true, findings: [] });
        // An edited entry is found.
        const key = { PK: TOKENS_PK, SK: tokenLogSk(4) };
        const entry = await ctx.items.get(key);
        await ctx.items.put({ ...(entry as NonNullable<typeof entry>), by: { id: 'someone-else', kind: 'human' } });
        const report = await verifyTokenLog(ctx);
        assert.equal(report.ok, false);
        assert.match(report.findings[0]?.problem ?? '', /entry 4: its hash does not match/);
      } finally {
        await p.close();
      }
    });

    it('tokens minted before the token index are listed after one backfill, and named by id', async () => {
      const p = await profile.open();
      const { ctx } = p;
      try {
        const secret = 'alp_minted-before-issue-19';
        const hash = tokenHash(secret);
        const at = ctx.clock.now().toISOString();
        await ctx.items.put({
          PK: tokenPk(hash),
          SK: TOKEN_SK,
          type: 'token',
          principal_id: 'old-bot',
          kind: 'agent',
          created_at: at,
          created_by: alice,
        });
        const fresh = await createToken(ctx, { principal: 'new-bot', kind: 'agent' }, alice);
        const listed = await listTokens(ctx, alice);
        assert.deepEqual(listed.map((t) => [t.principal.id, t.state, t.expires_at === undefined]).sort(), [
          ['new-bot', 'active', false],
          ['old-bot', 'active', true],
        ]);
        assert.ok(await ctx.items.get({ PK: TOKENS_PK, SK: TOKEN_INDEX_MARK_SK }), 'the backfill left its mark');
        const old = listed.find((t) => t.principal.id === 'old-bot');
        assert.deepEqual(await resolveToken(ctx, secret), { id: 'old-bot', kind: 'agent' });
        await revokeTokenRef(ctx, old?.token_id ?? '', alice);
        await assert.rejects(resolveToken(ctx, secret), Unauthenticated);
        assert.equal((await listTokens(ctx, alice, { activeOnly: true }))[0]?.token_id, fresh.token_id);
        const log = JSON.stringify(await readTokenLogAll(ctx));
        assert.ok(!log.includes(secret) && !log.includes(hash) && !log.includes(fresh.token), 'the log holds no secret and no hash');
      } finally {
        await p.close();
      }
    });

    it('an expired token is refused at its expiry, and a cached entry does not outlive it', async () => {
      const p = await profile.open();
      const { ctx } = p;
      try {
        configureTokenCache(ctx.items, { ttlMs: 5_000 });
        const t = await createToken(ctx, { principal: 'bot', kind: 'agent', expiresInMs: 3_600_000 }, alice);
        ctx.clock.advance(3_600_000 - 2_000);
        assert.deepEqual(await resolveToken(ctx, t.token, cached), agentBot, 'read and cached 2 s before expiry');
        ctx.clock.advance(1_999);
        assert.deepEqual(await resolveToken(ctx, t.token, cached), agentBot, '1 ms before expiry');
        ctx.clock.advance(1);
        await assert.rejects(resolveToken(ctx, t.token, cached), /token expired/, 'at expiry, though the cache entry is 2 s old');
        await assert.rejects(resolveToken(ctx, t.token), Unauthenticated);
        assert.equal((await listTokens(ctx, alice))[0]?.state, 'expired');
        const rotated = await rotateToken(ctx, t.token_id, alice, { expiresInMs: null });
        assert.equal(rotated.expires_at, undefined);
        assert.deepEqual(await resolveToken(ctx, rotated.token, cached), agentBot, 'an expired token may be rotated');
      } finally {
        await p.close();
      }
    });
  });
}

describe('token lifetimes, last use and lookups', () => {
  it('parses lifetimes; the agent default is 90 days and ALP_AGENT_TOKEN_EXPIRES_IN sets it', () => {
    assert.equal(parseLifetime('30d'), 30 * DAY_MS);
    assert.equal(parseLifetime('12h'), 12 * 3_600_000);
    assert.equal(parseLifetime('never'), null);
    for (const bad of ['0d', '-1d', 'soon', '99999d', '']) assert.throws(() => parseLifetime(bad), InvalidInput, bad);
    assert.equal(agentTokenLifetime({}), 90 * DAY_MS);
    assert.equal(agentTokenLifetime({ ALP_AGENT_TOKEN_EXPIRES_IN: '7d' }), 7 * DAY_MS);
    assert.equal(agentTokenLifetime({ ALP_AGENT_TOKEN_EXPIRES_IN: 'never' }), null);
    assert.equal(lifetimeFor('human', undefined, {}), null);
    assert.equal(lifetimeFor('service', undefined, {}), null);
    assert.equal(lifetimeFor('agent', 3_600_000, {}), 3_600_000);
    assert.equal(lifetimeFor('agent', null, {}), null);
  });

  it('records last use at most once per hour, and concurrent misses share one read', async () => {
    const ctx = await embeddedContext();
    try {
      const t = await createToken(ctx, { principal: 'bot', kind: 'agent' }, alice);
      const t0 = ctx.clock.now().toISOString();
      const lastUsed = async () => (await listTokens(ctx, alice))[0]?.last_used_at;
      assert.equal(await lastUsed(), undefined);
      await resolveToken(ctx, t.token);
      assert.equal(await lastUsed(), t0, 'the first read records it');
      ctx.clock.advance(59 * 60_000);
      await resolveToken(ctx, t.token);
      assert.equal(await lastUsed(), t0, 'within the hour nothing is written');
      ctx.clock.advance(60_000);
      await resolveToken(ctx, t.token);
      assert.equal(await lastUsed(), ctx.clock.now().toISOString(), 'an hour later it moves');

      configureTokenCache(ctx.items, { ttlMs: 5_000 });
      const reads = countTokenReads(ctx.items);
      const all = await Promise.all(Array.from({ length: 20 }, () => resolveToken(ctx, t.token, cached)));
      assert.ok(all.every((pr) => pr.id === 'bot'));
      assert.equal(reads.n, 1, '20 concurrent lookups, one read');
      ctx.clock.advance(5_000);
      await Promise.all(Array.from({ length: 5 }, () => resolveToken(ctx, t.token, cached)));
      assert.equal(reads.n, 2, 'once the entry is stale, one read again');
    } finally {
      await ctx.items.close();
      await ctx.content.close();
    }
  });

  it('token changes are refused while maintenance holds the fence, and write nothing', async () => {
    const ctx = await embeddedContext();
    try {
      await initInstallation(ctx);
      const t = await createToken(ctx, { principal: 'bot', kind: 'agent' }, alice);
      const fence = await acquireMaintenance(ctx, 1, 'test', { purpose: 'tokens' });
      await assert.rejects(createToken(ctx, { principal: 'newcomer', kind: 'agent' }, alice), MaintenanceInProgress);
      await assert.rejects(revokeTokenRef(ctx, t.token_id, alice), MaintenanceInProgress);
      await assert.rejects(rotateToken(ctx, t.token_id, alice), MaintenanceInProgress);
      await releaseMaintenance(ctx, fence);
      assert.equal((await verifyTokenLog(ctx)).entries, 1);
      assert.deepEqual(await resolveToken(ctx, t.token), agentBot);
    } finally {
      await ctx.items.close();
      await ctx.content.close();
    }
  });
});

type Op =
  | { kind: 'create'; who: 0 | 1 | 2; lifetime: 'default' | 'hour' | 'never' }
  | { kind: 'revoke' | 'rotate' | 'resolve'; i: number }
  | { kind: 'advance'; ms: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('create' as const),
    who: fc.constantFrom(0 as const, 1 as const, 2 as const),
    lifetime: fc.constantFrom('default' as const, 'hour' as const, 'never' as const),
  }),
  fc.record({ kind: fc.constantFrom('revoke' as const, 'rotate' as const, 'resolve' as const), i: fc.nat(7) }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.constantFrom(1, 4_000, 30 * 60_000, 2 * 3_600_000, 91 * DAY_MS) }),
);

interface ModelToken {
  secret: string;
  id: string;
  principal: Principal;
  expiresAtMs: number | null;
  lifetime: number | null;
  revoked: boolean;
}

describe('token lifecycle against a model (fast-check)', () => {
  it('random create/revoke/rotate/advance/resolve sequences: resolve, list and the log agree with the model', async () => {
    const whos: Principal[] = [
      { id: 'h', kind: 'human' },
      { id: 'a', kind: 'agent' },
      { id: 's', kind: 'service' },
    ];
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 15 }), async (ops) => {
        const ctx = await embeddedContext();
        try {
          const model: ModelToken[] = [];
          let changes = 0;
          const live = (t: ModelToken) => !t.revoked && (t.expiresAtMs === null || ctx.clock.now().getTime() < t.expiresAtMs);
          for (const o of ops) {
            const t = o.kind === 'create' || o.kind === 'advance' ? undefined : model[o.i % Math.max(1, model.length)];
            if (o.kind === 'create') {
              const who = whos[o.who] as Principal;
              const expiresInMs = o.lifetime === 'hour' ? 3_600_000 : o.lifetime === 'never' ? null : undefined;
              const c = await createToken(ctx, { principal: who.id, kind: who.kind, expiresInMs }, alice);
              const life = lifetimeFor(who.kind, expiresInMs, {});
              const expiresAtMs = life === null ? null : ctx.clock.now().getTime() + life;
              model.push({ secret: c.token, id: c.token_id, principal: who, expiresAtMs, lifetime: life, revoked: false });
              changes += 1;
            } else if (o.kind === 'advance') ctx.clock.advance(o.ms);
            else if (!t) continue;
            else if (o.kind === 'resolve') {
              const ok = await resolveToken(ctx, t.secret, cached).then(
                () => true,
                () => false,
              );
              assert.equal(ok, live(t), `resolve ${t.id}`);
            } else if (o.kind === 'revoke') {
              const r = await revokeTokenRef(ctx, t.id, alice);
              assert.equal(r.already_revoked, t.revoked);
              if (!t.revoked) changes += 1;
              t.revoked = true;
            } else if (t.revoked) await assert.rejects(rotateToken(ctx, t.id, alice), Conflict);
            else {
              const r = await rotateToken(ctx, t.id, alice);
              t.revoked = true;
              const expiresAtMs = t.lifetime === null ? null : ctx.clock.now().getTime() + t.lifetime;
              model.push({ secret: r.token, id: r.token_id, principal: t.principal, expiresAtMs, lifetime: t.lifetime, revoked: false });
              changes += 1;
            }
          }
          const listed = await listTokens(ctx, alice);
          assert.deepEqual(listed.map((x) => [x.token_id, x.state === 'active']).sort(), model.map((m) => [m.id, live(m)]).sort());
          for (const m of model)
            assert.equal(
              await resolveToken(ctx, m.secret).then(
                () => true,
                () => false,
              ),
              live(m),
            );
          const log = await verifyTokenLog(ctx);
          assert.equal(log.ok, true);
          assert.equal(log.entries, changes);
        } finally {
          await ctx.items.close();
          await ctx.content.close();
        }
      }),
      { numRuns: 25 },
    );
  });
});
