/**
 * The provenance graph layout: every step and digest is one node, no two nodes overlap, inputs sit
 * above their step and outputs below it (for acyclic provenance), and the drawing area holds every
 * node and the arcs of edges that skip layers.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { arcDepth, DEFAULT_LAYOUT, digestId, layoutProvenance, type StepInput, stepId } from '../../src/web/app/lib/graph.ts';

const digest = fc.integer({ min: 0, max: 11 }).map((n) => `sha256:${n.toString(16).padStart(64, '0')}`);

/** Steps whose outputs are new digests or earlier ones never used as an input of the same step. */
const steps = fc
  .array(fc.record({ inputs: fc.uniqueArray(digest, { maxLength: 3 }), outputs: fc.uniqueArray(digest, { maxLength: 3 }) }), {
    minLength: 1,
    maxLength: 6,
  })
  .map((list) =>
    list.map(
      (s, i): StepInput => ({ step: i + 1, action: `a${i}`, inputs: s.inputs, outputs: s.outputs.filter((d) => !s.inputs.includes(d)) }),
    ),
  );

describe('web UI: provenance graph layout', () => {
  it('lays out every node once, without overlaps, inside the drawing', () => {
    fc.assert(
      fc.property(steps, (list) => {
        const layout = layoutProvenance(list);
        const ids = layout.nodes.map((n) => n.id);
        assert.equal(new Set(ids).size, ids.length);
        const expected = new Set([...list.map((s) => stepId(s.step)), ...list.flatMap((s) => [...s.inputs, ...s.outputs].map(digestId))]);
        assert.deepEqual(new Set(ids), expected);
        const { nodeWidth: w, nodeHeight: h } = DEFAULT_LAYOUT;
        for (const a of layout.nodes) {
          assert.ok(a.x >= 0 && a.y >= 0 && a.x + w <= layout.width && a.y + h <= layout.height, JSON.stringify(a));
          for (const b of layout.nodes) {
            if (a === b) continue;
            const apart = a.x + w <= b.x || b.x + w <= a.x || a.y + h <= b.y || b.y + h <= a.y;
            assert.ok(apart, `${a.id} overlaps ${b.id}`);
          }
        }
        const byId = new Map(layout.nodes.map((n) => [n.id, n]));
        for (const e of layout.edges) {
          const from = byId.get(e.from);
          const to = byId.get(e.to);
          assert.ok(from && to);
          assert.equal(e.span, Math.abs(to.layer - from.layer));
          assert.equal(e.arc, to.layer - from.layer !== 1);
          if (e.arc) assert.ok(Math.max(from.x, to.x) + w + arcDepth(e.span) <= layout.width, 'the arc fits');
        }
        // The edges are exactly the inputs and outputs of the steps.
        assert.equal(
          layout.edges.length,
          list.reduce((n, s) => n + s.inputs.length + s.outputs.length, 0),
        );
      }),
      { numRuns: 300 },
    );
  });

  it('puts a chain top to bottom: input, step, output, next step, ...', () => {
    const d = (n: number) => `sha256:${String(n).repeat(64)}`;
    const layout = layoutProvenance([
      { step: 1, action: 'generate', inputs: [d(1)], outputs: [d(2)] },
      { step: 2, action: 'revise', inputs: [d(2), d(1)], outputs: [d(3)] },
    ]);
    const layer = (id: string) => layout.nodes.find((n) => n.id === id)?.layer;
    assert.deepEqual(
      [layer(digestId(d(1))), layer(stepId(1)), layer(digestId(d(2))), layer(stepId(2)), layer(digestId(d(3)))],
      [0, 1, 2, 3, 4],
    );
    const long = layout.edges.filter((e) => e.arc);
    assert.deepEqual(
      long.map((e) => [e.from, e.to, e.span]),
      [[digestId(d(1)), stepId(2), 3]],
    );
  });

  it('leaves no empty column for steps without inputs', () => {
    const layout = layoutProvenance([{ step: 1, action: 'import', inputs: [], outputs: ['sha256:' + 'a'.repeat(64)] }]);
    assert.deepEqual(
      layout.nodes.map((n) => n.layer),
      [0, 1],
    );
  });
});
