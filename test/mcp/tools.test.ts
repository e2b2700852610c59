/**
 * The MCP tools in-process: the SDK's own Client talks to buildMcpServer over the SDK's in-memory
 * transport, on a real embedded installation (SQLite + a directory) with a manual clock. Human
 * decisions are the real service (decide), as the HTTP route makes them. What the tools promise: the
 * lifecycle an agent walks, bounded waiting that sleeps between reads of the store, verified content,
 * tool errors with the services' stable codes, input validation, and no decision tool at all.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import fc from 'fast-check';
import { sha256 as digestOf } from '../../src/core/digest.ts';
import { setAlias } from '../../src/lifecycle/aliases.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import type { Principal } from '../../src/lifecycle/model.ts';
import { MCP_MAX_INLINE_BYTES } from '../../src/mcp/content.ts';
import { buildMcpServer, MCP_TOOLS, type McpServerOptions } from '../../src/mcp/server.ts';
import { embeddedContext, type TestContext } from '../helpers/context.ts';

const agent: Principal = { id: 'agent-7', kind: 'agent' };
const alice: Principal = { id: 'alice', kind: 'human' };

// biome-ignore lint/suspicious/noExplicitAny: tool results are asserted field by field
type Json = any;

interface Session {
  ctx: TestContext;
  call(name: string, args?: Record<string, unknown>): Promise<{ isError: boolean; data: Json; text: string }>;
  client: Client;
  close(): Promise<void>;
}

const open: Session[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function session(opts: Partial<McpServerOptions> = {}, principal: Principal = agent, ctx?: TestContext): Promise<Session> {
  const context = ctx ?? (await embeddedContext());
  const logged: unknown[] = [];
  const server = buildMcpServer(context, principal, { allowFilePaths: false, log: (e) => logged.push(e), ...opts });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'alp-test', version: '1' });
  await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
  const s: Session = {
    ctx: context,
    client,
    async call(name, args = {}) {
      const r = (await client.callTool({ name, arguments: args })) as Json;
      const text = r.content?.[0]?.text ?? '';
      return { isError: r.isError === true, data: r.structuredContent, text };
    },
    async close() {
      await client.close();
      await server.close();
    },
  };
  open.push(s);
  return s;
}

async function ok(s: Session, name: string, args: Record<string, unknown> = {}): Promise<Json> {
  const r = await s.call(name, args);
  assert.equal(r.isError, false, `${name}: ${r.text}`);
  return r.data;
}

async function refused(s: Session, name: string, args: Record<string, unknown>, code: string): Promise<Json> {
  const r = await s.call(name, args);
  assert.equal(r.isError, true, `${name} should fail with ${code}`);
  assert.equal(r.data?.error?.code, code, r.text);
  assert.ok(r.text.startsWith(`${code}: `), r.text);
  return r.data.error;
}

const approve = (ctx: TestContext, id: string, v: number, expiresInMs = 3_600_000) =>
  decide(ctx, alice, id, v, { decision: 'APPROVE', evidenceRef: 'CR-1', expiresInMs });

describe('MCP tools (in-process, the SDK client)', () => {
  it('lists every tool, none of them a decision, for an agent and for a human alike', async () => {
    for (const who of [agent, alice]) {
      const s = await session({}, who);
      const { tools } = await s.client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), [...MCP_TOOLS].sort());
      assert.ok(!tools.some((t) => /approv|reject|decide/i.test(t.name)), 'no decision tool');
      const create = tools.find((t) => t.name === 'create_artifact') as Json;
      assert.ok(create.inputSchema.properties.content && !create.inputSchema.properties.path, 'no file path without the stdio transport');
      assert.ok(create.description.length > 20);
    }
  });

  it('walks create → propose → status → (a human approves) → run → record → finish, as the agent', async () => {
    const s = await session();
    const v = await ok(s, 'create_artifact', { name: 'deploy', filename: 'deploy.sh', content: 'echo deploy\n', labels: { team: 'ops' } });
    assert.equal(v.state, 'DRAFT');
    assert.equal(v.content_hash, digestOf(Buffer.from('echo deploy\n')));
    assert.deepEqual(v.created_by, agent);
    const id = v.artifact_id as string;
    assert.equal((await ok(s, 'propose', { artifact_id: id, reason: 'ready' })).state, 'PROPOSED');
    const before = await ok(s, 'get_status', { artifact_id: id });
    assert.deepEqual(
      [before.state, before.approvals.counting_now, before.approvals.quorum, before.approvals.decisions],
      ['PROPOSED', 0, 1, []],
    );
    assert.match(before.next, /wait_for_decision/);
    await approve(s.ctx, id, 1);
    const after = await ok(s, 'get_status', { artifact_id: id, version: 1 });
    assert.equal(after.state, 'APPROVED');
    assert.equal(after.approvals.counting_now, 1);
    assert.deepEqual(
      after.approvals.decisions.map((d: Json) => [d.decision, d.actor.id, d.counted, d.counts_now]),
      [['APPROVE', 'alice', true, true]],
    );
    // A human's alias (issue 20 item 6) is taken where a version is; an unknown one is NOT_FOUND.
    await setAlias(s.ctx, alice, id, 'prod', 1);
    assert.equal((await ok(s, 'get_status', { artifact_id: id, version: '@prod' })).state, 'APPROVED');
    await refused(s, 'get_status', { artifact_id: id, version: '@nope' }, 'NOT_FOUND');
    const run = await ok(s, 'start_execution', { artifact_id: id, version: '@prod' });
    assert.equal(run.status, 'RUNNING');
    const out = await ok(s, 'record', { run_id: run.run_id, output: 'stdout.log', content: 'deployed\n' });
    assert.equal(out.digest, digestOf(Buffer.from('deployed\n')));
    await ok(s, 'record', {
      run_id: run.run_id,
      output: 'output.json',
      content: Buffer.from('{"ok":true}').toString('base64'),
      encoding: 'base64',
    });
    const done = await ok(s, 'finish_execution', { run_id: run.run_id, status: 'SUCCEEDED', exit_code: 0 });
    assert.deepEqual([done.status, done.exit_code, Object.keys(done.outputs).sort()], ['SUCCEEDED', 0, ['output.json', 'stdout.log']]);
    assert.equal((await ok(s, 'get_execution', { run_id: run.run_id })).status, 'SUCCEEDED');
    assert.equal((await ok(s, 'get_status', { artifact_id: id })).state, 'EXECUTED');
    const step = await ok(s, 'add_provenance', { artifact_id: id, action: 'generate', model: 'm-1', outputs: [v.content_hash] });
    assert.deepEqual([step.action, step.actor, step.recorded_by], ['generate', 'agent-7', agent]);
    const listed = await ok(s, 'list_versions', { artifact_id: id });
    assert.deepEqual([listed.name, listed.labels, listed.versions.length], ['deploy', { team: 'ops' }, 1]);
    const byName = await ok(s, 'list_artifacts', { name: 'deploy' });
    assert.deepEqual(
      byName.items.map((a: Json) => a.artifact_id),
      [id],
    );
    const day = s.ctx.clock.now().toISOString().slice(0, 10);
    const transitions = await ok(s, 'query', { kind: 'transitions', key: day });
    assert.ok(transitions.items.some((t: Json) => t.to === 'EXECUTED'));
  });

  it('wait_for_decision reads the store, sleeps one poll between reads, and ends at the decision', async () => {
    const ctx = await embeddedContext();
    const sleeps: number[] = [];
    let id = '';
    // The test's sleep: returns at once, and a human approves during the third one.
    const sleep = async (ms: number) => {
      sleeps.push(ms);
      if (sleeps.length === 3) await approve(ctx, id, 1);
    };
    const s = await session({ sleep, pollMs: 500 }, agent, ctx);
    id = (await ok(s, 'create_artifact', { name: 'w', filename: 'w.sh', content: 'true\n' })).artifact_id;
    await ok(s, 'propose', { artifact_id: id });
    const r = await ok(s, 'wait_for_decision', { artifact_id: id, version: 1, timeout_seconds: 30 });
    assert.deepEqual([r.outcome, r.state, r.waited_ms, r.approvals.counting_now], ['APPROVED', 'APPROVED', 1500, 1]);
    assert.deepEqual(sleeps, [500, 500, 500]);
  });

  it('wait_for_decision is bounded: TIMEOUT after timeout_seconds of sleeping, a maximum, and no wait for a settled version', async () => {
    const sleeps: number[] = [];
    const s = await session({ sleep: async (ms) => void sleeps.push(ms), pollMs: 1000 });
    const id = (await ok(s, 'create_artifact', { name: 't', filename: 't.sh', content: 'true\n' })).artifact_id;
    const draft = await ok(s, 'wait_for_decision', { artifact_id: id, version: 1, timeout_seconds: 5 });
    assert.deepEqual([draft.outcome, draft.waited_ms, sleeps.length], ['DRAFT', 0, 0], 'nothing to wait for');
    await ok(s, 'propose', { artifact_id: id });
    const r = await ok(s, 'wait_for_decision', { artifact_id: id, version: 1, timeout_seconds: 2.5 });
    assert.deepEqual([r.outcome, r.state, r.waited_ms], ['TIMEOUT', 'PROPOSED', 2500]);
    assert.deepEqual(sleeps, [1000, 1000, 500]);
    const tooLong = await s.call('wait_for_decision', { artifact_id: id, version: 1, timeout_seconds: 51 });
    assert.equal(tooLong.isError, true);
    assert.match(tooLong.text, /timeout_seconds/);
  });

  it('get_status tells a decision counted when given from one that counts now (expired on the clock)', async () => {
    const s = await session();
    const id = (await ok(s, 'create_artifact', { name: 'e', filename: 'e.sh', content: 'true\n' })).artifact_id;
    await ok(s, 'propose', { artifact_id: id });
    await approve(s.ctx, id, 1, 60_000);
    s.ctx.clock.advance(120_000);
    const st = await ok(s, 'get_status', { artifact_id: id });
    assert.equal(st.state, 'APPROVED');
    assert.deepEqual(
      st.approvals.decisions.map((d: Json) => [d.counted, d.counts_now]),
      [[true, false]],
    );
    assert.equal(st.approvals.counting_now, 0);
    // The service's rule, with its code: the run is refused until a new round is approved.
    const e = await refused(s, 'start_execution', { artifact_id: id, version: 1 }, 'CONFLICT');
    assert.match(e.message, /valid approval/);
    assert.deepEqual([e.details.valid, e.details.quorum], [0, 1]);
  });

  it('service errors are tool errors carrying their stable code', async () => {
    const s = await session();
    await refused(s, 'get_status', { artifact_id: '01ARZ3NDEKTSV4RRFFQ69G5FAV' }, 'NOT_FOUND');
    const id = (await ok(s, 'create_artifact', { name: 'c', filename: 'c.sh', content: 'true\n' })).artifact_id;
    await refused(s, 'start_execution', { artifact_id: id, version: 1 }, 'ILLEGAL_TRANSITION');
    await refused(s, 'create_artifact', { name: 'c2', filename: 'c.sh', content: 'x', labels: { 'bad key': 'v' } }, 'INVALID');
    await refused(s, 'create_artifact', { name: 'd', filename: 'd.sh', content: 'x', digest: digestOf(Buffer.from('y')) }, 'INTEGRITY');
    await refused(s, 'add_provenance', { artifact_id: id, action: 'x', inputs: ['md5:abc'] }, 'INVALID');
    await ok(s, 'propose', { artifact_id: id });
    await approve(s.ctx, id, 1);
    const run = await ok(s, 'start_execution', { artifact_id: id, version: 1 });
    await ok(s, 'record', { run_id: run.run_id, output: 'stderr.log', content: 'one\n' });
    await refused(s, 'record', { run_id: run.run_id, output: 'stderr.log', content: 'two\n' }, 'CONFLICT');
    // A service principal reads, and the services refuse its writes.
    const reader = await session({}, { id: 'exporter', kind: 'service' }, s.ctx);
    assert.equal((await ok(reader, 'get_status', { artifact_id: id })).state, 'EXECUTING');
    await refused(reader, 'create_artifact', { name: 'r', filename: 'r.sh', content: 'x' }, 'FORBIDDEN');
  });

  it('refuses invalid input with a message naming the field, before any service runs', async () => {
    const s = await session();
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['create_artifact', { filename: 'a.sh', content: 'x' }, /name/],
      ['create_artifact', { name: 'a', filename: 'a.sh', content: 'x', quorum: 'two' }, /quorum/],
      ['create_artifact', { name: 'a', filename: 'a.sh', content: 'x', encoding: 'hex' }, /encoding/],
      ['finish_execution', { run_id: 'r', status: 'DONE', exit_code: 0 }, /status/],
      ['finish_execution', { run_id: 'r', status: 'FAILED', exit_code: 1.5 }, /exit_code/],
      ['record', { run_id: 'r', output: 'other.log', content: 'x' }, /output/],
      ['query', { kind: 'everything', key: 'x' }, /kind/],
    ];
    for (const [tool, args, field] of cases) {
      const r = await s.call(tool, args);
      assert.equal(r.isError, true, `${tool} ${JSON.stringify(args)}`);
      assert.match(r.text, /Input validation error/);
      assert.match(r.text, field);
    }
    assert.equal((await s.ctx.items.scan()).items.filter((i) => i.type === 'version').length, 0);
    // Checked by the tools themselves, with the INVALID / TOO_LARGE codes.
    await refused(s, 'create_artifact', { name: 'a', filename: 'a.sh' }, 'INVALID');
    await refused(s, 'create_artifact', { name: 'a', content: 'x' }, 'INVALID');
    await refused(s, 'create_artifact', { name: 'a', filename: 'a', content: 'not base64!', encoding: 'base64' }, 'INVALID');
    const big = await refused(
      s,
      'create_artifact',
      { name: 'a', filename: 'a', content: 'x'.repeat(MCP_MAX_INLINE_BYTES + 1) },
      'TOO_LARGE',
    );
    assert.deepEqual([big.details.size, big.details.limit], [MCP_MAX_INLINE_BYTES + 1, MCP_MAX_INLINE_BYTES]);
  });

  it('get_content returns verified bytes (text or base64), refuses damaged bytes and big ones', async () => {
    const s = await session({ maxReadBytes: 64 });
    const v = await ok(s, 'create_artifact', { name: 'g', filename: 'g.txt', content: 'héllo\n' });
    const got = await ok(s, 'get_content', { artifact_id: v.artifact_id });
    assert.deepEqual([got.encoding, got.content, got.verified, got.content_hash], ['utf8', 'héllo\n', true, v.content_hash]);
    assert.equal(
      (await ok(s, 'get_content', { artifact_id: v.artifact_id, encoding: 'base64' })).content,
      Buffer.from('héllo\n').toString('base64'),
    );
    const bin = await ok(s, 'create_version', { artifact_id: v.artifact_id, filename: 'g.bin', content: 'AP8A/w==', encoding: 'base64' });
    assert.equal(bin.version, 2);
    const raw = await ok(s, 'get_content', { artifact_id: v.artifact_id, version: 2 });
    assert.deepEqual([raw.encoding, raw.content], ['base64', 'AP8A/w==']);
    await refused(s, 'get_content', { artifact_id: v.artifact_id, version: 2, encoding: 'utf8' }, 'INVALID');
    const file = path.join(s.ctx.contentRoot, v.content_key);
    const bytes = fs.readFileSync(file);
    bytes[0] = 0x48;
    fs.writeFileSync(file, bytes);
    await refused(s, 'get_content', { artifact_id: v.artifact_id, version: 1 }, 'INTEGRITY');
    const large = await ok(s, 'create_version', { artifact_id: v.artifact_id, filename: 'l.txt', content: 'x'.repeat(65) });
    const e = await refused(s, 'get_content', { artifact_id: v.artifact_id, version: large.version }, 'TOO_LARGE');
    assert.match(e.message, new RegExp(`GET /v1/artifacts/${v.artifact_id}/versions/3/content`));
  });

  it('any bytes sent inline come back the same from get_content (property)', async () => {
    const s = await session();
    const id = (await ok(s, 'create_artifact', { name: 'p', filename: 'p', content: '0' })).artifact_id;
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 2048 }), fc.boolean(), async (data, asText) => {
        const bytes = Buffer.from(data);
        const text = bytes.toString('utf8');
        const sendText = asText && Buffer.from(text).equals(bytes);
        const sent = sendText ? { content: text } : { content: bytes.toString('base64'), encoding: 'base64' };
        const v = await ok(s, 'create_version', { artifact_id: id, filename: 'p', ...sent });
        assert.equal(v.content_hash, digestOf(bytes));
        const back = await ok(s, 'get_content', { artifact_id: id, version: v.version, encoding: 'base64' });
        assert.ok(Buffer.from(back.content, 'base64').equals(bytes));
      }),
      { numRuns: 25 },
    );
  });
});
