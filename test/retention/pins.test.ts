/**
 * Issue 17 B8, seed 004 "ArtifactRetention scans … host-provided SHA-256 pins": persistent pins
 * (retention/pins.ts), on both profiles (SQLite + fs, DynamoDB Local + s3rver). Time moves only through
 * the injected clock. A "crash" of a purge is a content store whose first delete throws (the
 * fault-injection approach of test/retention/suite.ts and test/safety/retention-safety.test.ts).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { checkAuditCounter, establishAuditBaseline } from '../../src/audit/counter.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { Conflict, Forbidden, InvalidInput, MaintenanceInProgress, NotFound } from '../../src/core/errors.ts';
import { PINS_PK, TELQ_FRESH_PREFIX, TELQ_PK } from '../../src/core/keys.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { createBackup } from '../../src/recovery/backup.ts';
import { restoreBackup } from '../../src/recovery/restore.ts';
import { addPin, getPin, listPins, pinHistory, removePin, storedPins } from '../../src/retention/pins.ts';
import { scanReferences } from '../../src/retention/references.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import { createContext } from '../../src/runtime/context.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import { queryAll } from '../../src/store/item-store.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { readFence, withMaintenance } from '../../src/system/fence.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { recoverMaintenance } from '../../src/system/recovery.ts';
import { advanceEpoch } from '../../src/system/state.ts';
import { embeddedContext } from '../helpers/context.ts';
import { stopDistributedServers } from '../helpers/distributed.ts';
import {
  distributed,
  type Engine,
  embedded,
  epochOf,
  host,
  installationsOf,
  observationOf,
  operator,
  plantOrphan,
  purgeDiesAtFirstDelete,
  runRetention,
} from '../helpers/retention-harness.ts';
import { bytesOf, collect, tempDir } from '../helpers/tmp.ts';

after(stopDistributedServers);

const bot = { id: 'bot', kind: 'agent' as const };
const svc = { id: 'svc', kind: 'service' as const };
const hexDigest = (c: string) => `sha256:${c.repeat(64)}`;

async function all<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

function pinsSuite(engine: Engine): void {
  describe(`persistent pins (issue 17 B8) on ${engine.name}`, () => {
    const fresh = installationsOf(engine);
    // Every runRetention here is given no --pin: the host supplies none, so only the stored pins can keep an object.

    it('add, list (paged, digest order), remove; every change recorded with who, when and why', async () => {
      const i = await fresh();
      attachAuditSinks(i.ctx);
      const ds = ['c', 'a', 'e', 'b', 'd'].map(hexDigest);
      for (const d of ds) await addPin(i.ctx, d, operator, `keep ${d.slice(7, 8)}`);
      assert.deepEqual(await storedPins(i.ctx.items), [...ds].sort(), 'sorted digests');
      const paged = await all(listPins(i.ctx.items, { pageSize: 2 }));
      assert.deepEqual(
        paged.map((p) => p.digest),
        [...ds].sort(),
        'pages of 2 give every pin once, in order',
      );
      const a = paged[0];
      assert.deepEqual(a, { digest: hexDigest('a'), reason: 'keep a', added_by: operator, added_at: i.ctx.clock.now().toISOString() });

      await assert.rejects(
        addPin(i.ctx, hexDigest('a'), operator, 'again'),
        (e: Error) => e instanceof Conflict && /pinned already, by os:operator/.test(e.message),
      );
      await assert.rejects(addPin(i.ctx, 'sha256:abc', operator, 'short'), InvalidInput);
      await assert.rejects(addPin(i.ctx, hexDigest('f'), operator, '   '), InvalidInput);
      await assert.rejects(removePin(i.ctx, hexDigest('f'), operator, 'not pinned'), NotFound);

      i.ctx.clock.advance(DAY_MS);
      const removed = await removePin(i.ctx, hexDigest('a'), operator, 'no longer needed');
      assert.equal(removed.at, i.ctx.clock.now().toISOString());
      assert.equal(await getPin(i.ctx.items, hexDigest('a')), undefined);
      assert.deepEqual(await storedPins(i.ctx.items), ['b', 'c', 'd', 'e'].map(hexDigest));

      const history = await all(pinHistory(i.ctx.items, { digest: hexDigest('a') }));
      assert.deepEqual(
        history.map((e) => [e.action, e.by.id, e.by.kind, e.reason]),
        [
          ['added', 'os:operator', 'human', 'keep a'],
          ['removed', 'os:operator', 'human', 'no longer needed'],
        ],
      );
      assert.deepEqual(
        history[1]?.pin,
        { reason: 'keep a', added_by: operator, added_at: a?.added_at },
        'a removal keeps who had added it and why',
      );
      assert.equal((await all(pinHistory(i.ctx.items))).length, 6, 'five adds and one removal, none of the refused changes');

      const outbox = await queryAll(i.ctx.items, { pk: TELQ_PK, sk: { beginsWith: TELQ_FRESH_PREFIX }, consistent: true });
      const types = outbox.map((r) => (r.payload as Record<string, unknown>)?.type).filter((t) => String(t).startsWith('pin_'));
      assert.deepEqual(types.sort(), ['pin_added', 'pin_added', 'pin_added', 'pin_added', 'pin_added', 'pin_removed']);
    });

    it('a pin change is not an audit chain entry: the installation-wide append counter still matches the chains', async () => {
      const i = await fresh();
      await (await attachAuditSinks(i.ctx)).open();
      await initInstallation(i.ctx);
      assert.equal(await establishAuditBaseline(i.ctx), 0);
      const { version } = await createArtifact(i.ctx, bot, { name: 'kept', filename: 'k.sh', body: bytesOf('true\n') });
      await addPin(i.ctx, version.content_hash, operator, 'keep it');
      await removePin(i.ctx, version.content_hash, operator, 'not any more');
      await addPin(i.ctx, hexDigest('a'), operator, 'keep a');
      const counter = await checkAuditCounter(i.ctx);
      assert.deepEqual([counter.status, counter.ok, counter.sum, counter.appended], ['checked', true, 1, 1], counter.detail);
    });

    it('only a human operator changes pins', async () => {
      const i = await fresh();
      for (const who of [bot, svc]) {
        await assert.rejects(
          addPin(i.ctx, hexDigest('a'), who, 'mine'),
          (e: Error) => e instanceof Forbidden && e.message.includes('human'),
        );
      }
      await addPin(i.ctx, hexDigest('a'), operator, 'keep');
      await assert.rejects(removePin(i.ctx, hexDigest('a'), bot, 'drop'), Forbidden);
      assert.deepEqual(await storedPins(i.ctx.items), [hexDigest('a')]);
      assert.equal((await all(pinHistory(i.ctx.items))).length, 1);
    });

    it('a pinned orphan is never quarantined or purged by a run given no --pin; removing the pin lets the normal protocol proceed', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      const kept = await plantOrphan(i, 'artifacts/pin/v1/kept', 'the operator keeps this');
      await plantOrphan(i, 'artifacts/pin/v1/loose', 'nobody wants this');
      await addPin(i.ctx, kept, operator, 'legal hold CHG-17');

      const first = await runRetention(i, 'QUARANTINE', restore);
      assert.deepEqual(first.observed, ['artifacts/pin/v1/loose'], 'the pinned orphan is not even observed');
      i.ctx.clock.advance(7 * DAY_MS);
      assert.deepEqual((await runRetention(i, 'QUARANTINE', restore)).quarantined, ['artifacts/pin/v1/loose']);
      i.ctx.clock.advance(30 * DAY_MS);
      assert.deepEqual((await runRetention(i, 'PURGE', restore)).purged, ['artifacts/pin/v1/loose']);
      assert.equal(await observationOf(i, 'artifacts/pin/v1/kept'), undefined);
      assert.equal((await collect(await i.ctx.content.get('artifacts/pin/v1/kept', kept))).toString(), 'the operator keeps this');

      // Unpinned: its record stays (PINS/LOG#…), but names the digest by hex only — not a reference.
      await removePin(i.ctx, kept, operator, 'hold lifted');
      assert.deepEqual((await runRetention(i, 'QUARANTINE', restore)).observed, ['artifacts/pin/v1/kept'], 'grace starts now');
      i.ctx.clock.advance(7 * DAY_MS);
      assert.deepEqual((await runRetention(i, 'QUARANTINE', restore)).quarantined, ['artifacts/pin/v1/kept']);
      i.ctx.clock.advance(30 * DAY_MS);
      assert.deepEqual((await runRetention(i, 'PURGE', restore)).purged, ['artifacts/pin/v1/kept']);
      assert.equal(
        (await all(pinHistory(i.ctx.items, { digest: kept }))).length,
        2,
        'the record of who pinned and unpinned it outlives the object',
      );
    });

    it('pins change only outside maintenance, or beside a fence abandoned in an older epoch; a purge recovery (alp maintenance release) honours a stored pin', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      const keep = await plantOrphan(i, 'artifacts/rec/v1/keep-me', 'pinned after the crash, before the release');
      await runRetention(i, 'QUARANTINE', restore);
      i.ctx.clock.advance(7 * DAY_MS);
      await runRetention(i, 'QUARANTINE', restore);
      i.ctx.clock.advance(30 * DAY_MS);

      // A live maintenance: pin changes are refused, it read its pins when it began.
      await withMaintenance(i.ctx, await epochOf(i.ctx), 'some maintenance', async () => {
        await assert.rejects(
          addPin(i.ctx, keep, operator, 'during'),
          (e: Error) => e instanceof MaintenanceInProgress && /some maintenance/.test(e.message),
        );
      });
      assert.equal(await getPin(i.ctx.items, keep), undefined);

      // The CLI's PURGE host keeps the fence when the purge dies after PREPARED.
      await purgeDiesAtFirstDelete(i, restore);
      assert.equal((await observationOf(i, 'artifacts/rec/v1/keep-me'))?.state, 'PREPARED');
      await assert.rejects(addPin(i.ctx, keep, operator, 'too early'), MaintenanceInProgress, 'not abandoned yet: its epoch is current');

      await advanceEpoch(i.ctx.items, operator.id, 'purge died', i.ctx.clock.now().toISOString());
      await addPin(i.ctx, keep, operator, 'keep it after all');
      const r = await recoverMaintenance(i.ctx, await epochOf(i.ctx), 'recovery by os:operator');
      const step = r.steps.find((s) => s.name.startsWith('retention'))?.result as Record<string, unknown>;
      assert.deepEqual(step.cancelled, ['artifacts/rec/v1/keep-me'], 'the stored pin cancelled the interrupted purge');
      assert.deepEqual(step.purged, []);
      assert.equal(
        (await collect(await i.ctx.content.get('artifacts/rec/v1/keep-me', keep))).toString(),
        'pinned after the crash, before the release',
      );
      assert.equal(await readFence(i.ctx), undefined);
    });

    it('a pin added while a run is being approved (after its plan, before its fence) is honoured under the fence', async () => {
      const i = await fresh();
      const restore = await i.verifiedRestore();
      const late = await plantOrphan(i, 'artifacts/late/v1/pinned-late', 'pinned between plan and fence');
      await runRetention(i, 'QUARANTINE', restore);
      i.ctx.clock.advance(7 * DAY_MS);
      const during = async () => {
        if (!(await getPin(i.ctx.items, late))) await addPin(i.ctx, late, operator, 'pinned during the approval');
      };
      const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
      const r = await retention.run(await epochOf(i.ctx), 'QUARANTINE', host(i.ctx, { restore, during }));
      await retention.close();
      assert.deepEqual(r.quarantined, [], JSON.stringify({ status: r.status, reason: r.reason, skipped: r.skipped }));
      assert.notEqual((await observationOf(i, 'artifacts/late/v1/pinned-late'))?.state, 'QUARANTINED');
    });

    it('the reference scan itself keeps a pinned digest (the pin item names it); a removed pin names it no more', async () => {
      const i = await fresh();
      const kept = await plantOrphan(i, 'artifacts/scan/v1/kept', 'scan sees the pin');
      await addPin(i.ctx, kept, operator, 'keep');
      const pinned = await scanReferences(i.ctx, {});
      try {
        assert.match(pinned.digestWhy(kept) ?? '', /PINS/, 'no pins passed to the scan: the PINS item is the reference');
        assert.ok(pinned.referencedWhy('artifacts/scan/v1/kept'));
      } finally {
        pinned.close();
      }
      await removePin(i.ctx, kept, operator, 'done');
      const unpinned = await scanReferences(i.ctx, {});
      try {
        assert.equal(unpinned.digestWhy(kept), undefined, 'the PINS/LOG# record names the digest by hex only');
        assert.deepEqual(
          [...unpinned.candidates()].map((o) => o.key),
          ['artifacts/scan/v1/kept'],
        );
      } finally {
        unpinned.close();
      }
    });

    it('pins and their record survive backup and restore', async () => {
      const i = await fresh();
      await addPin(i.ctx, hexDigest('a'), operator, 'keep a');
      await addPin(i.ctx, hexDigest('b'), operator, 'keep b');
      await removePin(i.ctx, hexDigest('b'), operator, 'drop b');
      const out = path.join(tempDir('alp-pins-backup'), 'b');
      await createBackup(i.ctx, { out, actor: operator.id });
      const items = new SqliteItemStore(path.join(tempDir('alp-pins-restore'), 'alp.db'));
      try {
        await restoreBackup(createContext({ items, content: i.ctx.content, clock: i.ctx.clock }), { from: out, actor: operator.id });
        assert.deepEqual(await storedPins(items), [hexDigest('a')]);
        assert.deepEqual(
          (await all(pinHistory(items))).map((e) => [e.action, e.digest, e.reason]),
          (await all(pinHistory(i.ctx.items))).map((e) => [e.action, e.digest, e.reason]),
        );
        assert.equal((await queryAll(items, { pk: PINS_PK, consistent: true })).length, 4, 'one pin and three records');
      } finally {
        await items.close();
      }
    });
  });
}

describe('persistent pins: any sequence of adds and removes (fast-check, SQLite)', () => {
  it('storedPins is the model set, sorted; the record holds exactly the changes that succeeded, in order', async () => {
    const digests = ['a', 'b', 'c', 'd'].map(hexDigest);
    const op = fc.record({ add: fc.boolean(), digest: fc.constantFrom(...digests), human: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 20 }), async (ops) => {
        const ctx = await embeddedContext();
        try {
          const model = new Set<string>();
          const done: Array<[string, string]> = [];
          for (const o of ops) {
            const who = o.human ? operator : bot;
            const change = o.add ? addPin(ctx, o.digest, who, 'prop') : removePin(ctx, o.digest, who, 'prop');
            const expected = !o.human ? Forbidden : o.add === model.has(o.digest) ? (o.add ? Conflict : NotFound) : undefined;
            if (expected) {
              await assert.rejects(change, expected);
              continue;
            }
            await change;
            if (o.add) model.add(o.digest);
            else model.delete(o.digest);
            done.push([o.add ? 'added' : 'removed', o.digest]);
            ctx.clock.advance(1000);
          }
          assert.deepEqual(await storedPins(ctx.items), [...model].sort());
          assert.deepEqual(
            (await all(pinHistory(ctx.items, { pageSize: 3 }))).map((e) => [e.action, e.digest]),
            done,
          );
        } finally {
          await ctx.items.close();
        }
      }),
      { numRuns: 25 },
    );
  });
});

pinsSuite(embedded);
pinsSuite(distributed);
