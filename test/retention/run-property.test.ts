/**
 * Property (fast-check): over random interleavings of publisher commits (a reference by key, a new
 * version of the same bytes: a reference by digest), time passing, and retention plan/run — with
 * publisher commits also landing between a run's plan and its fence — no object is ever purged after a
 * reference to it committed while it was present. The short fence re-validates what the plan chose;
 * this checks it never acts on an object referenced since. SQLite + directory (many cases).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { DAY_MS } from '../../src/core/clock.ts';
import { Conflict } from '../../src/core/errors.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import { embedded, epochOf, type RetentionInstallation } from '../helpers/retention-harness.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';
import { runHost } from './run-harness.ts';

const OBJECTS = 3;
const keyOf = (n: number) => `artifacts/prop/v1/o${n}`;
const bytesFor = (n: number) => `property object ${n}`;

type Ref = { kind: 'key' | 'digest'; n: number };
type Step =
  | { kind: 'ref'; ref: Ref }
  | { kind: 'advance'; days: number }
  | { kind: 'run'; action: 'QUARANTINE' | 'PURGE'; during?: Ref; inside?: Ref };

const refArb: fc.Arbitrary<Ref> = fc.record({ kind: fc.constantFrom('key' as const, 'digest' as const), n: fc.nat(OBJECTS - 1) });
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('ref' as const), ref: refArb }),
  fc.record({ kind: fc.constant('advance' as const), days: fc.constantFrom(1, 7, 8, 31) }),
  fc.record(
    {
      kind: fc.constant('run' as const),
      action: fc.constantFrom('QUARANTINE' as const, 'PURGE' as const),
      during: refArb,
      inside: refArb,
    },
    { requiredKeys: ['kind', 'action'] },
  ),
);

describe('retention under random interleavings of publishers and plan/run (fast-check)', () => {
  it('no object referenced while present is ever purged (quarantined-then-purged) afterwards', async () => {
    let cases = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 4, maxLength: 14 }), async (steps) => {
        cases++;
        const i = await embedded.open();
        try {
          await check(i, steps);
        } finally {
          await i.close();
        }
      }),
      { numRuns: Number(process.env.ALP_RETENTION_PROPERTY_RUNS ?? 10), endOnFailure: true },
    );
    assert.ok(cases > 0);
  });
});

async function check(i: RetentionInstallation, steps: Step[]): Promise<void> {
  const restore = await i.verifiedRestore();
  for (let n = 0; n < OBJECTS; n++) await i.ctx.content.put(keyOf(n), bytesOf(bytesFor(n)));
  /** Objects a committed reference named while they were present: they must stay. */
  const protectedKeys = new Set<string>();
  let seq = 0;
  const publish = async (ref: Ref) => {
    const present = (await i.ctx.content.head(keyOf(ref.n))) !== undefined;
    try {
      if (ref.kind === 'key')
        await createArtifact(i.ctx, agent, { name: `k${seq++}`, filename: 'f', body: bytesOf('x'), labels: { source: keyOf(ref.n) } });
      else await createArtifact(i.ctx, agent, { name: `d${seq++}`, filename: 'f', body: bytesOf(bytesFor(ref.n)) });
    } catch (e) {
      // Refused publishers committed nothing (fenced, or their own key's retention decision).
      if (e instanceof Conflict || (e as { code?: string }).code === 'MAINTENANCE') return;
      throw e;
    }
    if (present) protectedKeys.add(keyOf(ref.n));
  };
  const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock, layout: i.ctx.layout });
  for (const step of steps) {
    if (step.kind === 'ref') await publish(step.ref);
    else if (step.kind === 'advance') i.ctx.clock.advance(step.days * DAY_MS);
    else {
      const host = runHost(i.ctx, {
        restore,
        ...(step.during ? { beforeFence: () => publish(step.during as Ref) } : {}),
        ...(step.inside ? { inside: () => publish(step.inside as Ref) } : {}),
      });
      const r = await retention.run(await epochOf(i.ctx), step.action, host, { maxArtifacts: 1000 });
      assert.ok(['DONE', 'NOTHING_TO_DO'].includes(r.status), `${r.status}: ${r.reason}`);
      for (const k of r.purged)
        assert.ok(!protectedKeys.has(k), `${k} was purged after a reference to it committed (${JSON.stringify(steps)})`);
    }
    for (const k of protectedKeys) assert.ok(await i.ctx.content.head(k), `${k} is gone although referenced (${JSON.stringify(steps)})`);
  }
}
