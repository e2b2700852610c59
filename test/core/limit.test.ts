import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { forEachLimited } from '../../src/core/limit.ts';

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('forEachLimited', () => {
  it('runs every task with at most `limit` at once', async () => {
    let running = 0;
    let peak = 0;
    const done: number[] = [];
    await forEachLimited(
      Array.from({ length: 20 }, (_, i) => i),
      4,
      async (i) => {
        running++;
        peak = Math.max(peak, running);
        await tick();
        running--;
        done.push(i);
      },
    );
    assert.equal(peak, 4);
    assert.deepEqual(
      done.sort((a, b) => a - b),
      Array.from({ length: 20 }, (_, i) => i),
    );
  });

  it('starts no new task after the first failure, lets the running ones finish, then throws the first failure', async () => {
    const started: number[] = [];
    const finished: number[] = [];
    const boom = new Error('first');
    await assert.rejects(
      forEachLimited(
        Array.from({ length: 20 }, (_, i) => i),
        4,
        async (i) => {
          started.push(i);
          if (i === 0) throw boom;
          await tick();
          await tick();
          if (i === 1) throw new Error('second');
          finished.push(i);
        },
      ),
      (e) => e === boom,
    );
    // Tasks 0..3 were running when task 0 failed; none of the other 16 started.
    assert.deepEqual(started, [0, 1, 2, 3]);
    assert.deepEqual(finished.sort(), [2, 3]);
  });

  it('after a failure at any position, at most `limit` - 1 more tasks start (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 30 }), fc.integer({ min: 1, max: 8 }), fc.nat(), async (n, limit, f) => {
        const failAt = f % n;
        const started: number[] = [];
        await assert.rejects(
          forEachLimited(
            Array.from({ length: n }, (_, i) => i),
            limit,
            async (i) => {
              started.push(i);
              await tick();
              if (i === failAt) throw new Error(`task ${i}`);
            },
          ),
          { message: `task ${failAt}` },
        );
        assert.ok(started.length <= Math.min(n, failAt + limit), `${started.length} started, failure at ${failAt}, limit ${limit}`);
      }),
      { numRuns: 100 },
    );
  });

  it('an empty list does nothing', async () => {
    let calls = 0;
    await forEachLimited([], 4, async () => {
      calls++;
    });
    assert.equal(calls, 0);
  });
});
