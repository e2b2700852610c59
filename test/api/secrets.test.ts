/**
 * No token or secret is ever logged. The server runs in its own process at log level trace (everything
 * it can log), and is sent token-bearing requests: valid tokens of every kind on every kind of route,
 * unknown and malformed tokens, and tokens where they do not belong (query strings, JSON bodies, path
 * segments, X-Request-Id, Cookie, X-Api-Key, Proxy-Authorization, digest headers), including on a
 * request that trips an integrity failure (logged at error level with its URL). The CLI runs with
 * valid, unknown and misplaced tokens. No token value appears in any server log line or on the CLI's
 * stderr. (The status line `alp start` prints on a new installation carries its two bootstrap tokens
 * by design — shown once, README — and is the one line excluded.)
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { redactTokens } from '../../src/core/redact.ts';
import { runAlp } from '../helpers/cli.ts';
import { captureCli, patchCliOutput } from '../helpers/cli-inprocess.ts';
import { tempDir } from '../helpers/tmp.ts';
import { type ServerProcess, startServerProcess } from './server-process.ts';

describe('secrets: tokens never reach a log line', () => {
  let server: ServerProcess;
  let data: string;
  const tokens: Record<string, string> = {};
  /** Token-shaped values that are not tokens here (they could be real tokens of another installation). */
  const strangers = ['alp_Q2hhbmdlVGhpc1NlY3JldFRva2VuVmFsdWUwMDAwMDAwMA', 'alp_x-y_z0123456789abcdefghijklmnopqrstuvwxyzAB'];

  before(async () => {
    data = path.join(tempDir('alp-secrets'), 'data');
    server = await startServerProcess(data, ['--log-level', 'trace']);
    for (const t of server.status.tokens) tokens[t.kind] = t.token;
    const created = await runAlp(['token', 'create', '--data', data, '--principal', 'exporter', '--kind', 'service', '--json']);
    assert.equal(created.code, 0, created.stderr);
    tokens.service = JSON.parse(created.stdout).token;
  });
  after(async () => {
    await server.stop();
  });

  const send = (p: string, init: RequestInit & { token?: string } = {}) => {
    const headers = new Headers(init.headers);
    if (init.token) headers.set('authorization', `Bearer ${init.token}`);
    return fetch(`${server.url}${p}`, { ...init, headers }).then(async (r) => ({ status: r.status, body: await r.text() }));
  };

  it('logs no token at level trace, whatever the request carries and wherever', async (t) => {
    const { human, agent, service } = tokens as { human: string; agent: string; service: string };
    const all = [human, agent, service, ...strangers];
    // Valid use: an artifact through its lifecycle, with each kind.
    const created = await send('/v1/artifacts?name=s&filename=s.sh', { method: 'POST', token: agent, body: 'echo s\n' });
    assert.equal(created.status, 201, created.body);
    const id = JSON.parse(created.body).artifact_id as string;
    const transit = (to: string) =>
      send(`/v1/artifacts/${id}/versions/1/transitions`, {
        method: 'POST',
        token: agent,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ to, reason: `by ${agent}` }),
      });
    assert.equal((await transit('PROPOSED')).status, 200);
    // A human who pastes a token into evidence or a comment stores it as data (the audit record); it
    // still never reaches a log line.
    const approved = await send(`/v1/artifacts/${id}/versions/1/approvals`, {
      method: 'POST',
      token: human,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ decision: 'APPROVE', evidence_ref: `ticket ${human}`, comment: service }),
    });
    assert.equal(approved.status, 201, approved.body);
    for (const t of [human, agent, service]) assert.equal((await send('/v1/whoami', { token: t })).status, 200);
    assert.equal((await send(`/v1/artifacts/${id}/versions/1/content`, { token: service })).status, 200);
    assert.equal((await send(`/v1/artifacts/${id}/archive`, { method: 'POST', token: agent })).status, 403);
    // Unknown, malformed and misplaced tokens.
    for (const t of strangers) assert.equal((await send('/v1/whoami', { token: t })).status, 401);
    for (const h of [`bearer ${human}x`, `Basic ${Buffer.from(`u:${human}`).toString('base64')}`, `Bearer ${human} ${agent}`, human])
      assert.equal((await send('/v1/whoami', { headers: { authorization: h } })).status, 401);
    for (const t of all) {
      await send(`/v1/whoami?token=${t}&access_token=${t}`);
      await send(`/v1/artifacts/${t}`, { token: t });
      await send(`/v1/artifacts/${id}/versions/1/content?access_token=${t}`, { token: service });
      await send('/v1/whoami', {
        headers: { cookie: `session=${t}`, 'x-api-key': t, 'proxy-authorization': `Bearer ${t}`, 'x-request-id': t },
      });
      await send(`/v1/artifacts?name=${t}&filename=${t}&label=k=${t}`, { method: 'POST', token: agent, body: t });
      await send(`/v1/artifacts?name=n&filename=f`, {
        method: 'POST',
        token: agent,
        body: 'x',
        headers: { 'repr-digest': `sha-256=:${t}:` },
      });
      await send(`/v1/artifacts/${id}/provenance`, {
        method: 'POST',
        token: agent,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ action: t, note: t, inputs: [t] }),
      });
      await send(`/v1/artifacts/${id}/versions/1/transitions`, {
        method: 'POST',
        token: agent,
        headers: { 'content-type': 'application/json' },
        body: `{"to":"${t}","reason":`,
      });
      await send(`/nope/${t}?${t}=1`, { token: t });
    }
    // An integrity failure is logged at error level with the request: corrupt the stored bytes, then
    // download with a token in the query string as well.
    const file = path.join(data, 'content', 'artifacts', id, 'v1', 's.sh');
    fs.writeFileSync(file, 'echo S\n');
    const corrupt = await send(`/v1/artifacts/${id}/versions/1/content?token=${service}`, { token: service });
    assert.equal(corrupt.status, 502);
    await new Promise((r) => setTimeout(r, 300));

    const lines = server
      .stdout()
      .split('\n')
      .filter((l) => l.trim().length > 0);
    const status = lines.filter((l) => l.includes('"installation_id"') && l.includes('"tokens"'));
    assert.equal(status.length, 1, 'one status line');
    const logs = lines.filter((l) => !status.includes(l));
    assert.ok(logs.length > 60, `${logs.length} log lines`);
    assert.ok(
      logs.some((l) => l.includes('integrity failure')),
      'the integrity failure was logged',
    );
    const leaks: string[] = [];
    for (const l of [...logs, ...server.stderr().split('\n')])
      for (const t of all) if (l.includes(t) || l.includes(encodeURIComponent(t))) leaks.push(l.slice(0, 300));
    assert.deepEqual(leaks.slice(0, 5), [], `${leaks.length} log lines carry a token`);
    t.diagnostic(`${logs.length} log lines at level trace checked against ${all.length} token values: none found`);
  });

  it('issue 14 item 9: no token reaches a log line percent-encoded (prefix, every byte, twice, in path and query)', async (t) => {
    const { human, agent, service } = tokens as { human: string; agent: string; service: string };
    const all = [human, agent, service, ...strangers];
    const everyByte = (s: string) => [...Buffer.from(s)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
    const spellings = (tok: string) => [
      `alp%5F${tok.slice(4)}`,
      `alp%5f${tok.slice(4)}`,
      `%61lp_${tok.slice(4)}`,
      everyByte(tok),
      everyByte(tok).toLowerCase(),
      everyByte(tok).replaceAll('%', '%25'),
      `x%2F${everyByte(tok)}%2Fy`,
    ];
    const before = server.stdout().length;
    for (const tok of all) {
      for (const spelled of spellings(tok)) {
        await send(`/v1/artifacts/${spelled}`, { token: service });
        await send(`/v1/whoami?token=${spelled}`, { token: service });
        await send(`/nope/${spelled}?${spelled}=1%zz`, { token: service });
        await send(`/v1/executions/${spelled}/stdout.log`, { token: service });
      }
    }
    await new Promise((r) => setTimeout(r, 300));
    const logs = server
      .stdout()
      .slice(before)
      .split('\n')
      .filter((l) => l.trim().length > 0);
    assert.ok(logs.length >= all.length * 7 * 4, `${logs.length} log lines`);
    // Decode every line as far as it goes (tolerating malformed escapes), then look for any token.
    const decodeAll = (line: string) => {
      let cur = line;
      for (let i = 0; i < 5; i++) cur = cur.replace(/%([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
      return cur;
    };
    const leaks = logs.filter((l) => all.some((tok) => decodeAll(l).includes(tok) || decodeAll(l).includes(tok.slice(4, 30))));
    assert.deepEqual(leaks.slice(0, 3), [], `${leaks.length} log lines carry an encoded token`);
    t.diagnostic(`${logs.length} log lines of percent-encoded tokens checked: none found`);
  });

  it('issue 14 item 9: redaction works on the decoded form and never throws on a malformed escape', () => {
    const tok = strangers[0] as string;
    const everyByte = [...Buffer.from(tok)].map((b) => `%${b.toString(16)}`).join('');
    for (const spelled of [`alp%5F${tok.slice(4)}`, everyByte, everyByte.replaceAll('%', '%25'), `/a/${everyByte}?q=1`]) {
      const out = redactTokens(`GET /v1/artifacts/${spelled} 404`);
      assert.ok(!out.includes(spelled) && out.includes('alp_[redacted]'), out);
    }
    for (const odd of ['%', '%%', '%zz%5', '100% done', '%E0%A4%A', `%ff${'%'.repeat(1000)}`, 'alp_short%5F'])
      assert.equal(redactTokens(odd), odd, odd);
  });

  it('the CLI never prints a token on stderr, given valid, unknown or misplaced tokens', async () => {
    const unpatch = patchCliOutput();
    try {
      const all = [tokens.human as string, tokens.agent as string, ...strangers];
      for (const t of all) {
        for (const [args, env] of [
          [['artifact', 'list', '--data', data, '--token', t], {}],
          [['artifact', 'create', '--data', data, '--name', 'c', '--file', '/nonexistent', '--token', t], {}],
          [['artifact', 'show', t, '--data', data], {}],
          [['artifact', 'propose', '01ARZ3NDEKTSV4RRFFQ69G5FAV', '--version', '1', '--data', data], { ALP_TOKEN: t }],
          [['artifact', 'list', '--data', data, `--tokn=${t}`], {}],
          [['artifact', 'list', '--data', data, '--state', t], {}],
          [['provenance', 'add', t, '--action', t, '--data', data, '--token', t], {}],
          [['audit', 'verify', t, '--data', data], {}],
        ] as Array<[string[], Record<string, string>]>) {
          Object.assign(process.env, env);
          const r = await captureCli(args).finally(() => {
            for (const k of Object.keys(env)) delete process.env[k];
          });
          assert.equal(r.stderr.includes(t), false, `alp ${args.join(' ')}: ${r.stderr}`);
        }
      }
    } finally {
      unpatch();
    }
  });
});
