/**
 * `alp start` (what `npm start` runs): creates the installation, serves, and prints one human and one
 * agent token only when the installation is brand new; SIGTERM shuts down gracefully, finishing an
 * in-flight upload or, past the grace period, discarding it with its temp file.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { describe, it } from 'node:test';
import { sha256 } from '../../src/core/digest.ts';
import { runAlp } from '../helpers/cli.ts';
import { tempDir } from '../helpers/tmp.ts';
import { startServerProcess } from './server-process.ts';

/** Temp files of uploads under `dir` (not the transparency log's objects, which the server's sequencer stages at its own pace). */
function tempFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory() && e.name === 'tlog') continue;
    if (e.isDirectory()) out.push(...tempFiles(p));
    else if (e.name.startsWith('.alp-tmp-')) out.push(p);
  }
  return out;
}

/** An upload whose body the test writes piece by piece. */
function slowUpload(url: string, token: string, total: number) {
  const req = http.request(url, {
    method: 'POST',
    agent: false,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream', 'content-length': String(total) },
  });
  const response = new Promise<{ status: number; body: string } | { error: string }>((resolve) => {
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString() }));
      res.on('error', (e) => resolve({ error: e.message }));
    });
    req.on('error', (e) => resolve({ error: e.message }));
  });
  return { write: (b: Buffer) => new Promise<void>((r) => req.write(b, () => r())), end: () => req.end(), response };
}

const get = async (url: string, token?: string) => {
  const res = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  return { status: res.status, text: await res.text() };
};

describe('alp start: the default entry point serves HTTP', () => {
  it('creates the installation, prints one human and one agent token once, and serves with them', async () => {
    const data = path.join(tempDir('alp-start'), 'data');
    const first = await startServerProcess(data);
    try {
      assert.equal(first.status.created, true);
      assert.match(first.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      const kinds = first.status.tokens.map((t) => t.kind).sort();
      assert.deepEqual(kinds, ['agent', 'human']);
      const human = first.status.tokens.find((t) => t.kind === 'human') as { token: string; principal: string };
      const agent = first.status.tokens.find((t) => t.kind === 'agent') as { token: string; principal: string };
      assert.match(human.principal, /^os:/);
      const who = JSON.parse((await get(`${first.url}/v1/whoami`, human.token)).text);
      assert.deepEqual(who.principal, { id: human.principal, kind: 'human' });
      assert.equal(JSON.parse((await get(`${first.url}/v1/whoami`, agent.token)).text).principal.kind, 'agent');
      assert.equal((await get(`${first.url}/healthz`)).status, 200);
      assert.equal((await get(`${first.url}/readyz`)).status, 200);
      // Only hashes are stored: the database never contains a token.
      const db = fs.readFileSync(path.join(data, 'alp.db'));
      assert.equal(db.includes(Buffer.from(human.token)), false);
      assert.equal(db.includes(Buffer.from(agent.token)), false);
    } finally {
      assert.deepEqual(await first.stop(), { code: 0, signal: null });
    }
    const again = await startServerProcess(data);
    try {
      assert.equal(again.status.created, false);
      assert.deepEqual(again.status.tokens, []);
      // Its transparency-log sequencer is on /metrics: it holds the lease and has run a round (at start).
      let metrics = '';
      for (let i = 0; i < 100 && !/^alp_tlog_rounds_total [1-9]/m.test(metrics); i++) {
        metrics = (await get(`${again.url}/metrics`)).text;
        if (!/^alp_tlog_rounds_total [1-9]/m.test(metrics)) await new Promise((r) => setTimeout(r, 50));
      }
      assert.match(metrics, /^alp_tlog_rounds_total [1-9]\d*$/m);
      assert.match(metrics, /^alp_tlog_sequencer_holding 1$/m);
      assert.match(metrics, /^alp_tlog_round_failures_total 0$/m);
      assert.match(metrics, /^alp_tlog_leaves [1-9]\d*$/m, "the first start's entries are in the log");
    } finally {
      assert.deepEqual(await again.stop('SIGINT'), { code: 0, signal: null });
    }
  });

  it('prints the URL and the tokens for humans without --json', async () => {
    const data = path.join(tempDir('alp-start'), 'data');
    const root = path.resolve(import.meta.dirname, '../..');
    const child = spawn(
      process.execPath,
      ['--import', import.meta.resolve('tsx'), 'src/cli/main.ts', 'start', '--data', data, '--port', '0'],
      {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no banner: ${out}`)), 30_000);
      child.stdout.on('data', (b: Buffer) => {
        out += b.toString();
        if (out.includes('create more with')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    child.kill('SIGTERM');
    await new Promise((r) => child.on('exit', r));
    assert.match(out, /serving: {2}http:\/\/127\.0\.0\.1:\d+/);
    assert.match(out, /human {2}os:\S+ +alp_\S+/);
    assert.match(out, /agent {2}agent +alp_\S+/);
  });

  it('refuses a malformed numeric setting before it listens (usage, naming it), not a server that fails later', {
    timeout: 120_000,
  }, async () => {
    for (const env of [
      { ALP_POLICY_CACHE_MS: '5s' },
      { ALP_TOKEN_CACHE_MS: '-1' },
      { ALP_TOKEN_CACHE_MAX: 'many' },
      { ALP_WEBHOOK_POLL_MS: '1' },
    ]) {
      const name = Object.keys(env)[0] as string;
      const r = await runAlp(['start', '--data', path.join(tempDir('alp-start-env'), 'data'), '--port', '0'], { env });
      assert.equal(r.code, 2, `${name}: ${r.stderr}`);
      assert.match(r.stderr, new RegExp(`${name} must be a whole number`));
      assert.doesNotMatch(r.stdout, /listening|http:\/\//);
    }
  });

  it('on SIGTERM finishes an in-flight upload within the grace period, then exits 0', async () => {
    const data = path.join(tempDir('alp-start'), 'data');
    const server = await startServerProcess(data, ['--shutdown-grace-ms', '10000']);
    try {
      const agent = server.status.tokens.find((t) => t.kind === 'agent')?.token as string;
      const part = Buffer.alloc(1024 * 1024, 5);
      const up = slowUpload(`${server.url}/v1/artifacts?name=inflight&filename=f.bin`, agent, 4 * part.length);
      await up.write(part);
      await up.write(part);
      // The server is streaming it (its temp file exists) when the signal comes.
      for (let i = 0; i < 200 && tempFiles(path.join(data, 'content')).length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(tempFiles(path.join(data, 'content')).length, 1);
      server.child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 300));
      // New connections are refused while the upload finishes.
      await assert.rejects(fetch(`${server.url}/healthz`));
      await up.write(part);
      await up.write(part);
      up.end();
      const res = await up.response;
      assert.ok('status' in res, JSON.stringify(res));
      assert.equal(res.status, 201, res.body);
      const created = JSON.parse(res.body);
      assert.equal(created.content_hash, sha256(Buffer.concat([part, part, part, part])));
      assert.deepEqual(await server.exited, { code: 0, signal: null });
      // It is durable: a new server serves it.
      const next = await startServerProcess(data);
      try {
        const got = await fetch(`${next.url}/v1/artifacts/${created.artifact_id}/versions/1/content`, {
          headers: { authorization: `Bearer ${agent}` },
        });
        assert.equal(got.status, 200);
        assert.equal(Buffer.from(await got.arrayBuffer()).length, 4 * part.length);
      } finally {
        await next.stop();
      }
    } finally {
      if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL'); // a failed assertion must not leave it running
    }
  });

  it('on SIGTERM aborts an upload that outlasts the grace period and removes its temp file', async () => {
    const data = path.join(tempDir('alp-start'), 'data');
    const server = await startServerProcess(data, ['--shutdown-grace-ms', '300']);
    try {
      const agent = server.status.tokens.find((t) => t.kind === 'agent')?.token as string;
      const up = slowUpload(`${server.url}/v1/artifacts?name=stalled&filename=s.bin`, agent, 64 * 1024 * 1024);
      await up.write(Buffer.alloc(2 * 1024 * 1024, 1));
      for (let i = 0; i < 100 && tempFiles(path.join(data, 'content')).length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(tempFiles(path.join(data, 'content')).length, 1, 'the upload is streaming into a temp file');
      server.child.kill('SIGTERM');
      const res = await up.response;
      assert.ok(!('status' in res) || res.status >= 500 || res.status === 0, `the stalled upload did not complete: ${JSON.stringify(res)}`);
      assert.deepEqual(await server.exited, { code: 0, signal: null });
      assert.deepEqual(tempFiles(path.join(data, 'content')), []);
      assert.match(server.stdout(), /grace period over: aborting in-flight uploads/);
    } finally {
      if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL'); // a failed assertion must not leave it running
    }
  });
});
