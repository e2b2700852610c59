/**
 * Seed 004, "Retain references before considering age" and "Trusted maintenance contract", one test
 * per rule, named after the sentence it proves. Runs on every engine (retention.test.ts,
 * retention-distributed.test.ts). Time moves through the injected clock.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import type { ContentStore } from '../../src/content/content-store.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { sha256 } from '../../src/core/digest.ts';
import { type AlpError, IntegrityError, InvalidInput, MaintenanceInProgress, RestoreHeld, StaleEpoch } from '../../src/core/errors.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import { createBackup } from '../../src/recovery/backup.ts';
import { openBackup } from '../../src/recovery/backup-format.ts';
import { retentionMaterialDigest } from '../../src/retention/model.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import { advanceEpoch, restoreHoldKey } from '../../src/system/state.ts';
import { type Engine, epochOf, host, installationsOf, operator, type RetentionInstallation } from '../helpers/retention-harness.ts';
import { bytesOf, collect, tempDir } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';
import { type RunHostOptions, runHost } from './run-harness.ts';

/** The content store with its delete replaced by `fn` (which may call the real one): a fault seen by one run only. */
function withDelete(content: ContentStore, fn: (real: (key: string) => Promise<boolean>, key: string) => Promise<boolean>): ContentStore {
  return new Proxy(content, {
    get(target, prop) {
      if (prop === 'delete') return (key: string) => fn((k) => target.delete(k), key);
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

export function retentionSuite(engine: Engine): void {
  describe(`ArtifactRetention (seed 004) on ${engine.name}`, () => {
    const fresh = installationsOf(engine);

    const orphan = async (i: RetentionInstallation, key: string, data: string | Buffer) =>
      (await i.ctx.content.put(key, bytesOf(data))).digest;
    const run = async (
      i: RetentionInstallation,
      action: 'QUARANTINE' | 'PURGE',
      r: string,
      o: Partial<RunHostOptions> = {},
      max?: number,
      content: ContentStore = i.ctx.content,
    ) => {
      const retention = new ArtifactRetention(i.ctx.items, content, { clock: i.ctx.clock });
      try {
        return await retention.run(await epochOf(i.ctx), action, runHost(i.ctx, { restore: r, ...o }), max ? { maxArtifacts: max } : {});
      } finally {
        await retention.close();
      }
    };
    /** Observe now, let the grace pass, quarantine (approved), let the quarantine pass. */
    const toPurgeable = async (i: RetentionInstallation, r: string) => {
      await run(i, 'QUARANTINE', r);
      i.ctx.clock.advance(7 * DAY_MS);
      const q = await run(i, 'QUARANTINE', r);
      i.ctx.clock.advance(30 * DAY_MS);
      return q;
    };

    it('scans persisted state, retained audit history and host-provided SHA-256 pins', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      const inItem = await orphan(i, 'artifacts/x/v1/named-by-item', 'a');
      const inAudit = await orphan(i, 'artifacts/x/v1/named-by-audit', 'b');
      const pinned = await orphan(i, 'artifacts/x/v1/pinned', 'c');
      const loose = await orphan(i, 'artifacts/x/v1/loose', 'd');
      const { version } = await createArtifact(i.ctx, agent, {
        name: 'refs',
        filename: 'f',
        body: bytesOf('x'),
        labels: { source: inItem },
      });
      await addProvenance(i.ctx, agent, version.artifact_id, { action: 'derive', inputs: [inAudit] });
      const result = await run(i, 'QUARANTINE', r, { pins: [pinned] });
      assert.deepEqual(result.observed, ['artifacts/x/v1/loose']);
      assert.equal(result.status, 'NOTHING_TO_DO');
      void loose;
    });

    it('follows digest references through artifact contents using 64 KiB reads, across read boundaries, gzip and three levels deep', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      const level3 = await orphan(i, 'artifacts/o/v1/level3', 'the bottom');
      const level2 = await orphan(i, 'artifacts/o/v1/level2', `points to ${level3}`);
      const level1 = await orphan(i, 'artifacts/o/v1/level1.gz', gzipSync(Buffer.from(`compressed pointer ${level2}`)));
      const straddled = await orphan(i, 'artifacts/o/v1/straddled', 'kept by a reference split across two reads');
      const padding = Buffer.alloc(64 * 1024 - 30, 'x');
      const body = Buffer.concat([padding, Buffer.from(` ${straddled} `), Buffer.from(` and ${level1} `)]);
      await createArtifact(i.ctx, agent, { name: 'pointer', filename: 'index.txt', body: bytesOf(body) });
      await orphan(i, 'artifacts/o/v1/unreferenced', 'nobody points here');
      const result = await run(i, 'QUARANTINE', r);
      assert.deepEqual(result.observed, ['artifacts/o/v1/unreferenced']);
    });

    it('conservative digest matching can retain extra files', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      const d = await orphan(i, 'artifacts/c/v1/kept', 'kept by a digest in free text');
      await createArtifact(i.ctx, agent, {
        name: 'note',
        filename: 'note.md',
        body: bytesOf(`# notes\nsomething like ${d} appears here\n`),
      });
      assert.deepEqual((await run(i, 'QUARANTINE', r)).observed, []);
    });

    it('only unreferenced immutable digest files are eligible (provenance documents and history segments never are)', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      await orphan(i, 'provenance/ZZZ.json', '{"mutable":true}');
      await orphan(i, 'history/segments/ZZZ/abc.jsonl.gz', 'segment');
      await orphan(i, 'executions/RUN/stdout.log', 'orphan log');
      await orphan(i, 'archive/2026/01/ZZZ/v1/f', 'orphan archive copy');
      const result = await run(i, 'QUARANTINE', r);
      assert.deepEqual(result.observed.sort(), ['archive/2026/01/ZZZ/v1/f', 'executions/RUN/stdout.log']);
    });

    it('a first observation starts a 7-day orphan grace period; modification times do not establish age', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      await orphan(i, 'artifacts/g/v1/old-looking', 'written long ago, by its mtime');
      const first = await run(i, 'QUARANTINE', r);
      assert.equal(first.status, 'NOTHING_TO_DO');
      i.ctx.clock.advance(7 * DAY_MS - 1);
      assert.equal((await run(i, 'QUARANTINE', r)).status, 'NOTHING_TO_DO');
      i.ctx.clock.advance(1);
      const due = await run(i, 'QUARANTINE', r);
      assert.equal(due.status, 'DONE');
      assert.deepEqual(due.quarantined, ['artifacts/g/v1/old-looking']);
    });

    it('approved candidates enter logical quarantine for 30 days: bytes remain readable at their original path and remain included in ordinary backups', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      await orphan(i, 'artifacts/q/v1/f', 'still here');
      await toPurgeable(i, r);
      const out = path.join(tempDir('alp-qbackup'), 'b');
      await createBackup(i.ctx, { out, actor: operator.id, withContent: true });
      const listed: Array<{ key: string; retained?: boolean }> = [];
      for await (const o of (await openBackup(out)).objects()) listed.push(o);
      assert.deepEqual(
        listed.filter((o) => o.key === 'artifacts/q/v1/f').map((o) => o.retained),
        [true],
        'the quarantined object is in the backup, marked as retained (not a reference)',
      );
      i.ctx.clock.advance(-1);
      assert.equal((await run(i, 'PURGE', r)).status, 'NOTHING_TO_DO', 'not before 30 days');
      assert.equal((await collect(await i.ctx.content.readRaw('artifacts/q/v1/f'))).toString(), 'still here');
      i.ctx.clock.advance(1);
      const purge = await run(i, 'PURGE', r);
      assert.deepEqual(purge.purged, ['artifacts/q/v1/f']);
      assert.equal(await i.ctx.content.head('artifacts/q/v1/f'), undefined);
    });

    it('a separately approved purge rechecks references and verifies file digests before unlinking', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      const again = await orphan(i, 'artifacts/p/v1/referenced-again', 'one');
      await orphan(i, 'artifacts/p/v1/tampered', 'two');
      await toPurgeable(i, r);
      await createArtifact(i.ctx, agent, { name: 'late ref', filename: 'f', body: bytesOf(`needs ${again}`) });
      // Tampering behind ALP's back (an immutable key is never rewritten through the store itself).
      await i.ctx.content.delete('artifacts/p/v1/tampered');
      await i.ctx.content.put('artifacts/p/v1/tampered', bytesOf('TWO'));
      const purge = await run(i, 'PURGE', r);
      assert.deepEqual(purge.purged, []);
      assert.ok(purge.reset.includes('artifacts/p/v1/referenced-again'));
      assert.ok(await i.ctx.content.head('artifacts/p/v1/referenced-again'));
      assert.ok(await i.ctx.content.head('artifacts/p/v1/tampered'));
    });

    it('references discovered again reset eligibility; republished digests start a new grace period', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      const d = await orphan(i, 'artifacts/r/v1/f', 'comes and goes');
      await run(i, 'QUARANTINE', r);
      i.ctx.clock.advance(6 * DAY_MS);
      // The host pins it for a while: a reference discovered again.
      assert.deepEqual((await run(i, 'QUARANTINE', r, { pins: [d] })).reset, ['artifacts/r/v1/f']);
      i.ctx.clock.advance(2 * DAY_MS);
      const observedAgain = await run(i, 'QUARANTINE', r);
      assert.deepEqual(observedAgain.observed, ['artifacts/r/v1/f'], 'a new first observation');
      assert.equal(observedAgain.status, 'NOTHING_TO_DO', 'the grace period starts again');
      // Purge it, then publish the same bytes again: a new grace period.
      i.ctx.clock.advance(7 * DAY_MS);
      await run(i, 'QUARANTINE', r);
      i.ctx.clock.advance(30 * DAY_MS);
      assert.deepEqual((await run(i, 'PURGE', r)).purged, ['artifacts/r/v1/f']);
      await orphan(i, 'artifacts/r/v1/f', 'comes and goes');
      const republished = await run(i, 'QUARANTINE', r);
      assert.deepEqual(republished.observed, ['artifacts/r/v1/f']);
      assert.equal(republished.status, 'NOTHING_TO_DO');
    });

    it('approval must identify a human principal and evidence, bind retentionMaterialDigest(plan), remain unexpired, and point to a VERIFIED same-installation restore', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      await orphan(i, 'artifacts/a/v1/f', 'needs approval');
      await run(i, 'QUARANTINE', r);
      i.ctx.clock.advance(7 * DAY_MS);
      const good = (plan: Parameters<typeof retentionMaterialDigest>[0], digest: string) => ({
        principal: operator,
        evidence_ref: 'CHG-9',
        plan_digest: digest,
        expires_at: new Date(i.ctx.clock.now().getTime() + DAY_MS).toISOString(),
        restore: r,
        _plan: plan,
      });
      const other = await (await fresh()).verifiedRestore();
      const cases: Array<[string, (p: never, d: string) => unknown, RegExp]> = [
        ['declined', () => undefined, /did not approve/],
        ['agent', (p, d) => ({ ...good(p, d), principal: { id: 'bot', kind: 'agent' } }), /human/],
        ['no evidence', (p, d) => ({ ...good(p, d), evidence_ref: ' ' }), /evidence/],
        ['wrong digest', (p, d) => ({ ...good(p, d), plan_digest: sha256('another plan') }), /binds/],
        ['expired', (p, d) => ({ ...good(p, d), expires_at: i.ctx.clock.now().toISOString() }), /expired/],
        ['no restore', (p, d) => ({ ...good(p, d), restore: '/nonexistent/alp.db' }), /restore/],
        ['other installation', (p, d) => ({ ...good(p, d), restore: other }), /installation/],
      ];
      for (const [label, approve, reason] of cases) {
        const result = await run(i, 'QUARANTINE', r, { approve: approve as never });
        assert.equal(result.status, 'REFUSED', label);
        assert.match(result.reason as string, reason, label);
        assert.deepEqual(result.quarantined, [], label);
      }
      const ok = await run(i, 'QUARANTINE', r, { approve: good as never });
      assert.deepEqual(ok.quarantined, ['artifacts/a/v1/f']);
      assert.equal(ok.plan_digest, retentionMaterialDigest(ok.plan as never));
    });

    it('held restores and stale epochs reject cleanup', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      const epoch = await epochOf(i.ctx);
      await advanceEpoch(i.ctx.items, 'test', 'takeover', i.ctx.clock.now().toISOString());
      const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
      await assert.rejects(retention.run(epoch, 'QUARANTINE', host(i.ctx, { restore: r })), StaleEpoch);
      await i.ctx.items.put({ ...restoreHoldKey, restore_id: 'R1' });
      await assert.rejects(retention.run(epoch + 1, 'PURGE', host(i.ctx, { restore: r })), RestoreHeld);
      await i.ctx.items.delete(restoreHoldKey);
    });

    it('maintenance fences every publisher and competing maintenance until the call returns (from the moment the fence is taken)', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      let publisher: unknown;
      let competitor: unknown;
      await orphan(i, 'artifacts/f/v1/f', 'x');
      await run(i, 'QUARANTINE', r);
      i.ctx.clock.advance(7 * DAY_MS);
      await run(i, 'QUARANTINE', r, {
        inside: async () => {
          publisher = await createArtifact(i.ctx, agent, { name: 'racing', filename: 'f', body: bytesOf('x') }).catch((e: unknown) => e);
          competitor = await run(i, 'QUARANTINE', r).catch((e: unknown) => e);
        },
      });
      assert.ok(publisher instanceof MaintenanceInProgress, String(publisher));
      assert.ok(competitor instanceof MaintenanceInProgress, String(competitor));
      await createArtifact(i.ctx, agent, { name: 'after', filename: 'f', body: bytesOf('x') });
    });

    it('purge commits PREPARED before touching bytes, then PURGED; an interruption leaves a retryable record; a missing file is accepted only for a prepared purge', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      await orphan(i, 'artifacts/j/v1/interrupted', 'will be cut short');
      await orphan(i, 'artifacts/j/v1/vanished', 'deleted behind our back');
      await toPurgeable(i, r);
      // Interrupt the first purge after its bytes are gone but before PURGED is committed (the run is
      // given a content store whose delete loses power after unlinking; the installation's is untouched).
      let cut = false;
      const cutting = withDelete(i.ctx.content, async (real, key) => {
        const removed = await real(key);
        if (key.endsWith('interrupted') && !cut) {
          cut = true;
          throw new Error('power lost');
        }
        return removed;
      });
      await i.ctx.content.delete('artifacts/j/v1/vanished');
      // A host told not to keep the fence (the default for PURGE keeps it: run-short-fence.test.ts, B9).
      await assert.rejects(run(i, 'PURGE', r, { holdOnFailure: false }, undefined, cutting), /power lost/);
      const observations = await new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock }).observations();
      assert.equal(observations.get('artifacts/j/v1/interrupted')?.state, 'PREPARED');
      const retry = await run(i, 'PURGE', r);
      assert.deepEqual(retry.purged, ['artifacts/j/v1/interrupted'], 'the prepared purge completes although its file is gone');
      assert.ok(retry.skipped.some((s) => s.key === 'artifacts/j/v1/vanished' && /no purge of it was prepared/.test(s.reason)));
      const after = await new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock }).observations();
      assert.equal(after.get('artifacts/j/v1/interrupted')?.state, 'PURGED');
      assert.ok(
        (after.get('artifacts/j/v1/interrupted')?.prepared_at as string) <= (after.get('artifacts/j/v1/interrupted')?.purged_at as string),
      );
    });

    it('a new reference to a missing interrupted purge fails closed, naming the digest', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      const d = await orphan(i, 'artifacts/k/v1/f', 'gone for good');
      await toPurgeable(i, r);
      const crashing = withDelete(i.ctx.content, async (real, key) => {
        await real(key);
        throw new Error('crash after unlink');
      });
      await assert.rejects(run(i, 'PURGE', r, { holdOnFailure: false }, undefined, crashing));
      await createArtifact(i.ctx, agent, { name: 'wants it', filename: 'f', body: bytesOf(`requires ${d}`) });
      const err = await run(i, 'PURGE', r).catch((e: unknown) => e);
      assert.ok(err instanceof IntegrityError, `${String(err)} ${JSON.stringify(err)}`);
      assert.ok((err as AlpError).message.includes(d));
    });

    it('a call handles at most 1,000 candidates (100 by default)', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      for (let n = 0; n < 105; n++) await orphan(i, `artifacts/m/v1/f${String(n).padStart(3, '0')}`, `orphan ${n}`);
      await run(i, 'QUARANTINE', r);
      i.ctx.clock.advance(7 * DAY_MS);
      assert.equal((await run(i, 'QUARANTINE', r)).quarantined.length, 100);
      assert.equal((await run(i, 'QUARANTINE', r, {}, 3)).quarantined.length, 3);
      const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
      await assert.rejects(
        retention.run(await epochOf(i.ctx), 'QUARANTINE', host(i.ctx, { restore: r }), { maxArtifacts: 1001 }),
        InvalidInput,
      );
    });

    it('paths are installation-local: after restore into a different root, a new observation starts a fresh grace period', async () => {
      const i = await fresh();
      const r = await i.verifiedRestore();
      await orphan(i, 'artifacts/l/v1/f', 'x');
      await run(i, 'QUARANTINE', r);
      i.ctx.clock.advance(7 * DAY_MS);
      const elsewhere = await i.withOtherRoot();
      const retention = new ArtifactRetention(elsewhere.items, elsewhere.content, { clock: elsewhere.clock });
      const result = await retention.run(await epochOf(elsewhere), 'QUARANTINE', host(elsewhere, { restore: r }));
      assert.equal(result.status, 'NOTHING_TO_DO');
      assert.deepEqual(result.observed, ['artifacts/l/v1/f']);
    });
  });
}
