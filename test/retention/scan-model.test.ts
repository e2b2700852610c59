/**
 * The workset-backed reference scan against a simple in-memory model of seed 004's rule (property
 * test, fast-check): for random reference graphs — objects whose bytes name the digests of others
 * (duplicates of the same bytes included), items naming some keys and some digests, some objects
 * indexed and some not — the set the scan finds referenced is the model's: every named key, every
 * object whose digest is named or found inside a referenced object, transitively.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { sha256 } from '../../src/core/digest.ts';
import { scanReferences } from '../../src/retention/references.ts';
import { contentRootId, deleteRefIndexEntry } from '../../src/system/ref-index.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf } from '../helpers/tmp.ts';

interface Graph {
  /** Object i names the digests of these earlier objects (content addressing: no cycles). */
  edges: number[][];
  /** Object i holds the same bytes as object dup[i] (when set and earlier). */
  dup: Array<number | null>;
  /** Items naming object keys, and object digests. */
  byKey: number[];
  byDigest: number[];
  /** Objects whose index entry is dropped (read, then indexed, by the scan). */
  unindexed: number[];
}

const graph = fc.integer({ min: 1, max: 9 }).chain((n) =>
  fc.record({
    edges: fc.tuple(...Array.from({ length: n }, (_, i) => fc.uniqueArray(fc.nat(Math.max(0, i - 1)), { maxLength: i === 0 ? 0 : 3 }))),
    dup: fc.tuple(...Array.from({ length: n }, (_, i) => (i === 0 ? fc.constant(null) : fc.option(fc.nat(i - 1), { freq: 4 })))),
    byKey: fc.uniqueArray(fc.nat(n - 1), { maxLength: 3 }),
    byDigest: fc.uniqueArray(fc.nat(n - 1), { maxLength: 2 }),
    unindexed: fc.uniqueArray(fc.nat(n - 1), { maxLength: n }),
  }),
) as fc.Arbitrary<Graph>;

const keyOf = (i: number) => `artifacts/G${i}/v1/f`;

function bodies(g: Graph): string[] {
  const out: string[] = [];
  for (let i = 0; i < g.edges.length; i++) {
    const d = g.dup[i];
    if (d !== null && d !== undefined) out.push(out[d] as string);
    else out.push(`object ${i} names ${(g.edges[i] ?? []).map((j) => sha256(out[j] as string)).join(' ')}\n`);
  }
  return out;
}

/** Seed 004's rule, directly: keys named, digests named or inside referenced bytes, to a fixpoint. */
function model(g: Graph, body: string[]): Set<number> {
  const digestOf: string[] = body.map((b) => sha256(b));
  const referenced = new Set(g.byKey);
  const digests = new Set<string>(g.byDigest.map((i) => digestOf[i] as string));
  for (let grew = true; grew; ) {
    grew = false;
    for (const i of referenced) {
      digests.add(digestOf[i] as string);
      for (const m of (body[i] as string).matchAll(/sha256:[0-9a-f]{64}/g)) digests.add(m[0]);
    }
    for (let i = 0; i < body.length; i++) {
      if (!referenced.has(i) && digests.has(digestOf[i] as string)) {
        referenced.add(i);
        grew = true;
      }
    }
  }
  return referenced;
}

describe('reference scan: the working set agrees with the in-memory model', () => {
  it('for random reference graphs, the referenced set is the model’s', async () => {
    await fc.assert(
      fc.asyncProperty(graph, async (g) => {
        const ctx = await embeddedContext();
        try {
          const body = bodies(g);
          for (const [i, b] of body.entries()) await ctx.content.put(keyOf(i), bytesOf(b));
          for (const i of g.byKey) await ctx.items.put({ PK: `TEST#key${i}`, SK: 'x', type: 'note', names: keyOf(i) });
          for (const i of g.byDigest)
            await ctx.items.put({ PK: `TEST#digest${i}`, SK: 'x', type: 'note', names: `uses ${sha256(body[i] as string)}` });
          const root = contentRootId(ctx.content.location);
          for (const i of g.unindexed) await deleteRefIndexEntry(ctx.items, root, ctx.layout.index_shards, keyOf(i));
          const expected = model(g, body);
          const scan = await scanReferences(ctx, { segments: 3 });
          try {
            for (let i = 0; i < body.length; i++)
              assert.equal(scan.referencedWhy(keyOf(i)) !== undefined, expected.has(i), `object ${i}: ${JSON.stringify(g)}`);
            const candidates = [...scan.candidates()].map((c) => c.key);
            assert.deepEqual(
              candidates,
              body
                .map((_, i) => i)
                .filter((i) => !expected.has(i))
                .map(keyOf)
                .sort(),
            );
            assert.equal(scan.referencedCount(), expected.size);
          } finally {
            scan.close();
          }
        } finally {
          await ctx.items.close();
        }
      }),
      { numRuns: 25 },
    );
  });
});
