/**
 * `alp mcp` over stdio: the SDK's StdioClientTransport spawns the real CLI on a temp installation, as
 * an agent runtime would. The caller is the token's principal (ALP_TOKEN), or with --principal a
 * named agent; stdout carries nothing but the protocol (any other line would break the client).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { sha256 } from '../../src/core/digest.ts';
import { MCP_TOOLS } from '../../src/mcp/server.ts';
import { cleanAlpEnv } from '../helpers/alp-process.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { alpFromSource } from '../helpers/cli-bundle.ts';
import { tempDir } from '../helpers/tmp.ts';

// biome-ignore lint/suspicious/noExplicitAny: tool results are asserted field by field
type Json = any;

interface StdioSession {
  client: Client;
  errors: Error[];
  stderr(): string;
  call(name: string, args: Record<string, unknown>): Promise<{ isError: boolean; data: Json; text: string }>;
  close(): Promise<void>;
}

async function connect(data: string, args: string[], env: Record<string, string> = {}): Promise<StdioSession> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [...alpFromSource(), 'mcp', '--data', data, ...args],
    env: cleanAlpEnv(env) as Record<string, string>,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (b: Buffer) => {
    stderr += b.toString('utf8');
  });
  const client = new Client({ name: 'alp-test-agent', version: '1' });
  const errors: Error[] = [];
  client.onerror = (e) => errors.push(e);
  await client.connect(transport);
  return {
    client,
    errors,
    stderr: () => stderr,
    async call(name, a) {
      const r = (await client.callTool({ name, arguments: a })) as Json;
      return { isError: r.isError === true, data: r.structuredContent, text: r.content?.[0]?.text ?? '' };
    },
    close: () => client.close(),
  };
}

describe('alp mcp (stdio, the real CLI)', () => {
  const dir = tempDir('alp-mcp-stdio');
  const data = path.join(dir, 'data');
  let token = '';

  before(async () => {
    const init = await runAlp(['init', '--data', data]);
    assert.equal(init.code, 0, init.stderr);
    token = (await alpJson<{ token: string }>(['token', 'create', '--principal', 'bot', '--kind', 'agent', '--data', data])).token;
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('as the token’s agent: lists the tools (no decision), creates inline, proposes, reads the status', async () => {
    const s = await connect(data, [], { ALP_TOKEN: token });
    try {
      const { tools } = await s.client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), [...MCP_TOOLS].sort());
      assert.ok(!tools.some((t) => /approv|reject|decide/i.test(t.name)));
      const create = tools.find((t) => t.name === 'create_artifact') as Json;
      assert.ok(create.inputSchema.properties.path, 'a file path is offered on stdio');

      const made = await s.call('create_artifact', { name: 'deploy', filename: 'deploy.sh', content: 'echo hi\n', kind: 'script' });
      assert.equal(made.isError, false, made.text);
      assert.deepEqual(
        [made.data.state, made.data.content_hash, made.data.created_by],
        ['DRAFT', sha256('echo hi\n'), { id: 'bot', kind: 'agent' }],
      );
      const id = made.data.artifact_id as string;
      const proposed = await s.call('propose', { artifact_id: id });
      assert.equal(proposed.data.state, 'PROPOSED', proposed.text);
      const status = await s.call('get_status', { artifact_id: id });
      assert.deepEqual([status.data.state, status.data.approvals.counting_now, status.data.approvals.quorum], ['PROPOSED', 0, 1]);

      // A file on the agent's side, streamed like `alp artifact version --file`.
      const file = path.join(dir, 'deploy-v2.sh');
      fs.writeFileSync(file, 'echo v2\n');
      const v2 = await s.call('create_version', { artifact_id: id, path: file });
      assert.deepEqual([v2.data.version, v2.data.filename, v2.data.content_hash], [2, 'deploy-v2.sh', sha256('echo v2\n')]);
      assert.equal((await s.call('get_content', { artifact_id: id, version: 2 })).data.content, 'echo v2\n');
      const missing = await s.call('create_version', { artifact_id: id, path: path.join(dir, 'nope.sh') });
      assert.deepEqual([missing.isError, missing.data.error.code], [true, 'NOT_FOUND']);

      // Errors are tool errors with the code; the session goes on.
      const unknown = await s.call('propose', { artifact_id: '01ARZ3NDEKTSV4RRFFQ69G5FAV' });
      assert.deepEqual([unknown.isError, unknown.data.error.code], [true, 'NOT_FOUND']);
      const invalid = await s.call('create_artifact', { filename: 'x.sh', content: 'x' });
      assert.equal(invalid.isError, true);
      assert.match(invalid.text, /Input validation error.*name/s);
      assert.deepEqual(s.errors, [], 'every stdout line was a protocol message');
    } finally {
      await s.close();
    }
  });

  it('as a named agent with --principal (no token), held to the agent kind', async () => {
    const s = await connect(data, ['--principal', 'ci-runner']);
    try {
      const made = await s.call('create_artifact', { name: 'report', filename: 'r.txt', content: 'ok\n' });
      assert.deepEqual(made.data.created_by, { id: 'ci-runner', kind: 'agent' });
      assert.match(s.stderr(), /serving as ci-runner \(agent\)/);
    } finally {
      await s.close();
    }
  });

  it('refuses to start without a caller, with both, or with an unknown token (stdout stays empty)', async () => {
    const none = await runAlp(['mcp', '--data', data]);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /alp: USAGE: alp mcp needs --token/);
    const both = await runAlp(['mcp', '--data', data, '--principal', 'x'], { env: { ALP_TOKEN: token } });
    assert.equal(both.code, 2);
    const bogus = await runAlp(['mcp', '--data', data], { env: { ALP_TOKEN: 'alp_notatokenatallnotatokenatall000' } });
    assert.equal(bogus.code, 6);
    for (const r of [none, both, bogus]) assert.equal(r.stdout, '');
  });
});
