/**
 * The MCP tools over Streamable HTTP at /mcp on a real `alp start` process, driven by the SDK's
 * StreamableHTTPClientTransport with the agent token the new installation printed. The walk of issue
 * 19's Must show: the agent creates and proposes over MCP, a human approves over plain HTTP, the
 * agent's wait_for_decision sees APPROVED, the agent runs it (start, record, finish) and fetches the
 * verified content. Also: /mcp takes the API's bearer tokens (401 without one), offers no file paths
 * and no decision tool, and answers only POST (stateless: no SSE stream to GET).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { sha256 } from '../../src/core/digest.ts';
import { MCP_TOOLS } from '../../src/mcp/server.ts';
import { type AlpProcessHandle, startAlpProcess } from '../helpers/alp-process.ts';
import { tempDir } from '../helpers/tmp.ts';

// biome-ignore lint/suspicious/noExplicitAny: tool results are asserted field by field
type Json = any;

async function mcpClient(url: string, token: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', url), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'alp-test-agent', version: '1' });
  await client.connect(transport);
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<{ isError: boolean; data: Json; text: string }> {
  const r = (await client.callTool({ name, arguments: args })) as Json;
  return { isError: r.isError === true, data: r.structuredContent, text: r.content?.[0]?.text ?? '' };
}

async function ok(client: Client, name: string, args: Record<string, unknown>): Promise<Json> {
  const r = await call(client, name, args);
  assert.equal(r.isError, false, `${name}: ${r.text}`);
  return r.data;
}

describe('MCP over Streamable HTTP at /mcp (alp start)', () => {
  let alp: AlpProcessHandle;
  let human = '';
  let agentToken = '';
  let agent: Client;

  before(async () => {
    alp = await startAlpProcess({ args: ['--data', path.join(tempDir('alp-mcp-http'), 'data'), '--log-level', 'warn'] });
    human = alp.status.tokens.find((t) => t.kind === 'human')?.token as string;
    agentToken = alp.status.tokens.find((t) => t.kind === 'agent')?.token as string;
    assert.ok(human && agentToken, alp.statusLine);
    agent = await mcpClient(alp.url, agentToken);
  });
  after(async () => {
    await agent?.close();
    await alp?.stop();
  });

  it('the walk: the agent proposes over MCP, a human approves over HTTP, the agent sees it, runs it and reads it back', async () => {
    const { tools } = await agent.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...MCP_TOOLS].sort());
    assert.ok(!tools.some((t) => /approv|reject|decide/i.test(t.name)), 'no decision tool for the agent');
    const create = tools.find((t) => t.name === 'create_artifact') as Json;
    assert.equal(create.inputSchema.properties.path, undefined, 'no file path over HTTP');

    const script = '#!/bin/sh\necho migrated\n';
    const v = await ok(agent, 'create_artifact', {
      name: 'migrate',
      filename: 'migrate.sh',
      kind: 'script',
      content: Buffer.from(script).toString('base64'),
      encoding: 'base64',
      digest: sha256(script),
    });
    assert.deepEqual([v.state, v.content_hash, v.created_by.kind], ['DRAFT', sha256(script), 'agent']);
    const id = v.artifact_id as string;
    assert.equal((await ok(agent, 'propose', { artifact_id: id, reason: 'schema change' })).state, 'PROPOSED');

    // The agent waits while the human decides over plain HTTP (the decision route, a human token).
    const waiting = ok(agent, 'wait_for_decision', { artifact_id: id, version: 1, timeout_seconds: 30 });
    const decision = await fetch(`${alp.url}/v1/artifacts/${id}/versions/1/approvals`, {
      method: 'POST',
      headers: { authorization: `Bearer ${human}`, 'content-type': 'application/json' },
      body: JSON.stringify({ decision: 'APPROVE', evidence_ref: 'CR-42', expires_in: '1h', content_hash: sha256(script) }),
    });
    assert.equal(decision.status, 201, await decision.clone().text());
    const decided = await waiting;
    assert.deepEqual([decided.outcome, decided.state, decided.approvals.counting_now], ['APPROVED', 'APPROVED', 1]);
    assert.deepEqual(
      decided.approvals.decisions.map((d: Json) => [d.decision, d.actor.kind, d.evidence_ref, d.counts_now]),
      [['APPROVE', 'human', 'CR-42', true]],
    );

    const run = await ok(agent, 'start_execution', { artifact_id: id, version: 1 });
    assert.equal(run.status, 'RUNNING');
    await ok(agent, 'record', { run_id: run.run_id, output: 'stdout.log', content: 'migrated\n' });
    await ok(agent, 'record', { run_id: run.run_id, output: 'stderr.log', content: '' });
    const finished = await ok(agent, 'finish_execution', { run_id: run.run_id, status: 'SUCCEEDED', exit_code: 0 });
    assert.deepEqual([finished.status, finished.exit_code], ['SUCCEEDED', 0]);
    assert.equal((await ok(agent, 'get_status', { artifact_id: id })).state, 'EXECUTED');

    const content = await ok(agent, 'get_content', { artifact_id: id, version: 1 });
    assert.deepEqual([content.verified, content.encoding, content.content, content.content_hash], [true, 'utf8', script, sha256(script)]);
    // What the tools recorded is what the HTTP API serves.
    const log = await fetch(`${alp.url}/v1/executions/${run.run_id}/stdout.log`, { headers: { authorization: `Bearer ${human}` } });
    assert.equal(await log.text(), 'migrated\n');
    const agentApproves = await fetch(`${alp.url}/v1/artifacts/${id}/versions/1/approvals`, {
      method: 'POST',
      headers: { authorization: `Bearer ${agentToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ decision: 'APPROVE', evidence_ref: 'self' }),
    });
    assert.equal(agentApproves.status, 403, 'and the agent cannot decide over HTTP either');
  });

  it('tool errors carry the service code; invalid input names the field; a wait times out', async () => {
    const v = await ok(agent, 'create_artifact', { name: 'pending', filename: 'p.sh', content: 'true\n' });
    const notApproved = await call(agent, 'start_execution', { artifact_id: v.artifact_id, version: 1 });
    assert.deepEqual([notApproved.isError, notApproved.data.error.code], [true, 'ILLEGAL_TRANSITION']);
    assert.match(notApproved.text, /^ILLEGAL_TRANSITION: /);
    const bad = await call(agent, 'create_artifact', { name: 'x', filename: 'x.sh', content: 'x', quorum: 0 });
    assert.equal(bad.isError, true);
    assert.match(bad.text, /quorum/);
    const byPath = await call(agent, 'create_version', { artifact_id: v.artifact_id, path: '/etc/passwd' });
    assert.deepEqual([byPath.isError, byPath.data.error.code], [true, 'INVALID'], 'a path is not read over HTTP');
    await ok(agent, 'propose', { artifact_id: v.artifact_id });
    const timedOut = await ok(agent, 'wait_for_decision', { artifact_id: v.artifact_id, version: 1, timeout_seconds: 1 });
    assert.deepEqual([timedOut.outcome, timedOut.state, timedOut.waited_ms], ['TIMEOUT', 'PROPOSED', 1000]);
  });

  it('/mcp takes the API’s bearer tokens: 401 problem without one or with an unknown one; POST only', async () => {
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    };
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    for (const auth of [undefined, 'Bearer alp_unknownunknownunknownunknown00', 'Basic eDp5']) {
      const r = await fetch(`${alp.url}/mcp`, {
        method: 'POST',
        headers: { ...headers, ...(auth ? { authorization: auth } : {}) },
        body: JSON.stringify(init),
      });
      assert.equal(r.status, 401, String(auth));
      assert.equal(r.headers.get('content-type'), 'application/problem+json');
      assert.equal(((await r.json()) as Json).code, 'UNAUTHENTICATED');
    }
    const get = await fetch(`${alp.url}/mcp`, { headers: { authorization: `Bearer ${agentToken}` } });
    assert.equal(get.status, 405);
    assert.equal(get.headers.get('allow'), 'POST');
    const r = await fetch(`${alp.url}/mcp`, {
      method: 'POST',
      headers: { ...headers, authorization: `Bearer ${agentToken}` },
      body: JSON.stringify(init),
    });
    assert.equal(r.status, 200);
    assert.equal(((await r.json()) as Json).result.serverInfo.name, 'alp');
    const metrics = await (await fetch(`${alp.url}/metrics`)).text();
    assert.match(metrics, /alp_http_requests_total\{[^}]*route="\/mcp"[^}]*\}/);
  });
});
