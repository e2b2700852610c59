/**
 * Token lookups cached on the HTTP server (issue 16 item 8), over real HTTP: a token revoked through
 * the server's own context is refused at once; revoked through another node (a second store over the
 * same SQLite file) it is accepted for at most ALP_TOKEN_CACHE_MS (5 s default, the server's injected
 * clock), then refused. An expiring token (issue 19 B8) is refused at its expiry with a 401
 * problem+json, even when the server read it less than the cache bound before.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createToken, revokeToken } from '../../src/lifecycle/principals.ts';
import { DEFAULT_TOKEN_CACHE_MS } from '../../src/lifecycle/token-cache.ts';
import { revokeTokenRef, rotateToken } from '../../src/lifecycle/tokens.ts';
import { createContext } from '../../src/runtime/context.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { startApi } from '../helpers/api-harness.ts';

describe('the HTTP server caches token lookups', () => {
  it('refuses a token revoked on this node at once, and one revoked on another node within the bound', async () => {
    const h = await startApi();
    const otherItems = new SqliteItemStore(h.ctx.dbPath);
    const other = createContext({ items: otherItems, content: h.ctx.content, clock: h.ctx.clock });
    try {
      const admin = h.principals.human;
      const whoami = (token: string) => h.call('GET', '/v1/whoami', { token });
      const local = (await createToken(h.ctx, { principal: 'agent-local', kind: 'agent' }, admin)).token;
      assert.equal((await whoami(local)).status, 200);
      await revokeToken(h.ctx, local);
      assert.equal((await whoami(local)).status, 401, 'revoked on the serving node: refused at once');

      const remote = (await createToken(other, { principal: 'agent-remote', kind: 'agent' }, admin)).token;
      assert.equal((await whoami(remote)).status, 200, 'minted on another node: accepted at once');
      await revokeToken(other, remote);
      h.ctx.clock.advance(DEFAULT_TOKEN_CACHE_MS - 1);
      assert.equal((await whoami(remote)).status, 200, 'within the bound the serving node may still accept it');
      h.ctx.clock.advance(1);
      assert.equal((await whoami(remote)).status, 401, 'past the bound it is refused');
    } finally {
      await otherItems.close();
      await h.close();
    }
  });

  it('refuses an expired token at its expiry (401 problem+json), a rotated one at once, and one revoked by id elsewhere within the bound', async () => {
    const h = await startApi();
    const otherItems = new SqliteItemStore(h.ctx.dbPath);
    const other = createContext({ items: otherItems, content: h.ctx.content, clock: h.ctx.clock });
    try {
      const admin = h.principals.human;
      const whoami = (token: string) => h.call('GET', '/v1/whoami', { token });
      const short = await createToken(h.ctx, { principal: 'agent-short', kind: 'agent', expiresInMs: 60_000 }, admin);
      h.ctx.clock.advance(58_000);
      assert.equal((await whoami(short.token)).status, 200, 'read (and cached) 2 s before expiry');
      h.ctx.clock.advance(1_999);
      assert.equal((await whoami(short.token)).status, 200);
      h.ctx.clock.advance(1);
      const expired = await whoami(short.token);
      assert.equal(expired.status, 401, 'at expiry, though the cached entry is younger than the bound');
      assert.match(expired.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.equal(expired.json.code, 'UNAUTHENTICATED');

      const old = await createToken(h.ctx, { principal: 'agent-rot', kind: 'agent' }, admin);
      assert.equal((await whoami(old.token)).status, 200);
      const rotated = await rotateToken(h.ctx, old.token_id, admin);
      assert.equal((await whoami(old.token)).status, 401, 'rotated on the serving node: the old secret is refused at once');
      assert.equal((await whoami(rotated.token)).json.principal.id, 'agent-rot', 'the new secret works at once');

      const remote = await createToken(h.ctx, { principal: 'agent-far', kind: 'agent' }, admin);
      assert.equal((await whoami(remote.token)).status, 200);
      await revokeTokenRef(other, remote.token_id, admin);
      h.ctx.clock.advance(DEFAULT_TOKEN_CACHE_MS - 1);
      assert.equal((await whoami(remote.token)).status, 200, 'revoked on another node: within the bound it may still work here');
      h.ctx.clock.advance(1);
      assert.equal((await whoami(remote.token)).status, 401, 'past the bound it is refused');
    } finally {
      await otherItems.close();
      await h.close();
    }
  });
});
