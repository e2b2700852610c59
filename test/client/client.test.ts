/**
 * `alp/client` against the real server (the in-process harness over HTTP; issue 19 A2): every route
 * of the table is called through the client at least once (a recording fetch maps each request to its
 * route); uploads from text, bytes, a file path and a Node stream carry or check their digest;
 * downloads are verified (`bytes()`, `text()`, the Node stream, a file written only when verified);
 * problem+json answers arrive as typed errors with their stable code.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { ROUTES, type RouteId } from '../../src/api/access.ts';
import { openCheckpoint } from '../../src/audit/tlog/checkpoint.ts';
import { checkpointNow } from '../../src/audit/tlog/checkpoint-now.ts';
import { verifyConsistency, verifyInclusion } from '../../src/audit/tlog/merkle.ts';
import { parseVerifierKey } from '../../src/audit/tlog/note.ts';
import { AlpClient, AlpError, AlpHttpError } from '../../src/client/index.ts';
import { collect, createNodeClient, fileBody, saveToFile, streamBody, toNodeReadable } from '../../src/client/node.ts';
import { sha256 } from '../../src/core/digest.ts';
import { type Harness, startApi } from '../helpers/api-harness.ts';
import { tempDir } from '../helpers/tmp.ts';

/** Which route a request went to: the table's method and path pattern. */
function routeOf(method: string, url: string): RouteId | undefined {
  const p = new URL(url).pathname;
  for (const [id, spec] of Object.entries(ROUTES) as Array<[RouteId, (typeof ROUTES)[RouteId]]>) {
    if (spec.method !== method) continue;
    const re = new RegExp(`^${spec.url.replace(/:\w+/g, '[^/]+')}$`);
    if (re.test(p)) return id;
  }
  return undefined;
}

describe('alp/client against a real server', () => {
  let h: Harness;
  const called = new Set<RouteId>();
  const recording: typeof fetch = async (input, init) => {
    const r = routeOf(init?.method ?? 'GET', String(input));
    if (r) called.add(r);
    return fetch(input, init);
  };
  let agent: AlpClient;
  let human: AlpClient;
  let service: AlpClient;
  before(async () => {
    h = await startApi();
    agent = createNodeClient({ url: h.url, token: h.tokens.agent, fetch: recording });
    human = new AlpClient({ url: `${h.url}/`, token: h.tokens.human, fetch: recording });
    service = createNodeClient({ url: h.url, token: h.tokens.service, fetch: recording });
  });
  after(async () => {
    await h.close();
  });

  it('walks the lifecycle through every route, typed from the contract', async () => {
    assert.equal((await service.health()).status, 'ok');
    assert.equal((await service.ready()).status, 'ready');
    assert.match(await service.metrics(), /alp_http_requests_total/);
    assert.equal((await service.openapi()).openapi, '3.1.0');
    assert.match(await service.docs(), /<html/);
    assert.deepEqual((await agent.whoami()).principal, { id: 'agent-7', kind: 'agent' });

    const v1 = await agent.createArtifact(
      { name: 'deploy', filename: 'deploy.sh', kind: 'script', labels: { team: 'ops' }, quorum: 1 },
      'echo 1\n',
    );
    assert.equal(v1.state, 'DRAFT');
    assert.equal(v1.content_hash, sha256('echo 1\n'));
    const id = v1.artifact_id;
    const v2 = await agent.addVersion(id, { filename: 'deploy.sh' }, new TextEncoder().encode('echo 2\n'));
    assert.equal(v2.version, 2);
    assert.equal((await agent.showArtifact(id)).labels.team, 'ops');
    assert.equal((await agent.listVersions(id)).versions.length, 2);
    assert.equal((await agent.showVersion(id, 2)).content_hash, sha256('echo 2\n'));
    assert.equal((await agent.listArtifacts({ name: 'deploy' })).items.length, 1);
    assert.ok((await agent.listArtifacts({ state: 'DRAFT', limit: 10 })).items.length >= 2);

    const content = await service.getContent(id, 1);
    assert.equal(content.digest, sha256('echo 1\n'));
    assert.equal(content.filename, 'deploy.sh');
    assert.equal(await content.text(), 'echo 1\n');
    const head = await service.headContent(id, 2);
    assert.deepEqual([head.digest, head.size], [sha256('echo 2\n'), 7]);
    const range = await service.getContentRange(id, 2, 5, 7);
    assert.deepEqual([Buffer.from(range.bytes).toString(), range.start, range.end, range.total], ['2\n', 5, 7, 7]);

    assert.equal((await agent.propose(id, 2, 'ready')).state, 'PROPOSED');
    const decided = await human.decide(id, 2, { decision: 'APPROVE', evidence_ref: 'review-9', expires_in: '1d' });
    assert.equal(decided.version.state, 'APPROVED');
    assert.equal(decided.approval.counted, true);
    assert.equal((await agent.listApprovals(id)).approvals[0]?.decision, 'APPROVE');

    const run = await agent.startExecution(id, 2);
    assert.equal(run.status, 'RUNNING');
    const big = Buffer.alloc(3 * 1024 * 1024 + 17, 'log line\n');
    const dir = tempDir('alp-client');
    const logFile = path.join(dir, 'stdout.log');
    fs.writeFileSync(logFile, big);
    const stdout = await agent.uploadOutput(run.run_id, 'stdout.log', await fileBody(logFile));
    assert.equal(stdout.digest, sha256(big));
    // A Node stream without a digest: hashed on the way out, compared with what the server recorded.
    const stderr = await agent.uploadOutput(
      run.run_id,
      'stderr.log',
      streamBody(Readable.from([Buffer.from('warn\n'), Buffer.from('done\n')])),
    );
    assert.equal(stderr.digest, sha256('warn\ndone\n'));
    await agent.uploadOutput(run.run_id, 'output.json', '{"ok":true}');
    assert.equal((await service.headOutput(run.run_id, 'stdout.log')).size, big.length);
    const streamed = await collect(toNodeReadable(await service.getOutput(run.run_id, 'stdout.log')));
    assert.ok(streamed.equals(big));
    const saved = path.join(dir, 'copy.log');
    await saveToFile(await service.getOutput(run.run_id, 'stdout.log', { expectedDigest: sha256(big) }), saved);
    assert.ok(fs.readFileSync(saved).equals(big));
    const tail = await service.getOutputRange(run.run_id, 'stdout.log', big.length - 9, big.length);
    assert.ok(Buffer.from(tail.bytes).equals(big.subarray(big.length - 9)));
    assert.deepEqual([tail.start, tail.end, tail.total], [big.length - 9, big.length, big.length]);
    const finished = await agent.finishExecution(run.run_id, { status: 'SUCCEEDED', exit_code: 0 });
    assert.equal(finished.status, 'SUCCEEDED');
    assert.equal((await agent.showExecution(run.run_id)).outputs['output.json']?.digest, sha256('{"ok":true}'));
    assert.equal((await agent.listExecutions(id)).executions.length, 1);

    const step = await agent.addProvenance(id, { action: 'generate', model: 'm', outputs: [v2.content_hash] });
    assert.equal(step.step, 1);
    assert.equal((await agent.getProvenance(id)).steps.length, 1);
    assert.equal((await agent.getProvenanceInToto(id))._type, 'https://in-toto.io/Statement/v1');
    // Signed attestations (issue 20 item 3): the key is public; the envelopes carry its fingerprint as keyid.
    const [key] = (await new AlpClient({ url: h.url, fetch: recording }).keys()).keys;
    assert.equal((await agent.getProvenanceEnvelope(id)).signatures[0]?.keyid, key?.fingerprint);
    const attested = await service.listAttestations(id, 2);
    assert.deepEqual(
      attested.attestations.map((a) => [a.decision, a.actor.id, a.envelope.signatures[0]?.keyid]),
      [['APPROVE', 'alice', key?.fingerprint]],
    );

    // The transparency log (issue 20 item 1): a round sequences what is pending; its checkpoint verifies under the pinned key.
    await checkpointNow(h.ctx);
    const located = await service.logEntry(id, 1);
    assert.equal(located.pending, false);
    const leaf = located.leaf_index as number;
    const note = await service.logCheckpoint();
    const vkey = key?.verifier_key ?? '';
    const cp = openCheckpoint(note, parseVerifierKey(vkey), vkey.split('+')[0] as string);
    const inclusion = await service.logInclusion(leaf);
    assert.equal(inclusion.tree_size, cp.size);
    assert.equal(inclusion.entry.hash, located.hash);
    const b = (x: string) => Buffer.from(x, 'base64');
    assert.ok(
      verifyInclusion(leaf, cp.size, b(inclusion.leaf_hash), inclusion.proof.map(b), cp.root),
      'the inclusion proof verifies against the signed root',
    );
    const consistency = await service.logConsistency(1);
    assert.ok(verifyConsistency(1, cp.size, b(consistency.from_root), cp.root, consistency.proof.map(b)));

    // The approval policy (issue 20 item 4): humans replace it; with a version, what it means for the caller.
    const policy = await human.setPolicy({ min_quorum: 1, self_approval: 'not-counted' }, { reason: 'walk-through' });
    assert.equal(policy.policy.self_approval, 'not-counted');
    assert.equal((await service.policy({ artifactId: id, version: 2 })).review?.quorum, 1);
    // That was the default policy (nothing recorded); a real change is an entry of the policy log, which any reader reads.
    const longer = await human.setPolicy({ max_approval_lifetime_ms: 30 * 86_400_000 }, { expectedVersion: 0, reason: 'walk-through' });
    assert.deepEqual([policy.changed, longer.changed, longer.version], [false, true, 1]);
    const changes = (await agent.policyLog()).events;
    assert.deepEqual(
      changes.map((e) => [e.version, e.by.kind, e.reason, e.before_hash, e.after_hash]),
      [[1, 'human', 'walk-through', policy.hash, longer.hash]],
    );

    // aliases (issue 20 item 6): humans move them; @prod is taken wherever a version is
    const aliased = await human.setAlias(id, 'prod', 2, 'release');
    assert.deepEqual([aliased.changed, aliased.alias?.version, aliased.alias?.state], [true, 2, 'EXECUTED']);
    await assert.rejects(agent.setAlias(id, 'staging', 2), (e: unknown) => e instanceof AlpError && e.code === 'FORBIDDEN');
    assert.equal((await service.showVersion(id, '@prod')).version, 2);
    assert.equal(await (await service.getContent(id, '@prod')).text(), 'echo 2\n');
    assert.equal((await service.headContent(id, '@prod')).digest, sha256('echo 2\n'));
    await human.setAlias(id, 'staging', '@prod');
    assert.deepEqual(
      (await service.listAliases(id)).aliases.map((a) => [a.name, a.version]),
      [
        ['prod', 2],
        ['staging', 2],
      ],
    );
    assert.equal((await human.removeAlias(id, 'staging', 'done')).removed.version, 2);
    await assert.rejects(service.getContent(id, '@staging'), (e: unknown) => e instanceof AlpError && e.code === 'NOT_FOUND');
    const found = await service.search({ name_prefix: 'dep', labels: { team: 'ops' } });
    assert.deepEqual(
      found.items.map((h) => h.artifact_id),
      [id],
    );

    const comp = await agent.compensate(id, '@prod', { filename: 'undo.sh', reason: 'rollback' }, 'echo undo\n');
    assert.equal(comp.compensated.state, 'COMPENSATING');
    assert.ok((await agent.history(id)).entries.length > 5);
    assert.equal((await agent.verification(id)).ok, true);

    const day = '2026-03-01';
    assert.ok((await service.queryTransitions({ date: day })).items.length > 0);
    assert.ok((await service.queryApprovals({ approver: 'alice' })).items.length > 0);
    assert.ok((await service.queryRuns({ date: day })).items.length > 0);
    assert.ok((await service.queryProvenance({ date: day })).items.length > 0);
    assert.ok((await service.queryCompensations({ state: 'DRAFT' })).items.length > 0);
    assert.ok((await service.statusStates()).total > 0);
    assert.equal(typeof (await service.statusOperations()).uploads_in_flight, 'number');

    const old = await agent.createArtifact({ name: 'old', filename: 'a.txt' }, 'a');
    await agent.propose(old.artifact_id, 1);
    await human.decide(old.artifact_id, 1, { decision: 'REJECT', evidence_ref: 'no' });
    assert.equal((await human.archive(old.artifact_id)).archived.length > 0, true);

    assert.deepEqual(
      (Object.keys(ROUTES) as RouteId[]).filter((r) => !called.has(r)),
      [],
      'every route was called through the client',
    );
  });

  it('maps problem+json answers to typed errors carrying the stable code', async () => {
    const v = await agent.createArtifact({ name: 'errs', filename: 'e.txt' }, 'e');
    const expectCode = async (p: Promise<unknown>, code: string, status: number) => {
      const e = await p.then(
        () => assert.fail('expected an error'),
        (err: unknown) => err,
      );
      assert.ok(e instanceof AlpHttpError, String(e));
      assert.ok(e instanceof AlpError);
      assert.equal(e.code, code);
      assert.equal(e.status, status);
      assert.equal(e.type, `urn:alp:problem:${code.toLowerCase()}`);
      assert.ok(e.detail.length > 0 && e.requestId);
    };
    await expectCode(agent.decide(v.artifact_id, 1, { decision: 'APPROVE', evidence_ref: 'x' }), 'FORBIDDEN', 403);
    await expectCode(agent.showArtifact('01ARZ3NDEKTSV4RRFFQ69G5FAV'), 'NOT_FOUND', 404);
    await expectCode(agent.transition(v.artifact_id, 1, { to: 'EXECUTED' }), 'ILLEGAL_TRANSITION', 409);
    await expectCode(new AlpClient({ url: h.url, token: 'alp_nope' }).whoami(), 'UNAUTHENTICATED', 401);
    await expectCode(agent.listArtifacts({ limit: 0 }), 'INVALID', 400);
    await expectCode(
      agent
        .addVersion(v.artifact_id, { filename: 'x', idempotencyKey: 'k1' }, 'one')
        .then(() => agent.addVersion(v.artifact_id, { filename: 'x', idempotencyKey: 'k1' }, 'two')),
      'CONFLICT',
      422,
    );
    // The CLI's exit code comes with it (the remote CLI prints the same).
    const e = await agent.showArtifact('01ARZ3NDEKTSV4RRFFQ69G5FAV').catch((err: AlpError) => err);
    assert.equal((e as AlpError).exitCode, 3);
  });
});
