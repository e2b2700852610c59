/**
 * Read-only status over HTTP: versions per state (matching the listings), and the operations figures
 * (telemetry outbox counters, retention observations and runs, integrity failures, transitions). They
 * change nothing, and retention's run records reach the browser without the restore they name.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildServer } from '../../src/api/server.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { sha256, toStructuredDigest } from '../../src/core/digest.ts';
import { INSTALLATION_SK, SYS_PK } from '../../src/core/keys.ts';
import { createToken } from '../../src/lifecycle/principals.ts';
import { VERSION_STATES } from '../../src/lifecycle/state-machine.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import { STATE_COUNTS_EXACT } from '../../src/system/installation.ts';
import { call, expectStatus, type Harness, startApi } from '../helpers/api-harness.ts';
import { embedded, epochOf, host, operator } from '../helpers/retention-harness.ts';
import { bytesOf } from '../helpers/tmp.ts';

describe('HTTP: read-only status', () => {
  let h: Harness;
  before(async () => {
    h = await startApi();
  });
  after(async () => {
    await h.close();
  });

  const create = async (name: string, body: string) =>
    expectStatus(await h.call('POST', `/v1/artifacts?name=${name}&filename=f.txt`, { token: h.tokens.agent, body }), 201).json;

  it('counts versions per state as the listings do', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create(`s-${i}`, `body ${i}\n`)).artifact_id);
    for (const id of ids.slice(0, 3))
      expectStatus(
        await h.call('POST', `/v1/artifacts/${id}/versions/1/transitions`, { token: h.tokens.agent, json: { to: 'PROPOSED' } }),
        200,
      );
    expectStatus(
      await h.call('POST', `/v1/artifacts/${ids[0]}/versions/1/approvals`, {
        token: h.tokens.human,
        json: { decision: 'REJECT', evidence_ref: 'r' },
      }),
      201,
    );
    const r = expectStatus(await h.call('GET', '/v1/status/states', { token: h.tokens.service }), 200).json;
    assert.deepEqual(Object.keys(r.states), [...VERSION_STATES]);
    assert.equal(r.states.DRAFT, 2);
    assert.equal(r.states.PROPOSED, 2);
    assert.equal(r.states.REJECTED, 1);
    assert.equal(r.total, 5);
    assert.equal(r.exact, true);
    assert.equal(r.source, 'counters', 'from the per-state counters (issue 18)');
    for (const state of VERSION_STATES) {
      const listed = (await h.call('GET', `/v1/artifacts?state=${state}&limit=1000`, { token: h.tokens.service })).json.items.length;
      assert.equal(r.states[state], listed, state);
    }
  });

  it('answers from the state index, with the same counts, on an installation whose counters were never backfilled', async () => {
    const key = { PK: SYS_PK, SK: INSTALLATION_SK };
    const counted = expectStatus(await h.call('GET', '/v1/status/states', { token: h.tokens.service }), 200).json;
    await h.ctx.items.update(key, { remove: ['state_counts'] });
    try {
      const paged = expectStatus(await h.call('GET', '/v1/status/states', { token: h.tokens.service }), 200).json;
      assert.equal(paged.source, 'index');
      assert.equal(paged.exact, true);
      assert.deepEqual(paged.states, counted.states);
    } finally {
      await h.ctx.items.update(key, { set: { state_counts: STATE_COUNTS_EXACT } });
    }
  });

  it('reports the telemetry outbox, integrity failures and transitions, and changes nothing', async () => {
    const bad = await h.call('POST', '/v1/artifacts?name=tampered&filename=f.txt', {
      token: h.tokens.agent,
      body: 'real bytes',
      headers: { 'repr-digest': toStructuredDigest(sha256('other bytes')) },
    });
    assert.equal(bad.status, 400);
    const first = expectStatus(await h.call('GET', '/v1/status/operations', { token: h.tokens.agent }), 200).json;
    assert.equal(first.integrity_failures.total, 1);
    assert.deepEqual(first.integrity_failures.by_operation, { upload: 1 });
    assert.ok(first.telemetry.accepted > 0, JSON.stringify(first.telemetry));
    assert.equal(
      first.telemetry.live_records,
      first.telemetry.accepted - first.telemetry.delivered - first.telemetry.dropped - first.telemetry.exhausted,
    );
    assert.ok(first.telemetry.limits.maxRecords > 0);
    assert.ok(first.transitions.total >= 8, JSON.stringify(first.transitions));
    assert.equal(first.transitions.by_state.PROPOSED, 3);
    assert.deepEqual(first.retention, { observations: {}, recent_runs: [] });
    assert.equal(first.uploads_in_flight, 0);
    assert.ok(Date.parse(first.since) <= Date.parse(first.at));
    const again = expectStatus(await h.call('GET', '/v1/status/operations', { token: h.tokens.human }), 200).json;
    assert.equal(again.telemetry.accepted, first.telemetry.accepted, 'reading the status writes no audit entry');
    assert.deepEqual(again.transitions, first.transitions);
    // Read-only: no other method.
    const post = await h.call('POST', '/v1/status/operations', { token: h.tokens.human, json: {} });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get('allow'), 'GET, HEAD');
  });
});

describe('HTTP: retention status', () => {
  it('shows observations and recent runs, without the restore location a run names', async () => {
    const i = await embedded.open();
    try {
      await i.ctx.content.put('artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV/v1/orphan.bin', bytesOf('nobody names me'));
      const restore = await i.verifiedRestore();
      const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
      try {
        // The first run starts the grace period; the one after it quarantines (and is journaled).
        await retention.run(await epochOf(i.ctx), 'QUARANTINE', host(i.ctx, { restore }));
        i.ctx.clock.advance(7 * DAY_MS);
        await retention.run(await epochOf(i.ctx), 'QUARANTINE', host(i.ctx, { restore }));
      } finally {
        await retention.close();
      }
      const token = (await createToken(i.ctx, { principal: 'dash', kind: 'service' }, operator)).token;
      const server = await buildServer(i.ctx, { logger: false, processMetrics: false, webRoot: false });
      const url = await server.listen('127.0.0.1', 0);
      try {
        const r = expectStatus(await call(url, 'GET', '/v1/status/operations', { token }), 200);
        const retentionStatus = r.json.retention;
        assert.deepEqual(Object.keys(retentionStatus.observations), ['QUARANTINED'], JSON.stringify(r.json.retention));
        assert.equal(retentionStatus.observations.QUARANTINED.count, 1);
        assert.equal(retentionStatus.observations.QUARANTINED.bytes, Buffer.byteLength('nobody names me'));
        assert.equal(retentionStatus.recent_runs.length, 1);
        const run = retentionStatus.recent_runs[0];
        assert.equal(run.action, 'QUARANTINE');
        assert.equal(run.approved_by.id, operator.id);
        assert.equal(run.evidence_ref, 'CHG-1');
        assert.equal('restore' in run, false);
        assert.ok(!r.text.includes(restore), 'the restore location stays on the server');
        assert.ok(!r.text.includes(i.ctx.content.location), 'the content root stays on the server');
      } finally {
        await server.shutdown(1000);
      }
    } finally {
      await i.close();
    }
  });
});
