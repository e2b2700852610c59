/**
 * Issue 14 item 8: a provenance actor is only what the recorder states. Every view of a step (the
 * HTTP listing and append answer, the in-toto export, the derived document, the CLI) carries the
 * authenticated principal (`recorded_by`) and marks a differing actor as claimed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildServer } from '../../src/api/server.ts';
import { readHead } from '../../src/audit/chain.ts';
import { sha256 } from '../../src/core/digest.ts';
import { provenanceKey } from '../../src/core/object-keys.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { createToken } from '../../src/lifecycle/principals.ts';
import type { inTotoStatement } from '../../src/lifecycle/provenance.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';
import { cli, embeddedProfile } from './checks.ts';

describe('issue 14 item 8: provenance actors are self-asserted', () => {
  it('issue 14 item 8: an agent recording actor os:ops-lead is exported with recorded_by agent and the actor marked as claimed', async () => {
    const ctx = await embeddedContext();
    await initInstallation(ctx);
    const { version } = await createArtifact(ctx, agent, { name: 'claims', filename: 'f.sh', body: bytesOf('echo\n') });
    const id = version.artifact_id;
    const { token } = await createToken(ctx, { principal: agent.id, kind: 'agent' }, { id: 'test-admin', kind: 'human' });
    const server = await buildServer(ctx, { logger: false, processMetrics: false });
    try {
      const call = async (method: 'GET' | 'POST', url: string, payload?: unknown) => {
        const res = await server.app.inject({
          method,
          url,
          headers: { authorization: `Bearer ${token}` },
          ...(payload ? { payload } : {}),
        });
        assert.ok(res.statusCode < 300, `${method} ${url}: ${res.statusCode} ${res.body}`);
        return res.json() as Record<string, unknown>;
      };
      const added = await call('POST', `/v1/artifacts/${id}/provenance`, { action: 'deploy', actor: 'os:ops-lead' });
      // The second step produced something: the in-toto export below has a subject (issue 20 item 3).
      await call('POST', `/v1/artifacts/${id}/provenance`, { action: 'lint', outputs: [sha256('lint report')] });
      const recorder = { id: agent.id, kind: 'agent' };
      assert.deepEqual([added.actor, added.recorded_by, added.actor_claimed], ['os:ops-lead', recorder, true]);

      const listed = (await call('GET', `/v1/artifacts/${id}/provenance`)).steps as Array<Record<string, unknown>>;
      assert.deepEqual(
        listed.map((s) => [s.actor, s.recorded_by, s.actor_claimed]),
        [
          ['os:ops-lead', recorder, true],
          [agent.id, recorder, false],
        ],
      );

      const exported = (await call('GET', `/v1/artifacts/${id}/provenance?format=in-toto`)) as Awaited<ReturnType<typeof inTotoStatement>>;
      const steps = (exported.predicate as { buildDefinition: { internalParameters: { steps: Array<Record<string, unknown>> } } })
        .buildDefinition.internalParameters.steps;
      assert.deepEqual(
        steps.map((s) => [s.actor, s.recorded_by, s.actor_claimed]),
        [
          ['os:ops-lead', recorder, true],
          [agent.id, recorder, false],
        ],
      );
    } finally {
      await server.app.close();
    }

    // The derived document carries both, as stored.
    const head = await readHead(ctx, id);
    const chunks: Buffer[] = [];
    for await (const c of await ctx.content.get(provenanceKey(id), head.provenance_hash as never)) chunks.push(c as Buffer);
    const doc = JSON.parse(Buffer.concat(chunks).toString()) as { steps: Array<Record<string, unknown>> };
    assert.deepEqual(doc.steps[0]?.recorded_by, { id: agent.id, kind: 'agent' });
    assert.equal(doc.steps[0]?.actor_claimed, true);

    // The CLI names the recorder first and the actor as a claim.
    const shown = await cli(embeddedProfile(ctx), ['provenance', 'show', id]);
    assert.equal(JSON.parse(shown.stdout).steps[0].actor_claimed, true);
    const text = await captureText(ctx.dir, id);
    assert.match(text, new RegExp(`^\\s+1\\s+\\S+\\s+${agent.id} \\(claims actor os:ops-lead\\)\\s+deploy$`, 'm'));
    assert.match(text, new RegExp(`^\\s+2\\s+\\S+\\s+${agent.id}\\s+lint$`, 'm'));
  });
});

async function captureText(dir: string, id: string): Promise<string> {
  const { captureCli } = await import('../helpers/cli-inprocess.ts');
  const r = await captureCli(['provenance', 'show', id, '--data', dir]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout;
}
