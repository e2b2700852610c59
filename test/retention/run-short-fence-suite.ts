/**
 * Issue 17 items 3, 6 and B9/B10/B11/B14 on every engine: the plan is made outside the fence, the
 * approval binds the reviewed plan's digest, and under the fence a run only re-validates against what
 * changed since the plan. Tests named after the seed sentence they prove where there is one.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RESERVATION_PREFIX } from '../../src/audit/chain.ts';
import type { ContentStore } from '../../src/content/content-store.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { IntegrityError, MaintenanceInProgress } from '../../src/core/errors.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { localTrustedHost } from '../../src/retention/host.ts';
import { addPin } from '../../src/retention/pins.ts';
import { retentionStatus } from '../../src/retention/report.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import type { TransactOp } from '../../src/store/item-store.ts';
import { readFence } from '../../src/system/fence.ts';
import { recoverMaintenance } from '../../src/system/recovery.ts';
import { advanceEpoch } from '../../src/system/state.ts';
import { type Engine, epochOf, installationsOf, operator, type RetentionInstallation } from '../helpers/retention-harness.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice } from '../helpers/walk.ts';
import { type RunHostOptions, runHost, seedStyleHost } from './run-harness.ts';

/** The installation's content store with `delete` failing after (or before) the unlink: a purge cut short. */
export function cutDeletes(content: ContentStore, after: boolean): ContentStore {
  return new Proxy(content, {
    get(target, prop) {
      if (prop === 'delete')
        return async (key: string) => {
          if (after) await target.delete(key);
          throw new Error(after ? 'crash after unlink' : 'killed before the first unlink');
        };
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

export function shortFenceSuite(engine: Engine): void {
  describe(`retention plan outside the fence, a short fence (issue 17) on ${engine.name}`, () => {
    const fresh = installationsOf(engine);
    const orphan = async (i: RetentionInstallation, key: string, data: string) => (await i.ctx.content.put(key, bytesOf(data))).digest;
    const retentionOf = (i: RetentionInstallation, content: ContentStore = i.ctx.content) =>
      new ArtifactRetention(i.ctx.items, content, { clock: i.ctx.clock, layout: i.ctx.layout });
    const run = async (i: RetentionInstallation, action: 'QUARANTINE' | 'PURGE', o: RunHostOptions, planDigest?: string) =>
      retentionOf(i).run(await epochOf(i.ctx), action, runHost(i.ctx, o), planDigest ? { planDigest } : {});
    /** Observes the orphans now and lets their grace pass: the next QUARANTINE plan has them. */
    const graceDone = async (i: RetentionInstallation, restore: string) => {
      await run(i, 'QUARANTINE', { restore });
      i.ctx.clock.advance(7 * DAY_MS);
    };
    const retentionStatusOf = async (i: RetentionInstallation) =>
      ((await retentionStatus(i.ctx)).recent_runs as Array<{ status: string; action: string }>)
        .filter((r) => r.action === 'QUARANTINE')
        .slice(0, 2);
    const toPurgeable = async (i: RetentionInstallation, restore: string) => {
      await graceDone(i, restore);
      await run(i, 'QUARANTINE', { restore });
      i.ctx.clock.advance(30 * DAY_MS);
    };

    it('a reference committed between plan and run drops that candidate under the fence: by key, by digest in a new version', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      const byKey = 'artifacts/s/v1/named-later-by-key';
      await orphan(i, byKey, 'named by key after the plan');
      const sameBytes = 'republished later as a new version';
      await orphan(i, 'artifacts/s/v1/same-digest-later', sameBytes);
      await orphan(i, 'artifacts/s/v1/stays-orphan', 'nobody');
      await graceDone(i, restore);
      const planned = await retentionOf(i).plan(await epochOf(i.ctx), 'QUARANTINE');
      assert.equal(planned.plan.candidates.length, 3);
      const r = await run(
        i,
        'QUARANTINE',
        {
          restore,
          beforeFence: async () => {
            await createArtifact(i.ctx, agent, { name: 'names a key', filename: 'f', body: bytesOf('x'), labels: { source: byKey } });
            await createArtifact(i.ctx, agent, { name: 'same bytes', filename: 'f', body: bytesOf(sameBytes) });
          },
        },
        planned.plan_digest,
      );
      assert.equal(r.status, 'DONE', r.reason);
      assert.deepEqual(r.quarantined, ['artifacts/s/v1/stays-orphan']);
      const dropped = r.skipped.filter((s) => /referenced since the plan/.test(s.reason)).map((s) => s.key);
      assert.deepEqual(dropped.sort(), [byKey, 'artifacts/s/v1/same-digest-later'].sort());
      const obs = await retentionOf(i).observations();
      assert.equal(obs.get(byKey), undefined, 'its eligibility is reset');
      assert.equal(obs.get('artifacts/s/v1/stays-orphan')?.state, 'QUARANTINED');
    });

    it('a reference committed between plan and run drops that candidate under the fence: by in-flight reservation', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      const { version } = await createArtifact(i.ctx, agent, { name: 'runs', filename: 'f', body: bytesOf('the job') });
      await propose(i.ctx, agent, version.artifact_id, 1);
      await decide(i.ctx, alice, version.artifact_id, 1, { decision: 'APPROVE', evidenceRef: 'CR-1' });
      const exec = await startExecution(i.ctx, agent, version.artifact_id, 1);
      // A writer that died between publication and commit left its bytes at the output's key.
      const key = `executions/${exec.run_id}/stdout.log`;
      await orphan(i, key, 'the log');
      await graceDone(i, restore);
      let open: () => void = () => {};
      const gate = new Promise<void>((r) => {
        open = r;
      });
      let upload: Promise<unknown> | undefined;
      const r = await run(i, 'QUARANTINE', {
        restore,
        beforeFence: async () => {
          // The retry reserves the output and then streams slowly: in flight while the run takes the fence.
          upload = uploadOutput(
            i.ctx,
            agent,
            exec.run_id,
            'stdout.log',
            (async function* () {
              await gate;
              yield Buffer.from('the log');
            })(),
          );
          for (let n = 0; n < 200 && !(await i.ctx.items.get({ PK: exec.PK, SK: exec.SK }))?.[`${RESERVATION_PREFIX}stdout.log`]; n++)
            await new Promise((res) => setTimeout(res, 5));
        },
      });
      assert.deepEqual(r.quarantined, []);
      assert.ok(
        r.skipped.some((s) => s.key === key && /referenced since the plan \(in-flight upload/.test(s.reason)),
        JSON.stringify(r.skipped),
      );
      open();
      await upload;
    });

    it('the plan digest binds the review: a run whose recomputed plan differs is REFUSED naming both digests, the same plan is carried out', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      await orphan(i, 'artifacts/d/v1/a', 'a');
      await orphan(i, 'artifacts/d/v1/c', 'c');
      await graceDone(i, restore);
      const reviewed = await retentionOf(i).plan(await epochOf(i.ctx), 'QUARANTINE');
      assert.equal(reviewed.plan.candidates.length, 2);
      assert.equal(
        reviewed.plan_digest,
        (await retentionOf(i).plan(await epochOf(i.ctx), 'QUARANTINE')).plan_digest,
        'a plan is reproducible',
      );
      // Something changes after the review: c is referenced again, so the plan a run recomputes has only a.
      await createArtifact(i.ctx, agent, { name: 'names c', filename: 'f', body: bytesOf('x'), labels: { source: 'artifacts/d/v1/c' } });
      const refused = await run(i, 'QUARANTINE', { restore }, reviewed.plan_digest);
      assert.equal(refused.status, 'REFUSED');
      assert.ok(refused.reason?.includes(reviewed.plan_digest) && refused.reason.includes(refused.plan_digest as string), refused.reason);
      assert.match(refused.reason as string, /alp retention plan/);
      assert.deepEqual(refused.quarantined, []);
      assert.equal(refused.fence_ms, 0, 'refused before the fence');
      assert.equal((await retentionOf(i).observations()).get('artifacts/d/v1/c')?.state, 'GRACE', 'a refused run writes nothing');
      const again = await retentionOf(i).plan(await epochOf(i.ctx), 'QUARANTINE');
      const done = await run(i, 'QUARANTINE', { restore }, again.plan_digest);
      assert.deepEqual(done.quarantined, ['artifacts/d/v1/a']);
      assert.deepEqual(done.reset, ['artifacts/d/v1/c']);
    });

    it('a competing run that committed between the plan and the fence makes the plan stale: REFUSED, journaled, nothing acted on twice', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      await orphan(i, 'artifacts/c/v1/a', 'a');
      await graceDone(i, restore);
      let inner: Awaited<ReturnType<typeof run>> | undefined;
      const outer = await run(i, 'QUARANTINE', {
        restore,
        beforeFence: async () => {
          inner = await run(i, 'QUARANTINE', { restore });
        },
      });
      assert.deepEqual(inner?.quarantined, ['artifacts/c/v1/a']);
      assert.equal(outer.status, 'REFUSED');
      assert.match(outer.reason as string, /observations changed since the plan/);
      assert.deepEqual(outer.quarantined, []);
      const status = await retentionStatusOf(i);
      assert.deepEqual(
        status.map((r) => r.status),
        ['REFUSED', 'DONE'],
      );
    });

    it('a publisher is refused only while the fence is held (not during the plan); fence_ms is reported; retention fences readers too', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      await orphan(i, 'artifacts/f/v1/a', 'a');
      await graceDone(i, restore);
      const seen: Record<string, unknown> = {};
      const retention = retentionOf(i);
      const r = await retention.run(
        await epochOf(i.ctx),
        'QUARANTINE',
        runHost(i.ctx, {
          restore,
          beforeFence: async () => {
            seen.fenceBefore = await readFence(i.ctx);
            seen.before = await createArtifact(i.ctx, agent, { name: 'during plan', filename: 'f', body: bytesOf('p') }).then(() => 'ok');
          },
          inside: async () => {
            seen.fenceInside = await readFence(i.ctx);
            seen.inside = await createArtifact(i.ctx, agent, { name: 'under fence', filename: 'f', body: bytesOf('q') }).catch((e) => e);
          },
        }),
        {
          onProgress: () => {
            seen.scanning = true;
          },
        },
      );
      assert.equal(r.status, 'DONE', r.reason);
      assert.equal(seen.fenceBefore, undefined, 'no fence while planning');
      assert.equal(seen.before, 'ok');
      assert.ok(seen.inside instanceof MaintenanceInProgress, String(seen.inside));
      assert.equal((seen.fenceInside as { readers?: boolean }).readers, true, 'retention fences readers');
      assert.ok(
        Number.isFinite(r.fence_ms) && r.fence_ms > 0 && Number.isFinite(r.plan_ms),
        `fence ${r.fence_ms} ms, plan ${r.plan_ms} ms`,
      );
      process.stdout.write(`# fence_ms ${r.fence_ms} plan_ms ${r.plan_ms} (${engine.name}, 1 candidate)\n`);
      assert.equal(await readFence(i.ctx), undefined);
    });

    it('what changed while the plan was approved is folded before the fence: under it, only what changed after (issue 17 item 3)', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      await orphan(i, 'artifacts/f/v1/a', 'a');
      await graceDone(i, restore);
      const key = 'artifacts/f/v1/named';
      await orphan(i, key, 'named while approving');
      const r = await run(i, 'QUARANTINE', {
        restore,
        beforeFence: async () => {
          // Each creation writes several items (version, HEAD, name, audit…): at least 15 in all.
          for (let n = 0; n < 5; n++) await createArtifact(i.ctx, agent, { name: `approving ${n}`, filename: 'f', body: bytesOf(`b${n}`) });
          await i.ctx.items.put({ PK: 'TEST#ref', SK: 'x', type: 'test', names: key });
        },
      });
      assert.equal(r.status, 'DONE', r.reason);
      assert.ok(!r.quarantined.includes(key), 'named before the fence: kept');
      assert.ok(r.quarantined.includes('artifacts/f/v1/a'));
      const items = i.ctx.items as typeof i.ctx.items & { changeMark(): Promise<string> };
      if (await items.changesAnswerable?.(await items.changeMark()))
        assert.ok((r.scan.refreshed ?? Number.NaN) < 15, `the fenced refresh folded ${r.scan.refreshed} items`);
      // A store whose change read is the whole table (DynamoDB, for now) folds everything under the fence, once.
      else assert.ok((r.scan.refreshed ?? 0) >= 15, `the fenced refresh folded ${r.scan.refreshed} items`);
    });

    it('a new reference to a missing interrupted purge fails closed — by key only, like a digest reference (B10)', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      const key = 'artifacts/k/v1/named-by-key';
      const digest = await orphan(i, key, 'gone for good');
      await toPurgeable(i, restore);
      const cut = retentionOf(i, cutDeletes(i.ctx.content, true));
      await assert.rejects(cut.run(await epochOf(i.ctx), 'PURGE', runHost(i.ctx, { restore, holdOnFailure: false })), /crash after unlink/);
      assert.equal((await retentionOf(i).observations()).get(key)?.state, 'PREPARED');
      assert.equal(await i.ctx.content.head(key), undefined);
      // A key-only reference: a label naming the object key, not its digest.
      await createArtifact(i.ctx, agent, { name: 'wants it', filename: 'f', body: bytesOf('x'), labels: { source: key } });
      for (const action of ['PURGE', 'QUARANTINE'] as const) {
        const err = await run(i, action, { restore }).catch((e: unknown) => e);
        assert.ok(err instanceof IntegrityError, `${action}: ${String(err)} ${JSON.stringify(err)}`);
        assert.ok(err.message.includes(key) && err.message.includes(digest), err.message);
      }
      assert.notEqual((await retentionOf(i).observations()).get(key)?.state, 'PURGED', 'never marked PURGED');
    });

    it('a new reference to a missing interrupted purge fails closed in maintenance recovery too — by key only (B10)', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      const key = 'artifacts/k/v1/recovered-by-key';
      await orphan(i, key, 'gone before recovery');
      await toPurgeable(i, restore);
      // The default host keeps the fence after the crash: recovery in a new epoch reviews the purge.
      const cut = retentionOf(i, cutDeletes(i.ctx.content, true));
      await assert.rejects(cut.run(await epochOf(i.ctx), 'PURGE', runHost(i.ctx, { restore })), /crash after unlink/);
      assert.ok(await readFence(i.ctx), 'the fence stays held');
      // Publishers are fenced now; the reference arrives as an item the scan reads (what a metadata
      // repair or a restored item would be): a string naming the object key, not its digest.
      await i.ctx.items.put({ PK: 'TEST#b10', SK: 'REF', type: 'test_reference', names: key });
      await advanceEpoch(i.ctx.items, operator.id, 'purge died', i.ctx.clock.now().toISOString());
      const err = await recoverMaintenance(i.ctx, await epochOf(i.ctx), 'recovery by os:operator').catch((e: unknown) => e);
      assert.ok(err instanceof IntegrityError, String(err));
      assert.ok(err.message.includes(key), err.message);
      assert.ok(await readFence(i.ctx), 'fails closed: the fence stays held');
    });

    it("the library's default trusted host keeps the fence held after a failed purge (review and retry under maintenance before publishers resume)", async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      await orphan(i, 'artifacts/h/v1/a', 'a');
      await toPurgeable(i, restore);
      const libraryHost = localTrustedHost(i.ctx, { owner: 'library host', approver: operator, evidenceRef: 'CHG-9', restore });
      const cut = retentionOf(i, cutDeletes(i.ctx.content, false));
      await assert.rejects(cut.run(await epochOf(i.ctx), 'PURGE', libraryHost), /killed before the first unlink/);
      const fence = await readFence(i.ctx);
      assert.ok(fence, 'the failed purge left its fence');
      assert.equal(fence.readers, true);
      const publisher = await createArtifact(i.ctx, agent, { name: 'too early', filename: 'f', body: bytesOf('x') }).catch((e) => e);
      assert.ok(publisher instanceof MaintenanceInProgress, String(publisher));
    });

    it('republished digests start a new grace period: bytes changed after the first observation are a new observation, and a pin of the new digest protects them (B11)', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      const key = 'artifacts/b/v1/rewritten';
      const first = await orphan(i, key, 'first bytes');
      await run(i, 'QUARANTINE', { restore });
      i.ctx.clock.advance(6 * DAY_MS);
      // Rewritten behind ALP's back with bytes of the same size (the listing cannot tell).
      await i.ctx.content.delete(key);
      const second = await orphan(i, key, 'other bytes');
      assert.notEqual(first, second);
      i.ctx.clock.advance(DAY_MS);
      const pinned = await run(i, 'QUARANTINE', { restore, pins: [second] });
      assert.deepEqual(pinned.quarantined, [], 'the pin of the new digest protects it');
      assert.equal((await retentionOf(i).observations()).get(key), undefined, 'the old observation lapsed');
      const restart = await run(i, 'QUARANTINE', { restore });
      assert.deepEqual(restart.observed, [key], 'a new first observation');
      assert.equal(restart.status, 'NOTHING_TO_DO');
      const o = (await retentionOf(i).observations()).get(key);
      assert.equal(o?.first_observed_at, i.ctx.clock.now().toISOString(), 'its grace starts now');
      // Quarantined only once a grace period has passed with its current bytes: the chosen candidate is
      // re-hashed, and a digest the listing still had from before the rewrite (an index entry written
      // for the old bytes, same size) starts one more grace period instead of being quarantined.
      let quarantined: string | undefined;
      for (let n = 0; n < 2 && !quarantined; n++) {
        i.ctx.clock.advance(7 * DAY_MS);
        const r = await run(i, 'QUARANTINE', { restore });
        if (r.quarantined.includes(key)) quarantined = (await retentionOf(i).observations()).get(key)?.digest;
      }
      assert.equal(quarantined, second, 'quarantined with the digest of its current bytes');
    });

    it("a host written the seed's way (withMaintenance(epoch, fn) calling fn()) works: the run takes ALP's own fence inside the host's callback, readers too", async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      await orphan(i, 'artifacts/w/v1/a', 'a');
      await graceDone(i, restore);
      const seen: Array<Awaited<ReturnType<typeof readFence>>> = [];
      const watched = new Proxy(i.ctx.items, {
        get(target, prop) {
          if (prop === 'transactWrite')
            return async (ops: TransactOp[], o?: Parameters<typeof target.transactWrite>[1]) => {
              if (ops.some((op) => op.op === 'update' && op.update.set?.state === 'QUARANTINED'))
                seen.push(await readFence({ items: target }));
              return target.transactWrite(ops, o);
            };
          const v = Reflect.get(target, prop, target);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
      const host = seedStyleHost(i.ctx, { restore });
      const r = await new ArtifactRetention(watched, i.ctx.content, { clock: i.ctx.clock, layout: i.ctx.layout }).run(
        await epochOf(i.ctx),
        'QUARANTINE',
        host,
      );
      assert.equal(r.status, 'DONE', r.reason);
      assert.deepEqual(r.quarantined, ['artifacts/w/v1/a']);
      assert.equal(host.entered, 1);
      assert.equal(seen.length, 1);
      assert.equal(seen[0]?.purpose, 'retention', "the quarantine committed under ALP's fence");
      assert.equal(seen[0]?.readers, true);
      assert.equal(await readFence(i.ctx), undefined, 'released when the call returned');
    });

    it('persistent pins are honoured by every run and recorded with a prepared purge', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      const kept = await orphan(i, 'artifacts/p/v1/kept', 'kept by a stored pin');
      await orphan(i, 'artifacts/p/v1/reclaimed', 'reclaimed');
      await addPin(i.ctx, kept, operator, 'legal hold');
      await toPurgeable(i, restore);
      const cut = retentionOf(i, cutDeletes(i.ctx.content, false));
      await assert.rejects(cut.run(await epochOf(i.ctx), 'PURGE', runHost(i.ctx, { restore, holdOnFailure: false })));
      const obs = await retentionOf(i).observations();
      assert.equal(obs.get('artifacts/p/v1/kept'), undefined, 'never observed: pinned');
      assert.deepEqual(obs.get('artifacts/p/v1/reclaimed')?.pins, [kept], 'the stored pin is recorded with the prepared purge');
    });
  });
}
