/**
 * `alp token create|list|revoke|rotate|log` (issue 19 B8) in real processes: list shows ids, states and
 * dates but never a secret; rotate prints a new secret once and the old one stops working; revoked and
 * expired tokens are refused as --token (exit 6); an agent token cannot administer tokens; and `alp
 * audit verify` passes after every token operation (the installation-wide append counter included),
 * with the changes in the token log.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { tempDir } from '../helpers/tmp.ts';

type Json = Record<string, unknown>;

describe('alp token', () => {
  it('creates, lists, rotates and revokes tokens; audit verify passes after each; refused tokens exit 6', async () => {
    const data = path.join(tempDir('alp-tokens'), 'd');
    const at = ['--data', data];
    const verify = async (why: string) => {
      const r = await runAlp(['audit', 'verify', ...at, '--json']);
      assert.equal(r.code, 0, `${why}: audit verify exited ${r.code}: ${r.stderr}${r.stdout}`);
      return JSON.parse(r.stdout) as Json;
    };
    await alpJson(['init', ...at]);
    const human = await alpJson(['token', 'create', '--principal', 'carol', '--kind', 'human', '--label', 'laptop', ...at]);
    const agent = await alpJson(['token', 'create', '--principal', 'bot', '--kind', 'agent', ...at]);
    const brief = await alpJson(['token', 'create', '--principal', 'tmp', '--kind', 'agent', '--expires-in', '1ms', ...at]);
    assert.match(String(agent.token_id), /^tok_[0-9a-f]{16}$/);
    assert.equal(typeof agent.expires_at, 'string', 'agent tokens get the default expiry');
    assert.equal(human.expires_at, undefined);
    await verify('after create');

    const plain = await runAlp(['token', 'list', ...at]);
    assert.equal(plain.code, 0, plain.stderr);
    const listed = await alpJson<{ tokens: Json[] }>(['token', 'list', ...at]);
    for (const t of [human, agent, brief]) {
      assert.ok(!plain.stdout.includes(String(t.token)) && !JSON.stringify(listed).includes(String(t.token)), 'no secret listed');
    }
    assert.ok(plain.stdout.includes(String(agent.token_id)));
    const states = Object.fromEntries(listed.tokens.map((t) => [t.token_id, t.state]));
    assert.deepEqual(states, {
      [String(human.token_id)]: 'active',
      [String(agent.token_id)]: 'active',
      [String(brief.token_id)]: 'expired',
    });

    const expired = await runAlp(['artifact', 'list', ...at], { env: { ALP_TOKEN: String(brief.token) } });
    assert.equal(expired.code, 6, expired.stderr);
    assert.match(expired.stderr, /^alp: UNAUTHENTICATED: token expired/m);
    const asAgent = await runAlp(['token', 'list', ...at], { env: { ALP_TOKEN: String(agent.token) } });
    assert.equal(asAgent.code, 6, 'an agent token cannot administer tokens');
    assert.match(asAgent.stderr, /^alp: FORBIDDEN: /m);
    const used = await alpJson<{ tokens: Json[] }>(['token', 'list', '--principal', 'bot', ...at]);
    assert.equal(typeof used.tokens[0]?.last_used_at, 'string', 'the agent token was used (last use recorded)');

    const rotated = await alpJson(['token', 'rotate', String(human.token_id), ...at]);
    assert.equal(rotated.replaces, human.token_id);
    const plainRotate = await runAlp(['token', 'rotate', String(rotated.token_id), ...at]);
    assert.equal(plainRotate.code, 0, plainRotate.stderr);
    const secret = plainRotate.stdout.trim();
    assert.match(secret, /^alp_[A-Za-z0-9_-]{43}$/, 'the human form prints the new secret alone');
    const whoOld = await runAlp(['artifact', 'list', ...at], { env: { ALP_TOKEN: String(human.token) } });
    assert.equal(whoOld.code, 6, 'the rotated-away secret is refused');
    assert.equal((await runAlp(['artifact', 'list', ...at], { env: { ALP_TOKEN: secret } })).code, 0, 'the new one works');
    await verify('after rotate');

    const revoked = await runAlp(['token', 'revoke', String(agent.token_id), '--reason', 'done', ...at]);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.match(revoked.stdout, /^revoked tok_/);
    const again = await runAlp(['token', 'revoke', String(agent.token_id), ...at]);
    assert.match(again.stdout, /already revoked/);
    const asRevoked = await runAlp(['artifact', 'list', ...at], { env: { ALP_TOKEN: String(agent.token) } });
    assert.equal(asRevoked.code, 6);
    assert.equal((await runAlp(['token', 'revoke', 'tok_0123456789abcdef', ...at])).code, 3, 'an unknown id: not found');

    const summary = await verify('after revoke');
    assert.deepEqual(summary.token_log, { entries: 6, ok: true });
    const log = await alpJson<{ events: Json[] }>(['token', 'log', ...at]);
    assert.deepEqual(
      log.events.map((e) => e.action),
      ['created', 'created', 'created', 'rotated', 'rotated', 'revoked'],
    );
    assert.equal(log.events[5]?.reason, 'done');
  });
});
