/**
 * Racing proposals over generated interleavings (issue 16 item 5): two or three proposers of different
 * versions of one artifact with more open versions than one transaction holds (so each proposes in
 * chunks), every store call of theirs released in an order fast-check's scheduler picks. Whatever the
 * order: at most one version PROPOSED or APPROVED, it is the highest version whose propose returned,
 * every version below it is settled, and the audit chain verifies. Real code on SQLite; the scheduler
 * decides when each store call starts (fc.scheduler's scheduleFunction), which is the only freedom a
 * real concurrent run has.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { listVersions } from '../../src/lifecycle/versions.ts';
import type { ItemStore } from '../../src/store/item-store.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

const VERSIONS = 40;

/**
 * A view of the store whose calls' results reach their callers only when the scheduler says so.
 * fc.scheduler calls the store at once and observes the promise only when it releases the result, so
 * a call that fails before that (the SQLite engine settles a group commit's callers after the batch's
 * COMMIT, in a later turn) would be an unhandled rejection; the view marks the store's promise
 * handled, and the caller still gets the rejection when the scheduler releases it.
 */
function scheduled(items: ItemStore, s: fc.Scheduler): ItemStore {
  const observed = <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    s.scheduleFunction((...args: A) => {
      const p = call(...args);
      p.catch(() => {});
      return p;
    });
  const view = Object.create(items) as ItemStore;
  view.get = observed((key: Parameters<ItemStore['get']>[0], opts?: Parameters<ItemStore['get']>[1]) => items.get(key, opts));
  view.query = observed((q: Parameters<ItemStore['query']>[0]) => items.query(q));
  view.transactWrite = observed((ops: Parameters<ItemStore['transactWrite']>[0]) => items.transactWrite(ops));
  return view;
}

describe('racing proposals over generated interleavings', () => {
  it('end with at most one open proposal: the highest one that returned', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.uniqueArray(fc.integer({ min: 34, max: VERSIONS }), { minLength: 2, maxLength: 3 }),
        async (s, targets) => {
          const ctx = await embeddedContext();
          try {
            const { version } = await createArtifact(ctx, agent, { name: 'race', filename: 'f', body: bytesOf('1') });
            const id = version.artifact_id;
            for (let i = 2; i <= VERSIONS; i++) await addVersion(ctx, agent, id, { filename: 'f', body: bytesOf(`${i}`) });
            const racing = { ...ctx, items: scheduled(ctx.items, s) };
            const runs = targets.map((n) =>
              propose(racing, agent, id, n).then(
                () => ({ n, ok: true }),
                (e: unknown) => ({ n, ok: false, e }),
              ),
            );
            await s.waitFor(Promise.all(runs));
            const outcomes = await Promise.all(runs);
            const states = (await listVersions(ctx.items, id)).map((v) => v.state);
            const open = states.flatMap((st, i) => (st === 'PROPOSED' || st === 'APPROVED' ? [i + 1] : []));
            const returned = outcomes.filter((o) => o.ok).map((o) => o.n);
            assert.ok(open.length <= 1, `open proposals ${open.join(', ')}`);
            assert.deepEqual(open, returned.length ? [Math.max(...returned)] : [], `returned ${returned.join(', ')}`);
            if (open[0] !== undefined) assert.ok(states.slice(0, open[0] - 1).every((st) => st === 'SUPERSEDED'));
            for (const o of outcomes) if (!o.ok) assert.match(String((o as { e: unknown }).e), /SUPERSEDED|busy|changed|PROPOSED/);
            assert.deepEqual((await verifyArtifactAudit(ctx, id)).findings, []);
          } finally {
            await ctx.items.close();
          }
        },
      ),
      { numRuns: 12 },
    );
  });
});
