/**
 * The response schemas are true and tight (issue 19 A2): a walk-through against the real server
 * (create, version, propose, approve, execute with outputs, compensate, provenance, lists, queries,
 * status, metrics, archive) validates every JSON body it gets against the schema its route declares in
 * the route contract, with ajv (an independent validator: fastify's, not TypeBox's own checker);
 * the bogus values of the issue (`state: "BOGUS"`, `content_hash: "md5:x"`, `created_at: "yesterday"`,
 * `size: -5`, an unknown property on the provenance answer) are rejected by the same schemas; and
 * `/metrics` is declared with the media type it is served with.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { ROUTES, type RouteId } from '../../src/api/access.ts';
import { CONTRACT, type ContractEntry } from '../../src/api/contract.ts';
import { SHARED_SCHEMAS } from '../../src/api/schemas.ts';
import { checkpointNow } from '../../src/audit/tlog/checkpoint-now.ts';
import { sha256, toStructuredDigest } from '../../src/core/digest.ts';
import { executionView, readExecution } from '../../src/lifecycle/executions.ts';
import { readVersion, versionView } from '../../src/lifecycle/versions.ts';
import { type ApiResponse, expectStatus, type Harness, startApi } from '../helpers/api-harness.ts';

const require = createRequire(import.meta.url);
const { Ajv } = require('ajv') as typeof import('ajv');
const addFormats = require('ajv-formats') as (ajv: InstanceType<typeof Ajv>) => void;

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
for (const s of SHARED_SCHEMAS) ajv.addSchema(s as object);
const compiled = new Map<string, ValidateFunction>();

function validatorOf(route: RouteId, status: number): ValidateFunction {
  const key = `${route} ${status}`;
  let v = compiled.get(key);
  if (!v) {
    const schema = (CONTRACT[route] as ContractEntry).schema.response?.[status];
    assert.ok(schema, `${route} declares a ${status} response`);
    v = ajv.compile(schema as object);
    compiled.set(key, v);
  }
  return v;
}

const explain = (errors: ErrorObject[] | null | undefined) =>
  (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`).join('; ');

function accepts(route: RouteId, status: number, body: unknown): boolean {
  return validatorOf(route, status)(body) === true;
}

describe('the response schemas, checked by ajv against real answers', () => {
  let h: Harness;
  const checked = new Set<RouteId>();
  const bodies = new Map<RouteId, unknown>();
  /** The JSON form of getProvenance (the in-toto form is the last getProvenance body). */
  let provenanceChain: unknown;
  before(async () => {
    h = await startApi();
  });
  after(async () => {
    await h.close();
  });

  /** Calls the route, expects its declared success status and checks the body against its schema. */
  async function check(route: RouteId, status: number, path: string, opts: Parameters<Harness['call']>[2] = {}): Promise<ApiResponse> {
    const spec = ROUTES[route];
    const r = expectStatus(await h.call(spec.method, path, opts), status, `${route} ${path}`);
    const validate = validatorOf(route, status);
    assert.ok(
      validate(r.json),
      `${route}: the real answer does not match its schema: ${explain(validate.errors)}\n${r.text.slice(0, 800)}`,
    );
    checked.add(route);
    bodies.set(route, r.json);
    return r;
  }

  it('every JSON answer of a whole walk-through matches the schema its route declares', async () => {
    const agent = { token: h.tokens.agent };
    const human = { token: h.tokens.human };
    const body = 'echo deploy\n';
    const created = await check('createArtifact', 201, '/v1/artifacts?name=walk&filename=run.sh&kind=script&label=team=ops', {
      ...agent,
      body,
      headers: { 'repr-digest': toStructuredDigest(sha256(body)), 'idempotency-key': '"walk-1"' },
    });
    const id = created.json.artifact_id as string;
    await check('addVersion', 201, `/v1/artifacts/${id}/versions?filename=run.sh`, { ...agent, body: 'echo v2\n' });
    await check('transition', 200, `/v1/artifacts/${id}/versions/2/transitions`, { ...agent, json: { to: 'PROPOSED', reason: 'ready' } });
    await check('decide', 201, `/v1/artifacts/${id}/versions/2/approvals`, {
      ...human,
      json: { decision: 'APPROVE', evidence_ref: 'review-1', expires_in: '7d', comment: 'fine' },
    });
    const started = await check('startExecution', 201, `/v1/artifacts/${id}/versions/2/executions`, agent);
    const run = started.json.run_id as string;
    await check('uploadOutput', 201, `/v1/executions/${run}/stdout.log`, { ...agent, body: 'deployed\n' });
    await check('uploadOutput', 201, `/v1/executions/${run}/output.json`, { ...agent, body: '{"ok":true}' });
    await check('finishExecution', 200, `/v1/executions/${run}/finish`, { ...agent, json: { status: 'SUCCEEDED', exit_code: 0 } });
    await check('showExecution', 200, `/v1/executions/${run}`, agent);
    await check('listExecutions', 200, `/v1/artifacts/${id}/executions`, agent);
    await check('addProvenance', 201, `/v1/artifacts/${id}/provenance`, {
      ...agent,
      json: { action: 'generate', model: 'model-x', tool: 'agent', inputs: [sha256('prompt')], outputs: [created.json.content_hash] },
    });
    provenanceChain = (await check('getProvenance', 200, `/v1/artifacts/${id}/provenance`, agent)).json;
    const inToto = await check('getProvenance', 200, `/v1/artifacts/${id}/provenance?format=in-toto`, agent);
    assert.equal(inToto.json._type, 'https://in-toto.io/Statement/v1');
    // Signed attestations (issue 20 item 3): the envelopes and the public key that verifies them.
    const envelope = await check('getProvenance', 200, `/v1/artifacts/${id}/provenance?format=dsse`, agent);
    assert.equal(envelope.json.payloadType, 'application/vnd.in-toto+json');
    const attested = await check('listAttestations', 200, `/v1/artifacts/${id}/versions/2/attestations`, agent);
    assert.deepEqual(
      attested.json.attestations.map((a: { decision: string }) => a.decision),
      ['APPROVE'],
    );
    await check('keys', 200, '/v1/keys');
    // Aliases (issue 20 item 6) are set on the EXECUTED version; it then moves on (COMPENSATING).
    await check('setAlias', 200, `/v1/artifacts/${id}/aliases/prod`, { ...human, json: { version: 2, reason: 'release' } });
    await check('setAlias', 200, `/v1/artifacts/${id}/aliases/staging`, { ...human, json: { version: '@prod' } });
    await check('removeAlias', 200, `/v1/artifacts/${id}/aliases/staging?reason=done`, human);
    const comp = await check('compensate', 201, `/v1/artifacts/${id}/versions/2/compensations?filename=undo.sh&reason=rollback`, {
      ...agent,
      body: 'echo undo\n',
    });
    assert.ok(comp.json.compensation.compensates);
    // Aliases (issue 20 item 6): the artifact's view carries them; search hits of both kinds.
    const aliases = await check('listAliases', 200, `/v1/artifacts/${id}/aliases`, agent);
    assert.deepEqual(
      aliases.json.aliases.map((a: { name: string; state: string }) => [a.name, a.state]),
      [['prod', 'COMPENSATING']],
    );
    assert.equal((await check('showVersion', 200, `/v1/artifacts/${id}/versions/@prod`, agent)).json.version, 2);
    assert.equal((await check('search', 200, '/v1/search?name_prefix=wa&label=team=ops', agent)).json.items.length, 1);
    assert.equal((await check('search', 200, '/v1/search?state=COMPENSATING&limit=1', agent)).json.items[0].version, 2);
    assert.equal((await check('showArtifact', 200, `/v1/artifacts/${id}`, agent)).json.aliases.prod.version, 2);
    await check('listVersions', 200, `/v1/artifacts/${id}/versions`, agent);
    await check('showVersion', 200, `/v1/artifacts/${id}/versions/1`, agent);
    await check('listApprovals', 200, `/v1/artifacts/${id}/approvals`, agent);
    await check('history', 200, `/v1/artifacts/${id}/history`, agent);
    await check('verification', 200, `/v1/artifacts/${id}/verification`, agent);
    await check('listArtifacts', 200, '/v1/artifacts', agent);
    const byName = await check('listArtifacts', 200, '/v1/artifacts?name=walk', agent);
    assert.equal(byName.json.items.length, 1);
    await check('listArtifacts', 200, '/v1/artifacts?state=EXECUTED&limit=1', agent);
    const day = '2026-03-01';
    for (const [route, query] of [
      ['queryTransitions', `date=${day}`],
      ['queryApprovals', 'approver=alice'],
      ['queryRuns', `date=${day}`],
      ['queryProvenance', `date=${day}`],
      ['queryCompensations', 'state=DRAFT'],
    ] as const) {
      const page = await check(route, 200, `${ROUTES[route].url}?${query}`, agent);
      assert.ok(page.json.items.length > 0, `${route} found something`);
    }
    await check('whoami', 200, '/v1/whoami', agent);
    // The approval policy (issue 20 item 4): humans replace it; with a version, what it means for the caller.
    const set = await check('setPolicy', 200, '/v1/policy', { ...human, json: { policy: { min_quorum: 1 }, reason: 'walk-through' } });
    assert.equal(set.json.policy.min_quorum, 1);
    const reviewed = await check('getPolicy', 200, `/v1/policy?artifact_id=${id}&version=2`, human);
    assert.equal(reviewed.json.review.quorum, 1);
    // A real change (the one above was the default policy): an entry of the policy log.
    const longer = await check('setPolicy', 200, '/v1/policy', {
      ...human,
      json: { policy: { max_approval_lifetime_ms: 30 * 86_400_000 } },
    });
    const changes = await check('policyLog', 200, '/v1/policy/log', agent);
    assert.deepEqual(
      changes.json.events.map((e: { version: number; after_hash: string }) => [e.version, e.after_hash]),
      [[1, longer.json.hash]],
    );
    // The transparency log (issue 20 item 1), once a round sequenced what the walk-through wrote.
    await checkpointNow(h.ctx);
    const located = await check('logEntry', 200, `/v1/log/entry?artifact=${id}&seq=1`, agent);
    await check('logInclusion', 200, `/v1/log/proof/inclusion?leaf=${located.json.leaf_index as number}`, agent);
    await check('logConsistency', 200, '/v1/log/proof/consistency?from=1', agent);
    await check('statusStates', 200, '/v1/status/states', agent);
    await check('statusOperations', 200, '/v1/status/operations', agent);
    await check('health', 200, '/healthz');
    await check('ready', 200, '/readyz');
    // A settled artifact is archived: create, propose, reject, archive.
    const other = await check('createArtifact', 201, '/v1/artifacts?name=old&filename=a.txt', { ...agent, body: 'a' });
    const oid = other.json.artifact_id as string;
    await check('transition', 200, `/v1/artifacts/${oid}/versions/1/transitions`, { ...agent, json: { to: 'PROPOSED' } });
    await check('decide', 201, `/v1/artifacts/${oid}/versions/1/approvals`, { ...human, json: { decision: 'REJECT', evidence_ref: 'no' } });
    await check('archive', 200, `/v1/artifacts/${oid}/archive`, human);
    await check('showArtifact', 200, `/v1/artifacts/${oid}`, agent);
    // An archived HEAD by name: its archive mark (status, object_count) is in the schema, so the page's
    // union of versions and heads still serializes (it was a 500) and show keeps the mark whole.
    const archivedByName = await check('listArtifacts', 200, '/v1/artifacts?name=old', agent);
    assert.equal(archivedByName.json.items[0].archived.status, 'ARCHIVED');
    assert.equal((await h.call('GET', `/v1/artifacts/${oid}`, agent)).json.archived.object_count, 2);

    // Every route with a JSON answer was checked.
    const json = (Object.keys(CONTRACT) as RouteId[]).filter((r) => (CONTRACT[r] as ContractEntry).schema.response);
    assert.deepEqual(
      json.filter((r) => !checked.has(r)),
      [],
    );

    // The closed schemas drop nothing the services return: the answers are the service views.
    const v1 = await h.call('GET', `/v1/artifacts/${id}/versions/1`, agent);
    assert.deepEqual(v1.json, JSON.parse(JSON.stringify(versionView(await readVersion(h.ctx.items, id, 1)))));
    const exec = await h.call('GET', `/v1/executions/${run}`, agent);
    assert.deepEqual(exec.json, JSON.parse(JSON.stringify(executionView(await readExecution(h.ctx, run)))));
  });

  it('rejects the bogus values of the issue (so the walk-through can fail)', () => {
    const version = bodies.get('showVersion') as Record<string, unknown>;
    assert.ok(accepts('showVersion', 200, version));
    for (const [field, bogus] of [
      ['state', 'BOGUS'],
      ['content_hash', 'md5:x'],
      ['created_at', 'yesterday'],
      ['size', -5],
      ['size', 1.5],
      ['artifact_id', 'not-a-ulid'],
      ['metadata_hash', 'sha256:XYZ'],
    ] as const) {
      assert.equal(accepts('showVersion', 200, { ...version, [field]: bogus }), false, `${field}: ${JSON.stringify(bogus)} is rejected`);
    }
    assert.equal(accepts('showVersion', 200, { ...version, surprise: 1 }), false, 'a Version is a closed object');
    const { content_hash: _c, ...missing } = version;
    assert.equal(accepts('showVersion', 200, missing), false, 'content_hash is required');

    const chain = provenanceChain as { steps: Array<Record<string, unknown>> };
    const statement = bodies.get('getProvenance') as Record<string, unknown>;
    assert.ok(accepts('getProvenance', 200, statement));
    assert.equal(accepts('getProvenance', 200, { ...statement, surprise: 1 }), false, 'nor is the in-toto statement');
    assert.equal(accepts('getProvenance', 200, { ...statement, _type: 'https://example.com/Statement/v9' }), false);
    assert.ok(accepts('getProvenance', 200, chain));
    assert.equal(accepts('getProvenance', 200, { ...chain, surprise: 1 }), false, 'the provenance answer is not an open object');
    assert.equal(accepts('getProvenance', 200, {}), false, 'an empty object is no provenance answer');
    const step = chain.steps[0] as Record<string, unknown>;
    assert.equal(accepts('getProvenance', 200, { ...chain, steps: [{ ...step, inputs: ['md5:x'] }] }), false);
    assert.equal(accepts('getProvenance', 200, { ...chain, steps: [{ ...step, timestamp: 'yesterday' }] }), false);

    const exec = bodies.get('showExecution') as Record<string, unknown>;
    assert.equal(accepts('showExecution', 200, { ...exec, status: 'DONE' }), false);
    assert.equal(accepts('showExecution', 200, { ...exec, outputs: { 'evil.sh': { key: 'k', digest: sha256('x'), size: 1 } } }), false);
    const approvals = bodies.get('listApprovals') as { approvals: Array<Record<string, unknown>> };
    assert.equal(accepts('listApprovals', 200, { ...approvals, approvals: [{ ...approvals.approvals[0], decision: 'MAYBE' }] }), false);
    assert.equal(accepts('whoami', 200, { principal: { id: 'x', kind: 'robot' } }), false);
  });

  it('declares /metrics as the Prometheus text it serves, not JSON', async () => {
    const metrics = await h.call('GET', '/metrics');
    assert.equal(metrics.status, 200);
    const served = metrics.headers.get('content-type') ?? '';
    assert.match(served, /^text\/plain/);
    const doc = (await h.call('GET', '/openapi.json')).json;
    const declared = Object.keys(doc.paths['/metrics'].get.responses['200'].content);
    assert.deepEqual(declared, [served]);
    assert.deepEqual(Object.keys(doc.paths['/openapi.json'].get.responses['200'].content), ['application/json']);
    assert.deepEqual(Object.keys(doc.paths['/docs'].get.responses['200'].content), ['text/html; charset=utf-8']);
    // The tightened schemas reach the document too.
    const version = doc.components.schemas.Version;
    assert.equal(version.additionalProperties, false);
    assert.equal(version.properties.content_hash.pattern, '^sha256:[0-9a-f]{64}$');
    assert.equal(version.properties.created_at.format, 'date-time');
    assert.equal(version.properties.size.minimum, 0);
    assert.ok(Array.isArray(version.properties.state.anyOf ?? version.properties.state.enum));
  });
});
