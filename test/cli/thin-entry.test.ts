/**
 * What the entry points call instead of deciding themselves (issue 15 item 3): the shared startup
 * sequence and bootstrap tokens (runtime/startup.ts), the human-only rules (runtime/human-rules.ts),
 * audit verification of every chain (audit/verify-all.ts), and the HTTP server's transitions metric
 * as an audit sink (api/metrics.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiMetrics, withMetricsSink } from '../../src/api/metrics.ts';
import { verifyAllAudit } from '../../src/audit/verify-all.ts';
import { Forbidden, UsageError } from '../../src/core/errors.ts';
import { artifactPk } from '../../src/core/keys.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { resolveToken } from '../../src/lifecycle/principals.ts';
import { requireHuman, retentionApprover } from '../../src/runtime/human-rules.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import { BOOTSTRAP_AGENT, bootstrapTokensShown, issueBootstrapTokens, startInstallation } from '../../src/runtime/startup.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';

const config = (ctx: Awaited<ReturnType<typeof embeddedContext>>) => ({
  metadata: { engine: 'sqlite' as const, path: ctx.dbPath },
  content: { engine: 'fs' as const, root: ctx.contentRoot },
});

describe('thin entry points: the rules they call', () => {
  it('only a human passes requireHuman; only a human may name another retention approver', () => {
    assert.equal(requireHuman(alice, 'advancing the epoch'), alice);
    assert.throws(
      () => requireHuman(agent, 'advancing the epoch'),
      (e: unknown) => e instanceof Forbidden && e.message === 'advancing the epoch needs a human operator, not agent agent-7',
    );
    assert.throws(() => requireHuman({ id: 'exporter', kind: 'service' }, 'retiring a backup'), Forbidden);
    assert.equal(retentionApprover(agent, undefined), agent);
    assert.deepEqual(retentionApprover(alice, 'bob'), { id: 'bob', kind: 'human' });
    assert.deepEqual(retentionApprover(agent, 'agent-7'), { id: 'agent-7', kind: 'human' });
    assert.throws(
      () => retentionApprover(agent, 'bob'),
      (e: unknown) => e instanceof UsageError && /only a human operator/.test(e.message),
    );
    assert.throws(() => retentionApprover(alice, 'not a valid id!'));
  });

  it('the startup sequence creates once, reports bootstrap until the tokens were shown, and the tokens resolve', async () => {
    const ctx = await embeddedContext();
    try {
      const first = await startInstallation(ctx, config(ctx), { bootstrapTokens: true });
      assert.equal(first.created, true);
      assert.equal(first.bootstrapPending, true);
      assert.equal(first.interrupted_uploads_removed, 0);
      const tokens = await issueBootstrapTokens(ctx);
      assert.deepEqual(
        tokens.map((t) => [t.kind, t.principal]),
        [
          ['human', tokens[0]?.principal],
          ['agent', BOOTSTRAP_AGENT],
        ],
      );
      for (const t of tokens) assert.equal((await resolveToken(ctx, t.token)).id, t.principal);
      // Not shown yet: a second start still has them pending.
      assert.equal((await startInstallation(ctx, config(ctx), { bootstrapTokens: true })).bootstrapPending, true);
      await bootstrapTokensShown(ctx);
      const again = await startInstallation(ctx, config(ctx), { bootstrapTokens: true });
      assert.equal(again.created, false);
      assert.equal(again.bootstrapPending, false);
      assert.equal(again.installation_id, first.installation_id);
    } finally {
      await ctx.content.close();
      await ctx.items.close();
    }
  });

  it('verifyAllAudit checks every chain and the append counter, one chain without it, and names an edited row', async () => {
    const ctx = await embeddedContext();
    try {
      // As every entry point opens (runtime/open.ts): the telemetry sink keeps the append counter.
      await attachAuditSinks(ctx);
      await startInstallation(ctx, config(ctx));
      const a = await createArtifact(ctx, agent, { name: 'a', filename: 'a.sh', body: bytesOf('echo a\n') });
      await createArtifact(ctx, agent, { name: 'b', filename: 'b.sh', body: bytesOf('echo b\n') });
      const ticks: number[] = [];
      const all = await verifyAllAudit(ctx, { progress: { total: (n) => ticks.push(-n), tick: (n) => ticks.push(n) } });
      assert.equal(all.ok, true);
      assert.equal(all.artifacts, 2);
      assert.deepEqual(ticks, [-2, 1, 1]);
      assert.equal(all.counter?.status, 'checked');
      const one = await verifyAllAudit(ctx, { artifactId: a.version.artifact_id });
      assert.equal(one.artifacts, 1);
      assert.equal(one.counter, undefined);
      // Edit the first audit entry of a: its chain breaks, and the summary names the row.
      const pk = artifactPk(a.version.artifact_id);
      const rows = (await ctx.items.query({ pk })).items.filter((i) => i.seq === 1 && typeof i.hash === 'string');
      const row = rows[0];
      assert.ok(row);
      await ctx.items.put({ ...row, reason: 'edited' });
      const broken = await verifyAllAudit(ctx);
      assert.equal(broken.ok, false);
      assert.equal(broken.broken[0]?.artifact_id, a.version.artifact_id);
      assert.match(broken.broken[0]?.findings[0]?.problem ?? '', /hash does not match/);
    } finally {
      await ctx.content.close();
      await ctx.items.close();
    }
  });

  it("the metrics sink counts the transitions committed through the server's context, and never fails a write", async () => {
    const ctx = await embeddedContext();
    try {
      await startInstallation(ctx, config(ctx));
      const metrics = new ApiMetrics({ processMetrics: false });
      const served = withMetricsSink(ctx, metrics);
      // A sink whose commit hook throws is only an observer: the write stands.
      served.auditSinks.push({ opsFor: async () => ({ ops: [], fallback: [] }), committed: () => assert.fail('observer') });
      await createArtifact(served, agent, { name: 'm', filename: 'm.sh', body: bytesOf('echo m\n') });
      // Through the base context (not the server's), nothing is counted.
      await createArtifact(ctx, agent, { name: 'n', filename: 'n.sh', body: bytesOf('echo n\n') });
      const text = await metrics.registry.metrics();
      assert.match(text, /alp_transitions_total\{to="DRAFT"\} 1\n/);
      assert.equal(ctx.auditSinks.length < served.auditSinks.length, true);
    } finally {
      await ctx.content.close();
      await ctx.items.close();
    }
  });
});
