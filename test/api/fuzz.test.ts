/**
 * Malformed and hostile requests over raw TCP (test/api/fuzz-requests.ts: bad JSON, wrong types, huge
 * and many headers, traversal, overlong and invalid UTF-8, unicode tricks in names and filenames, 10 KB
 * values, absurd ranges, malformed digests, bodies cut short, garbage that is not HTTP). A few thousand
 * here; `npm run fuzz` sends 100,000 to a server in its own process. No 5xx, every error is
 * application/problem+json with a known code, the server stays up, and no byte lands outside the
 * content root.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { validateObjectKey } from '../../src/core/object-keys.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { startExecution } from '../../src/lifecycle/executions.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { type Harness, startApi } from '../helpers/api-harness.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';
import { type FuzzFixtures, fuzzRequests, runFuzz } from './fuzz-requests.ts';

const REQUESTS = Number(process.env.ALP_FUZZ_REQUESTS ?? 5200);
const CONCURRENCY = 8;

function walk(dir: string, out: string[] = []): string[] {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else out.push(p);
  }
  return out;
}

describe('HTTP API: fuzzing with malformed requests', () => {
  let h: Harness;
  let port: number;
  let fixtures: FuzzFixtures;
  before(async () => {
    h = await startApi({ maxUploadBytes: 256 * 1024 });
    port = Number(new URL(h.url).port);
    const a = (await createArtifact(h.ctx, agent, { name: 'fuzz', filename: 'f.sh', body: bytesOf('echo fuzz\n') })).version.artifact_id;
    const p = (await createArtifact(h.ctx, agent, { name: 'fuzz-p', filename: 'f.sh', body: bytesOf('echo p\n') })).version.artifact_id;
    await propose(h.ctx, agent, p, 1);
    const r = (await createArtifact(h.ctx, agent, { name: 'fuzz-r', filename: 'f.sh', body: bytesOf('echo r\n') })).version.artifact_id;
    await propose(h.ctx, agent, r, 1);
    await decide(h.ctx, alice, r, 1, { decision: 'APPROVE', evidenceRef: 'fuzz' });
    const run = (await startExecution(h.ctx, agent, r, 1)).run_id;
    fixtures = { tokens: { human: h.tokens.human, agent: h.tokens.agent, service: h.tokens.service }, artifact: a, proposed: p, run };
  });
  after(async () => {
    await h.close();
  });

  it(`answers ${REQUESTS} malformed requests without a 5xx, always with problem+json errors, and stays up`, async (t) => {
    const all = fuzzRequests(fixtures, REQUESTS, 20261130);
    assert.equal(all.length, REQUESTS);
    // The installation's signing key is made on first use (keys/): make it before the snapshot, so a
    // fuzzed request that signs something (an attestation) changes nothing outside the content root.
    assert.equal((await h.call('GET', '/v1/keys')).status, 200);
    const outside = fs.readdirSync(h.ctx.dir).sort();
    const result = await runFuzz(port, all, CONCURRENCY);
    const statuses = result.statuses;
    t.diagnostic(
      `statuses: ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}; unanswered ${result.unanswered}`,
    );
    assert.deepEqual(result.failures.slice(0, 20), [], `${result.failures.length} failures`);
    // The mix really was malformed: mostly 4xx, across the families we meant to hit, and some reached
    // the services and succeeded.
    for (const s of [200, 201, 400, 401, 403, 404, 405, 409, 413, 415, 431])
      assert.ok((statuses.get(s) ?? 0) > 0, `no ${s} among ${JSON.stringify([...statuses])}`);
    assert.equal((await h.call('GET', '/healthz')).status, 200);
    assert.equal((await h.call('GET', '/readyz')).status, 200);
    const shown = await h.call('GET', `/v1/artifacts/${fixtures.artifact}`, { token: h.tokens.service });
    assert.equal(shown.status, 200);
    assert.equal(({} as Record<string, unknown>).polluted, undefined, 'no prototype pollution');
    // Nothing outside the content root; every object inside is a valid key under a known prefix.
    assert.deepEqual(fs.readdirSync(h.ctx.dir).sort(), outside);
    for (const file of walk(h.ctx.contentRoot)) {
      const key = path.relative(h.ctx.contentRoot, file).split(path.sep).join('/');
      if (key.split('/').pop()?.startsWith('.alp-')) continue; // temp files of uploads still being aborted
      assert.doesNotThrow(() => validateObjectKey(key), key);
      assert.match(key, /^(artifacts|executions|provenance)\//, key);
    }
  });
});
