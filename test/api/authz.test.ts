/**
 * The authorization matrix, table-driven from src/api/access.ts: every route × no token, an unknown
 * token, and a token of each principal kind. Allowed kinds get 2xx, the others 403, missing or unknown
 * tokens 401 (public routes: 2xx for everyone). Each call gets a fresh fixture, so a 2xx is the real
 * operation succeeding, not a leftover.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Access, allows, ROUTES, type RouteId } from '../../src/api/access.ts';
import { checkpointNow } from '../../src/audit/tlog/checkpoint-now.ts';
import { locateEntry } from '../../src/audit/tlog/proofs.ts';
import { setAlias } from '../../src/lifecycle/aliases.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { finishExecution, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import type { PrincipalKind } from '../../src/lifecycle/model.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { type CallOptions, type Harness, startApi } from '../helpers/api-harness.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';

type Caller = 'none' | 'unknown' | PrincipalKind;
const CALLERS: Caller[] = ['none', 'unknown', 'human', 'agent', 'service'];

interface Req {
  path: string;
  opts?: CallOptions;
}

describe('HTTP API: authorization matrix (every route × every principal kind)', () => {
  let h: Harness;
  let n = 0;
  before(async () => {
    h = await startApi();
  });
  after(async () => {
    await h.close();
  });

  const artifact = async (state: 'DRAFT' | 'PROPOSED' | 'APPROVED' | 'REJECTED' = 'DRAFT') => {
    const { version } = await createArtifact(h.ctx, agent, { name: `m-${n++}`, filename: 'f.txt', body: bytesOf('matrix\n') });
    const id = version.artifact_id;
    if (state !== 'DRAFT') await propose(h.ctx, agent, id, 1);
    if (state === 'APPROVED') await decide(h.ctx, alice, id, 1, { decision: 'APPROVE', evidenceRef: 'm' });
    if (state === 'REJECTED') await decide(h.ctx, alice, id, 1, { decision: 'REJECT', evidenceRef: 'm' });
    return id;
  };
  const running = async () => {
    const id = await artifact('APPROVED');
    return (await startExecution(h.ctx, agent, id, 1)).run_id;
  };
  const executed = async () => {
    const id = await artifact('APPROVED');
    const run = await startExecution(h.ctx, agent, id, 1);
    await finishExecution(h.ctx, agent, run.run_id, { status: 'SUCCEEDED', exitCode: 0 });
    return id;
  };
  const aliased = async () => {
    const id = await artifact('APPROVED');
    await setAlias(h.ctx, alice, id, 'prod', 1);
    return id;
  };
  /** A new artifact whose creation the transparency log has sequenced (one round, as alp audit checkpoint runs). */
  const sequenced = async () => {
    const id = await artifact();
    await checkpointNow(h.ctx);
    return locateEntry(h.ctx, id, 1) as Promise<{ artifact_id: string; leaf_index: number }>;
  };
  const withOutput = async () => {
    const run = await running();
    await uploadOutput(h.ctx, agent, run, 'stdout.log', bytesOf('out\n'));
    return run;
  };

  /** A request that succeeds for an allowed caller: one fixture per call. */
  const FIXTURES: Record<RouteId, () => Promise<Req>> = {
    health: async () => ({ path: '/healthz' }),
    ready: async () => ({ path: '/readyz' }),
    metrics: async () => ({ path: '/metrics' }),
    openapi: async () => ({ path: '/openapi.json' }),
    docs: async () => ({ path: '/docs' }),
    whoami: async () => ({ path: '/v1/whoami' }),
    listArtifacts: async () => ({ path: '/v1/artifacts?limit=5' }),
    createArtifact: async () => ({ path: `/v1/artifacts?name=new-${n++}&filename=a.txt`, opts: { body: 'new\n' } }),
    showArtifact: async () => ({ path: `/v1/artifacts/${await artifact()}` }),
    history: async () => ({ path: `/v1/artifacts/${await artifact()}/history` }),
    verification: async () => ({ path: `/v1/artifacts/${await artifact()}/verification` }),
    listVersions: async () => ({ path: `/v1/artifacts/${await artifact()}/versions` }),
    addVersion: async () => ({ path: `/v1/artifacts/${await artifact()}/versions?filename=a.txt`, opts: { body: 'v2\n' } }),
    showVersion: async () => ({ path: `/v1/artifacts/${await artifact()}/versions/1` }),
    getContent: async () => ({ path: `/v1/artifacts/${await artifact()}/versions/1/content` }),
    headContent: async () => ({ path: `/v1/artifacts/${await artifact()}/versions/1/content` }),
    transition: async () => ({ path: `/v1/artifacts/${await artifact()}/versions/1/transitions`, opts: { json: { to: 'PROPOSED' } } }),
    decide: async () => ({
      path: `/v1/artifacts/${await artifact('PROPOSED')}/versions/1/approvals`,
      opts: { json: { decision: 'APPROVE', evidence_ref: 'CR-1' } },
    }),
    listApprovals: async () => ({ path: `/v1/artifacts/${await artifact('PROPOSED')}/approvals` }),
    listAttestations: async () => ({ path: `/v1/artifacts/${await artifact('APPROVED')}/versions/1/attestations` }),
    keys: async () => ({ path: '/v1/keys' }),
    startExecution: async () => ({ path: `/v1/artifacts/${await artifact('APPROVED')}/versions/1/executions` }),
    listExecutions: async () => ({ path: `/v1/artifacts/${await artifact()}/executions` }),
    compensate: async () => ({
      path: `/v1/artifacts/${await executed()}/versions/1/compensations?filename=undo.sh`,
      opts: { body: 'undo\n' },
    }),
    getProvenance: async () => ({ path: `/v1/artifacts/${await artifact()}/provenance` }),
    addProvenance: async () => ({ path: `/v1/artifacts/${await artifact()}/provenance`, opts: { json: { action: 'review' } } }),
    archive: async () => ({ path: `/v1/artifacts/${await artifact('REJECTED')}/archive` }),
    listAliases: async () => ({ path: `/v1/artifacts/${await aliased()}/aliases` }),
    setAlias: async () => ({ path: `/v1/artifacts/${await artifact('APPROVED')}/aliases/prod`, opts: { json: { version: 1 } } }),
    removeAlias: async () => ({ path: `/v1/artifacts/${await aliased()}/aliases/prod` }),
    search: async () => ({ path: '/v1/search?name_prefix=m-&limit=5' }),
    showExecution: async () => ({ path: `/v1/executions/${await running()}` }),
    uploadOutput: async () => ({ path: `/v1/executions/${await running()}/stdout.log`, opts: { body: 'log\n' } }),
    getOutput: async () => ({ path: `/v1/executions/${await withOutput()}/stdout.log` }),
    headOutput: async () => ({ path: `/v1/executions/${await withOutput()}/stdout.log` }),
    finishExecution: async () => ({
      path: `/v1/executions/${await running()}/finish`,
      opts: { json: { status: 'SUCCEEDED', exit_code: 0 } },
    }),
    queryTransitions: async () => ({ path: '/v1/query/transitions?date=2026-03-01' }),
    queryApprovals: async () => ({ path: '/v1/query/approvals?approver=alice' }),
    queryRuns: async () => ({ path: '/v1/query/runs?date=2026-03-01' }),
    queryProvenance: async () => ({ path: '/v1/query/provenance?date=2026-03-01' }),
    queryCompensations: async () => ({ path: '/v1/query/compensations?state=DRAFT' }),
    statusStates: async () => ({ path: '/v1/status/states' }),
    statusOperations: async () => ({ path: '/v1/status/operations' }),
    getPolicy: async () => ({ path: `/v1/policy?artifact_id=${await artifact('PROPOSED')}&version=1` }),
    setPolicy: async () => ({ path: '/v1/policy', opts: { json: { policy: { self_approval: 'not-counted' }, reason: 'authz' } } }),
    policyLog: async () => ({ path: '/v1/policy/log' }),
    logCheckpoint: async () => {
      await sequenced();
      return { path: '/v1/log/checkpoint' };
    },
    logInclusion: async () => ({ path: `/v1/log/proof/inclusion?leaf=${(await sequenced()).leaf_index}` }),
    logConsistency: async () => ({ path: `/v1/log/proof/consistency?from=${(await sequenced()).leaf_index + 1}` }),
    logEntry: async () => ({ path: `/v1/log/entry?artifact=${(await sequenced()).artifact_id}&seq=1` }),
  };

  it('has a fixture for every route of the table', () => {
    assert.deepEqual(Object.keys(FIXTURES).sort(), Object.keys(ROUTES).sort());
  });

  for (const [id, spec] of Object.entries(ROUTES) as Array<[RouteId, (typeof ROUTES)[RouteId]]>) {
    const access = spec.access as Access;
    it(`${spec.method} ${spec.url}: ${access === 'public' ? 'public' : access.join(', ')}`, async () => {
      for (const caller of CALLERS) {
        const req = await FIXTURES[id]();
        const token = caller === 'none' ? undefined : caller === 'unknown' ? 'alp_this-token-was-never-issued' : h.tokens[caller];
        const r = await h.call(spec.method, req.path, { ...req.opts, token });
        const kind = caller === 'none' || caller === 'unknown' ? undefined : caller;
        const what = `${spec.method} ${req.path} as ${caller}`;
        if (access === 'public' || allows(id, kind)) {
          assert.ok(r.status >= 200 && r.status < 300, `${what}: expected 2xx, got ${r.status} ${r.text.slice(0, 300)}`);
        } else {
          const expected = kind === undefined ? 401 : 403;
          assert.equal(r.status, expected, `${what}: expected ${expected}, got ${r.status} ${r.text.slice(0, 300)}`);
          assert.equal(r.headers.get('content-type'), 'application/problem+json', what);
          if (spec.method !== 'HEAD') {
            assert.equal(r.json.code, expected === 401 ? 'UNAUTHENTICATED' : 'FORBIDDEN', what);
            assert.equal(r.json.status, expected);
          }
          if (expected === 401) assert.match(r.headers.get('www-authenticate') ?? '', /^Bearer/);
        }
      }
    });
  }

  it('rejects malformed Authorization headers and unknown tokens with 401', async () => {
    for (const header of ['Basic YWxpY2U6cHc=', 'Bearer', 'Bearer  ', `Bearer ${h.tokens.human} extra`, 'alp_x', 'Bearer alp_revoked']) {
      const r = await h.call('GET', '/v1/whoami', { headers: { authorization: header } });
      assert.equal(r.status, 401, header);
      assert.equal(r.json.code, 'UNAUTHENTICATED');
    }
    const ok = await h.call('GET', '/v1/whoami', { headers: { authorization: `bearer ${h.tokens.service}` } });
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.json.principal, { id: 'exporter', kind: 'service' });
  });

  it('has no route for retention, recovery, telemetry claims or token administration', async () => {
    for (const path of [
      '/v1/tokens',
      '/v1/retention',
      '/v1/retention/run',
      '/v1/telemetry/claim',
      '/v1/backup',
      '/v1/restore',
      '/v1/epoch',
    ]) {
      for (const method of ['GET', 'POST']) {
        const r = await h.call(method, path, { token: h.tokens.human, json: method === 'POST' ? {} : undefined });
        assert.equal(r.status, 404, `${method} ${path}`);
        assert.equal(r.json.code, 'NOT_FOUND');
      }
    }
    const paths = Object.values(ROUTES).map((r) => r.url);
    assert.ok(!paths.some((p) => /token|retention|recover|restore|backup|epoch|telemetry/.test(p)));
  });
});
