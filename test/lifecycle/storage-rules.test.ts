import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DAY_MS } from '../../src/core/clock.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { applyStorageRules, plannedRules, rfcClass } from '../../src/lifecycle/storage-rules.ts';
import { storageStatus } from '../../src/lifecycle/storage-status.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, approveAndRun, walkEveryState } from '../helpers/walk.ts';

describe('storage-class lifecycle (RFC-012 §9.3)', () => {
  it('plans the bucket rules and names every deviation from the RFC', () => {
    const { rules, deviations } = plannedRules();
    assert.deepEqual(rules, [
      { id: 'alp-artifacts', prefix: 'artifacts/', transitions: [{ days: 30, storageClass: 'STANDARD_IA' }] },
      { id: 'alp-executions', prefix: 'executions/', transitions: [{ days: 30, storageClass: 'STANDARD_IA' }] },
      { id: 'alp-archive', prefix: 'archive/', transitions: [{ days: 0, storageClass: 'GLACIER' }] },
    ]);
    const exec = deviations.find((d) => d.prefix === 'executions/');
    assert.ok(exec, 'the 14-day executions rule cannot be applied on S3 and says so');
    assert.match(exec.reason, /30 days/);
  });

  it('classes by prefix and age: artifacts after 30 days, executions after 14, provenance never, archive always GLACIER', () => {
    assert.equal(rfcClass('artifacts/x/v1/f', 29), 'STANDARD');
    assert.equal(rfcClass('artifacts/x/v1/f', 30), 'STANDARD_IA');
    assert.equal(rfcClass('executions/r/stdout.log', 13), 'STANDARD');
    assert.equal(rfcClass('executions/r/stdout.log', 14), 'STANDARD_IA');
    assert.equal(rfcClass('provenance/x.json', 5000), 'STANDARD');
    assert.equal(rfcClass('archive/2026/01/x/v1/f', 0), 'GLACIER');
  });

  it('on the fs engine, apply reports that nothing can be applied; status shows what the planned rules would do, and the RFC day counts beside', async () => {
    const ctx = await embeddedContext('2026-01-01T00:00:00.000Z');
    const applied = await applyStorageRules(ctx);
    assert.equal(applied.applied, false);
    assert.match(applied.note as string, /no storage classes/);
    await walkEveryState(ctx);
    const { version } = await createArtifact(ctx, agent, { name: 'later', filename: 'f', body: bytesOf('x') });
    await approveAndRun(ctx, version.artifact_id, 1, 'SUCCEEDED');
    let status = await storageStatus(ctx, { objects: true });
    // The fs engine reports no class: every figure is what the planned rules would do, and says so.
    assert.deepEqual(Object.keys(status.sources), ['planned_rules']);
    assert.equal(status.rules_evaluated, 'planned');
    assert.equal(status.summary['artifacts/']?.STANDARD_IA, undefined);
    assert.ok((status.summary['archive/']?.GLACIER ?? 0) > 0);
    assert.equal(status.rfc_summary['artifacts/']?.STANDARD_IA, undefined);
    ctx.clock.advance(15 * DAY_MS);
    status = await storageStatus(ctx, { objects: true });
    assert.ok((status.rfc_summary['executions/']?.STANDARD_IA ?? 0) > 0, 'the RFC counts executions/ objects as IA after 14 days');
    assert.equal(status.summary['executions/']?.STANDARD_IA, undefined, 'the rule S3 applies moves them at 30 days, not 14');
    assert.equal(status.rfc_summary['artifacts/']?.STANDARD_IA, undefined, 'artifacts/ objects are not yet');
    ctx.clock.advance(16 * DAY_MS);
    status = await storageStatus(ctx, { objects: true });
    assert.equal(status.rfc_summary['artifacts/']?.STANDARD, undefined, 'the RFC counts every artifacts/ object IA after 30 days');
    assert.equal(status.summary['artifacts/']?.STANDARD_IA, undefined, 'S3 moves none of them: they are all under 128 KiB');
    assert.ok((status.summary['provenance/']?.STANDARD ?? 0) > 0);
    assert.equal(status.summary['provenance/']?.STANDARD_IA, undefined);
    assert.equal(status.rfc_summary['provenance/']?.STANDARD_IA, undefined);
  });
});
