/**
 * The smoke version of `npm run torture` part 2 (scripts/torture.ts): the fault matrix with one call
 * point per service operation × fault kind (the full run faults every call). Every faulted operation
 * either completes with its whole effect, or fails with a clear error and leaves no trace a reader
 * could mistake for success; a retry without the fault then succeeds.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FAULT_KINDS } from './faulty-stores.ts';
import { matrixTable, OPS, runMatrix } from './matrix.ts';

describe('fault matrix (smoke)', () => {
  it('every operation × every fault kind: completed, or a clear error and no trace; the retry succeeds', async (t) => {
    const report = await runMatrix({ sample: 1 });
    t.diagnostic(matrixTable(report.cases));
    const bad = report.cases.filter((c) => c.problems.length > 0);
    assert.deepEqual(bad, [], JSON.stringify(bad, null, 2));
    assert.deepEqual(new Set(report.cases.map((c) => c.op)), new Set(OPS.map((o) => o.name)), 'every operation was faulted');
    assert.deepEqual(new Set(report.cases.map((c) => c.kind)), new Set(FAULT_KINDS), 'every fault kind was injected');
    assert.ok(
      report.cases.every((c) => c.fired),
      'every injected fault was reached',
    );
  });
});
