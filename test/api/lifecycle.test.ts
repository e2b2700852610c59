/**
 * The full lifecycle of DESIGN §5 driven only through the HTTP API, with an agent token and a human
 * token: every state is reached, every write names its principal in the audit chain, the chain
 * verifies, and archived content is still served verified.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sha256, toStructuredDigest } from '../../src/core/digest.ts';
import { VERSION_STATES } from '../../src/lifecycle/state-machine.ts';
import { type ApiResponse, expectStatus, type Harness, startApi } from '../helpers/api-harness.ts';

describe('HTTP API: the whole lifecycle through the API', () => {
  let h: Harness;
  before(async () => {
    h = await startApi();
  });
  after(async () => {
    await h.close();
  });

  const seen = new Set<string>();
  const note = (r: ApiResponse) => {
    for (const state of [r.json?.state, r.json?.version?.state, r.json?.compensated?.state]) if (typeof state === 'string') seen.add(state);
    return r;
  };

  it('walks one artifact through every state with an agent token and a human token', async () => {
    const agent = h.tokens.agent;
    const human = h.tokens.human;
    const ok = async (status: number, method: string, path: string, opts: Parameters<Harness['call']>[2]) =>
      note(expectStatus(await h.call(method, path, opts), status, `${method} ${path}`));
    const move = (id: string, v: number, to: string) =>
      ok(200, 'POST', `/v1/artifacts/${id}/versions/${v}/transitions`, { token: agent, json: { to } });
    const decideAs = (id: string, v: number, decision: string, evidence: string) =>
      ok(201, 'POST', `/v1/artifacts/${id}/versions/${v}/approvals`, { token: human, json: { decision, evidence_ref: evidence } });
    const run = async (id: string, v: number, status: 'SUCCEEDED' | 'FAILED', logs: Record<string, string>) => {
      const started = await ok(201, 'POST', `/v1/artifacts/${id}/versions/${v}/executions`, { token: agent });
      const runId = started.json.run_id as string;
      seen.add('EXECUTING');
      for (const [name, text] of Object.entries(logs)) {
        const up = await ok(201, 'PUT', `/v1/executions/${runId}/${name}`, {
          token: agent,
          body: text,
          headers: { 'repr-digest': toStructuredDigest(sha256(text)) },
        });
        assert.equal(up.json.digest, sha256(text));
      }
      const fin = await ok(200, 'POST', `/v1/executions/${runId}/finish`, {
        token: agent,
        // A failed run here was ended by a signal: the run records its name.
        json: { status, exit_code: status === 'SUCCEEDED' ? 0 : 143, ...(status === 'FAILED' ? { signal: 'SIGTERM' } : {}) },
      });
      assert.equal(fin.json.status, status);
      assert.equal(fin.json.signal, status === 'FAILED' ? 'SIGTERM' : undefined);
      const v1 = (await h.call('GET', `/v1/artifacts/${id}/versions/${v}`, { token: agent })).json;
      seen.add(v1.state);
      return runId;
    };

    const created = await ok(201, 'POST', '/v1/artifacts?name=walk&filename=run.sh&kind=script&label=team=ops', {
      token: agent,
      body: 'echo 1\n',
    });
    const id = created.json.artifact_id as string;
    assert.equal(created.headers.get('location'), `/v1/artifacts/${id}/versions/1`);
    assert.equal(created.json.state, 'DRAFT');
    assert.equal(created.json.content_hash, sha256('echo 1\n'));
    await move(id, 1, 'PROPOSED');
    await move(id, 1, 'DRAFT');
    await move(id, 1, 'PROPOSED');
    const rejected = await decideAs(id, 1, 'REJECT', 'review-1');
    assert.equal(rejected.json.version.state, 'REJECTED');

    const v2 = await ok(201, 'POST', `/v1/artifacts/${id}/versions?filename=run.sh`, { token: agent, body: 'echo 2\n' });
    assert.equal(v2.json.version, 2);
    const step = await ok(201, 'POST', `/v1/artifacts/${id}/provenance`, {
      token: agent,
      json: { action: 'generate', model: 'model-x', outputs: [v2.json.content_hash] },
    });
    assert.equal(step.json.step, 1);
    await move(id, 2, 'PROPOSED');
    const approved = await decideAs(id, 2, 'APPROVE', 'CR-2');
    assert.equal(approved.json.version.state, 'APPROVED');
    assert.equal(approved.json.approval.actor.id, 'alice');
    const run2 = await run(id, 2, 'FAILED', { 'stderr.log': 'boom\n' });

    const c1 = await ok(201, 'POST', `/v1/artifacts/${id}/versions/2/compensations?filename=undo.sh&reason=rollback`, {
      token: agent,
      body: 'undo 2\n',
    });
    assert.equal(c1.json.compensated.state, 'COMPENSATING');
    const c1id = c1.json.compensation.artifact_id as string;
    assert.equal(c1.json.version.content_key, `artifacts/${id}/v2/rollback-undo.sh`);
    await move(c1id, 1, 'PROPOSED');
    await decideAs(c1id, 1, 'APPROVE', 'CR-c1');
    await run(c1id, 1, 'SUCCEEDED', { 'stdout.log': 'undone\n', 'output.json': '{"ok":true}' });
    const afterC1 = await ok(200, 'GET', `/v1/artifacts/${id}/versions/2`, { token: agent });
    assert.equal(afterC1.json.state, 'COMPENSATED');

    await ok(201, 'POST', `/v1/artifacts/${id}/versions?filename=run.sh`, { token: agent, body: 'echo 3\n' });
    await ok(201, 'POST', `/v1/artifacts/${id}/versions?filename=run.sh`, { token: agent, body: 'echo 4\n' });
    await move(id, 4, 'PROPOSED');
    const v3 = await ok(200, 'GET', `/v1/artifacts/${id}/versions/3`, { token: agent });
    assert.equal(v3.json.state, 'SUPERSEDED');
    await decideAs(id, 4, 'APPROVE', 'CR-4');
    await run(id, 4, 'SUCCEEDED', { 'stdout.log': 'four\n' });
    const c2 = await ok(201, 'POST', `/v1/artifacts/${id}/versions/4/compensations?filename=undo4.sh`, { token: agent, body: 'undo 4\n' });
    const c2id = c2.json.compensation.artifact_id as string;
    await move(c2id, 1, 'PROPOSED');
    await decideAs(c2id, 1, 'APPROVE', 'CR-c2');
    await run(c2id, 1, 'FAILED', {});
    assert.equal((await h.call('GET', `/v1/artifacts/${id}/versions/4`, { token: agent })).json.state, 'EXECUTED');

    // Archiving is for humans; the agent is refused and nothing moves.
    expectStatus(await h.call('POST', `/v1/artifacts/${id}/archive`, { token: agent }), 403);
    const archived = await ok(200, 'POST', `/v1/artifacts/${id}/archive`, { token: human });
    assert.ok(archived.json.archived.length >= 8);
    const shown = await ok(200, 'GET', `/v1/artifacts/${id}`, { token: h.tokens.service });
    for (const v of shown.json.versions) seen.add(v.state);
    assert.deepEqual(
      shown.json.versions.map((v: { state: string }) => v.state),
      ['ARCHIVED', 'ARCHIVED', 'ARCHIVED', 'ARCHIVED'],
    );
    assert.deepEqual([...seen].sort(), [...VERSION_STATES].sort(), 'every state of DESIGN §5 was reached');

    // Archived content and outputs are still served, verified, from their archive copies.
    const content = await h.call('GET', `/v1/artifacts/${id}/versions/2/content`, { token: h.tokens.service });
    assert.equal(content.status, 200);
    assert.equal(content.text, 'echo 2\n');
    assert.equal(content.headers.get('etag'), `"${sha256('echo 2\n')}"`);
    const stderr = await h.call('GET', `/v1/executions/${run2}/stderr.log`, { token: h.tokens.service });
    assert.equal(stderr.status, 200);
    assert.equal(stderr.text, 'boom\n');

    // Every write names its principal: the agent or the human whose token made it.
    const hist = await ok(200, 'GET', `/v1/artifacts/${id}/history`, { token: h.tokens.service });
    const actors = new Set<string>();
    for (const e of hist.json.entries as Array<Record<string, unknown>>) {
      // Provenance steps record a free-text `actor` (who did the step) and the principal in `recorded_by`.
      const who = [e.actor, e.started_by, e.uploaded_by, e.finished_by, e.recorded_by, e.created_by].find(
        (x): x is { id: string; kind: string } => typeof x === 'object' && x !== null && 'kind' in x,
      );
      assert.ok(who, `entry ${JSON.stringify(e).slice(0, 200)} names its principal`);
      actors.add(who.id);
    }
    assert.deepEqual([...actors].sort(), ['agent-7', 'alice']);
    const approvals = await ok(200, 'GET', `/v1/artifacts/${id}/approvals`, { token: h.tokens.service });
    assert.deepEqual(
      approvals.json.approvals.map((a: { decision: string; actor: { id: string } }) => `${a.decision}:${a.actor.id}`),
      ['REJECT:alice', 'APPROVE:alice', 'APPROVE:alice'],
    );
    const runs = await ok(200, 'GET', `/v1/artifacts/${id}/executions`, { token: h.tokens.service });
    assert.equal(runs.json.executions.length, 2);
    const verification = await ok(200, 'GET', `/v1/artifacts/${id}/verification`, { token: h.tokens.service });
    assert.equal(verification.json.ok, true, JSON.stringify(verification.json));
    assert.equal(verification.json.content.findings.length, 0);
    const prov = await ok(200, 'GET', `/v1/artifacts/${id}/provenance?format=in-toto`, { token: h.tokens.service });
    assert.equal(prov.json._type, 'https://in-toto.io/Statement/v1');
    // The subjects are what the steps produced (v2's bytes), not every version (issue 20 item 3).
    assert.deepEqual(
      prov.json.subject.map((s: { name: string; digest: { sha256: string } }) => [s.name, `sha256:${s.digest.sha256}`]),
      [['walk@v2/run.sh', v2.json.content_hash]],
    );
    const steps = await ok(200, 'GET', `/v1/artifacts/${id}/provenance`, { token: h.tokens.service });
    assert.equal(steps.json.steps[0].recorded_by.id, 'agent-7');

    // The RFC-012 §9.1 access patterns answer over HTTP too.
    const byApprover = await ok(200, 'GET', '/v1/query/approvals?approver=alice', { token: h.tokens.service });
    assert.ok(byApprover.json.items.length >= 5);
    const transitionsToday = await ok(200, 'GET', '/v1/query/transitions?date=2026-03-01&limit=5', { token: h.tokens.service });
    assert.equal(transitionsToday.json.items.length, 5);
    assert.ok(transitionsToday.json.cursor);
    const compensated = await ok(200, 'GET', '/v1/query/compensations?state=EXECUTED', { token: h.tokens.service });
    assert.ok(compensated.json.items.some((i: { artifact_id: string }) => i.artifact_id === id));
  });

  it('refuses illegal moves with ILLEGAL_TRANSITION (409) and changes nothing', async () => {
    const agent = h.tokens.agent;
    const created = expectStatus(await h.call('POST', '/v1/artifacts?name=strict&filename=a.txt', { token: agent, body: 'a' }), 201);
    const id = created.json.artifact_id as string;
    const before = (await h.call('GET', `/v1/artifacts/${id}/history`, { token: agent })).json.entries.length;
    for (const to of ['APPROVED', 'EXECUTED', 'ARCHIVED', 'nonsense']) {
      const r = await h.call('POST', `/v1/artifacts/${id}/versions/1/transitions`, { token: agent, json: { to } });
      assert.equal(r.headers.get('content-type'), 'application/problem+json');
      if (to === 'nonsense') assert.equal(r.json.code, 'INVALID');
      else {
        assert.equal(r.status, 409);
        assert.equal(r.json.code, 'ILLEGAL_TRANSITION');
      }
    }
    const start = await h.call('POST', `/v1/artifacts/${id}/versions/1/executions`, { token: agent });
    assert.equal(start.status, 409);
    assert.equal(start.json.code, 'ILLEGAL_TRANSITION');
    assert.equal((await h.call('GET', `/v1/artifacts/${id}/history`, { token: agent })).json.entries.length, before);
    const missing = await h.call('GET', '/v1/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV', { token: agent });
    assert.equal(missing.status, 404);
    assert.equal(missing.json.code, 'NOT_FOUND');
  });

  it('counts transitions by target state and requests by route and status in /metrics', async () => {
    const text = (await h.call('GET', '/metrics')).text;
    assert.match(text, /alp_transitions_total\{to="ARCHIVED"\} 4/);
    assert.match(text, /alp_transitions_total\{to="COMPENSATED"\} 1/);
    assert.match(text, /alp_http_requests_total\{method="POST",route="\/v1\/artifacts",status="201"\} \d+/);
    assert.match(
      text,
      /alp_http_request_duration_seconds_bucket\{le="[\d.]+",method="POST",route="\/v1\/artifacts\/:id\/versions\/:v\/approvals",status="201"\}/,
    );
    assert.match(text, /alp_http_request_body_bytes_total\{route="\/v1\/artifacts"\} \d+/);
    assert.match(text, /alp_http_response_body_bytes_total\{route="\/v1\/artifacts\/:id\/versions\/:v\/content"\} \d+/);
    assert.match(text, /alp_http_requests_total\{method="POST",route="\/v1\/artifacts\/:id\/archive",status="403"\} 1/);
    // The telemetry outbox counters: every audit event of the walk was admitted (or dropped when full).
    const accepted = Number(/alp_telemetry_accepted_total (\d+)/.exec(text)?.[1]);
    const dropped = Number(/alp_telemetry_dropped_total (\d+)/.exec(text)?.[1]);
    assert.ok(accepted + dropped > 50, `telemetry: ${accepted} accepted, ${dropped} dropped`);
    assert.match(text, /alp_telemetry_live_records \d+/);
  });
});
