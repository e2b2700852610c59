/**
 * The wired transparency log (issue 20 item 1) on one engine pair: pending markers in every audit
 * transaction, the leased sequencer round, crash safety at every step (fast-check), the lease.
 * Runs on SQLite + fs (sequencer.sqlite.test.ts) and DynamoDB Local + s3rver (sequencer.dynamodb.test.ts).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import fc from 'fast-check';
import { commitAudited, readHead } from '../../../src/audit/chain.ts';
import { loadChain } from '../../../src/audit/history.ts';
import { chainEntries as logEntries } from '../../../src/audit/tlog/chain-entries.ts';
import { installationLogIds } from '../../../src/audit/tlog/chains.ts';
import { openCheckpoint } from '../../../src/audit/tlog/checkpoint.ts';
import { acquireLease } from '../../../src/audit/tlog/lease.ts';
import { HEAD_QUEUE_MAX, headQueue, isMarker, markerKey, pendingMarkersOf } from '../../../src/audit/tlog/markers.ts';
import { auditLeafHash, hashesEqual, rootOf } from '../../../src/audit/tlog/merkle.ts';
import { verifierOf } from '../../../src/audit/tlog/note.ts';
import { contentTileReader, readLeafEntries } from '../../../src/audit/tlog/objects.ts';
import { forgetPresent } from '../../../src/audit/tlog/rebuild.ts';
import { type RoundStep, runRound } from '../../../src/audit/tlog/sequencer.ts';
import { readLogState } from '../../../src/audit/tlog/state.ts';
import { TiledTree } from '../../../src/audit/tlog/tiles.ts';
import { verifyLogCheckpoint } from '../../../src/audit/tlog/verify.ts';
import { verifyArtifactAudit } from '../../../src/audit/verify.ts';
import { listAll } from '../../../src/content/content-store.ts';
import type { ManualClock } from '../../../src/core/clock.ts';
import type { Digest } from '../../../src/core/digest.ts';
import { createArtifact } from '../../../src/lifecycle/artifacts.ts';
import type { ServiceContext } from '../../../src/runtime/context.ts';
import { installationSigner } from '../../../src/system/installation-key.ts';
import { bulkAuditPlan } from '../../helpers/audit-plan.ts';
import { bytesOf } from '../../helpers/tmp.ts';
import { agent } from '../../helpers/walk.ts';

export interface SequencerHarness {
  name: string;
  /** A fresh installation (record made, sinks attached, a signing key). */
  open(): Promise<{ ctx: ServiceContext & { clock: ManualClock }; close(): Promise<void> }>;
  runs: number;
}

async function newArtifact(ctx: ServiceContext, name: string): Promise<string> {
  const { head } = await createArtifact(ctx, agent, { name, filename: 'a.sh', body: bytesOf(`echo ${name}`) });
  return head.artifact_id;
}

async function append(ctx: ServiceContext, id: string, n: number): Promise<void> {
  await commitAudited(ctx, { [id]: await readHead(ctx, id) }, bulkAuditPlan(id, n, 'n'));
}

/** Every chain entry of `ids` and of the installation logs (the key log: the key's activation) as `chain:seq` → hash. */
async function chainEntries(ctx: ServiceContext, ids: readonly string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const id of ids) for (const e of (await loadChain(ctx, id)).entries) out.set(`${id}:${e.seq as number}`, e.hash as string);
  for (const id of installationLogIds())
    for (const [seq, e] of (await logEntries(ctx, id)).bySeq) out.set(`${id}:${seq}`, e.hash as string);
  return out;
}

/** The log's leaves read from the store; asserts the tree is consistent with them and holds each entry once. */
async function assertLogHolds(ctx: ServiceContext, expected: Map<string, string>): Promise<void> {
  const state = await readLogState(ctx);
  const leaves = await readLeafEntries(ctx.content, 0, state.size);
  const seen = new Set<string>();
  for (const l of leaves) {
    const k = `${l.artifact_id}:${l.seq}`;
    assert.ok(!seen.has(k), `entry ${k} is in the log twice`);
    seen.add(k);
    assert.equal(l.hash, expected.get(k), `leaf of ${k} is not its entry's hash`);
  }
  assert.deepEqual([...seen].sort(), [...expected.keys()].sort(), 'every entry is in the log');
  const reference = rootOf(leaves.map((l) => auditLeafHash(l.hash as Digest)));
  assert.ok(hashesEqual(reference, state.root), 'STATE root = merkle.ts reference root');
  assert.ok(
    hashesEqual(reference, await new TiledTree(state.size, contentTileReader(ctx.content)).root()),
    'tiles give the reference root',
  );
}

async function round(ctx: ServiceContext, holder = 'test', afterStep?: (s: RoundStep) => void) {
  const lease = await acquireLease(ctx, holder);
  assert.ok(lease, 'lease taken');
  return runRound(ctx, lease, afterStep ? { afterStep } : {});
}

class Crash extends Error {}

export function sequencerSuite(h: SequencerHarness): void {
  it(`${h.name}: every audit transaction queues its entries on its HEAD and flags it; a full queue moves to a pending marker; a round replaces them by locators and signs a checkpoint`, async () => {
    const { ctx, close } = await h.open();
    try {
      await installationSigner(ctx); // the key's activation: entry 1 of the key log, a chain of the log too
      const a = await newArtifact(ctx, 'one');
      const b = await newArtifact(ctx, 'two');
      await append(ctx, a, 3);
      let head = await readHead(ctx, a);
      assert.deepEqual(headQueue(head).first, 1);
      assert.equal(headQueue(head).hashes.length, 4, 'the creation entry and the three: queued on the HEAD, no item of their own');
      assert.match(String(head.GSI1PK), /^TLOGH#/);
      assert.deepEqual(await pendingMarkersOf(ctx, a), []);
      await append(ctx, a, HEAD_QUEUE_MAX); // the queue would pass its maximum: it moves to a marker with these
      head = await readHead(ctx, a);
      assert.equal(headQueue(head).hashes.length, 0);
      const [m] = await pendingMarkersOf(ctx, a);
      assert.ok(isMarker(m));
      assert.deepEqual([m.first_seq, m.last_seq, m.hashes.length], [1, 4 + HEAD_QUEUE_MAX, 4 + HEAD_QUEUE_MAX]);
      assert.equal(m.GSI1PK, undefined, 'a pending marker has no index entry: its HEAD is flagged instead');
      await append(ctx, a, 1); // queued again
      const r = await round(ctx);
      assert.equal(r.appended, 5 + HEAD_QUEUE_MAX + 1 + 1);
      assert.equal(r.size, 5 + HEAD_QUEUE_MAX + 1 + 1);
      const expected = await chainEntries(ctx, [a, b]);
      await assertLogHolds(ctx, expected);
      const signer = await installationSigner(ctx);
      assert.ok(r.checkpoint);
      const cp = openCheckpoint(r.checkpoint, verifierOf(signer), signer.name);
      assert.equal(cp.size, 5 + HEAD_QUEUE_MAX + 1 + 1);
      assert.ok(hashesEqual(cp.root, (await readLogState(ctx)).root));
      const locator = await ctx.items.get(markerKey(a, 1), { consistent: true });
      assert.ok(isMarker(locator) && typeof locator.leaf_index === 'number', 'one locator for the chain');
      assert.deepEqual([locator.first_seq, locator.last_seq], [1, 4 + HEAD_QUEUE_MAX + 1]);
      assert.deepEqual(await pendingMarkersOf(ctx, a), [], 'the pending marker is gone');
      assert.equal((await readHead(ctx, a)).GSI1PK, undefined, 'the HEAD is no longer flagged');
      assert.deepEqual((await verifyArtifactAudit(ctx, a)).findings, []);
      const again = await round(ctx);
      assert.equal(again.appended, 0);
      assert.equal(again.checkpoint, r.checkpoint);
      await append(ctx, b, 2);
      assert.equal((await round(ctx)).size, 5 + HEAD_QUEUE_MAX + 1 + 1 + 2);
      await assertLogHolds(ctx, await chainEntries(ctx, [a, b]));
    } finally {
      await close();
    }
  });

  it(`${h.name}: a round of a holder whose lease was taken over does not commit; the new holder completes it`, async () => {
    const { ctx, close } = await h.open();
    try {
      await installationSigner(ctx); // the key's activation entry, before the rounds
      const a = await newArtifact(ctx, 'lease');
      const old = await acquireLease(ctx, 'old', 1000);
      assert.ok(old);
      assert.equal(await acquireLease(ctx, 'new', 1000), undefined, 'held');
      ctx.clock.advance(1001);
      const taken = await acquireLease(ctx, 'new', 1000);
      assert.ok(taken && taken.token === old.token + 1);
      await assert.rejects(runRound(ctx, old), /lease was taken over/);
      const r = await runRound(ctx, taken);
      assert.equal(r.size, 2, "the artifact's creation and the key's activation");
      await assertLogHolds(ctx, await chainEntries(ctx, [a]));
    } finally {
      await close();
    }
  });

  it(`${h.name}: entries written before markers existed are backfilled by the first round, once; audit verify then finds every entry covered`, async () => {
    const { ctx, close } = await h.open();
    try {
      ctx.tlogMarkers = false; // an installation from before issue 20 item 1
      const a = await newArtifact(ctx, 'old');
      await append(ctx, a, 3);
      const b = await newArtifact(ctx, 'older');
      ctx.tlogMarkers = true;
      await append(ctx, a, 2); // a marker from seq 5 on
      await installationSigner(ctx); // the key's activation entry, before the round
      const r = await round(ctx);
      assert.equal(r.size, 7 + 1);
      await assertLogHolds(ctx, await chainEntries(ctx, [a, b]));
      for (const id of [a, b]) assert.deepEqual((await verifyArtifactAudit(ctx, id)).findings, [], id);
      await append(ctx, b, 1);
      assert.equal((await round(ctx)).size, 8 + 1, 'the backfill ran once');
      await assertLogHolds(ctx, await chainEntries(ctx, [a, b]));
    } finally {
      await close();
    }
  });

  for (const crashAt of ['marked', 'committed'] as const)
    it(`${h.name}: a restored installation (STATE and locators, no tlog/ objects; last round crashed after '${crashAt}') rebuilds the tree from its locators; an older checkpoint still verifies`, async () => {
      const { ctx, close } = await h.open();
      try {
        const a = await newArtifact(ctx, 'r');
        await append(ctx, a, 3);
        const first = await round(ctx);
        await append(ctx, a, 2);
        await round(ctx, 'test', (s) => {
          if (s === crashAt) throw new Crash(s); // as a backup may catch it: locators written, STATE (not) committed
        }).catch((e) => assert.ok(e instanceof Crash));
        const keys: string[] = [];
        for await (const o of listAll(ctx.content, 'tlog/')) keys.push(o.key);
        assert.ok(keys.length > 3);
        for (const k of keys) await ctx.content.delete(k);
        forgetPresent(ctx.content); // as a new process after a restore: nothing remembered about the objects
        await append(ctx, a, 1);
        ctx.clock.advance(60_000);
        let r = await round(ctx, 'after-restore');
        while (r.appended > 0) r = await round(ctx, 'after-restore'); // the batch marked before the backup, then the entry after
        assert.equal(r.size, 7 + 1); // and the key's activation entry
        await assertLogHolds(ctx, await chainEntries(ctx, [a]));
        const signer = await installationSigner(ctx);
        const v = await verifyLogCheckpoint(ctx, first.checkpoint as string, verifierOf(signer));
        assert.deepEqual(v.findings, []);
      } finally {
        await close();
      }
    });

  const steps: RoundStep[] = ['manifest', 'objects', 'marked', 'committed'];
  type Action = { kind: 'tx'; artifact: number; n: number } | { kind: 'round'; crashAt: RoundStep | undefined } | { kind: 'new' };
  const action: fc.Arbitrary<Action> = fc.oneof(
    fc.record({ kind: fc.constant('tx' as const), artifact: fc.nat(3), n: fc.integer({ min: 1, max: 4 }) }),
    fc.record({ kind: fc.constant('round' as const), crashAt: fc.option(fc.constantFrom(...steps), { nil: undefined }) }),
    fc.constant({ kind: 'new' as const }),
  );

  it(`${h.name}: property — any interleaving of transactions and rounds, crashed at any step: every entry exactly once, roots match`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 12 }), fc.nat(2), async (actions, concurrentTx) => {
        const { ctx, close } = await h.open();
        try {
          const ids = [await newArtifact(ctx, 'p0')];
          let holder = 0;
          for (const act of actions) {
            if (act.kind === 'new') ids.push(await newArtifact(ctx, `p${ids.length}`));
            else if (act.kind === 'tx') await append(ctx, ids[act.artifact % ids.length] as string, act.n);
            else {
              // A crashed holder never releases its lease: the next one takes it once it expired.
              ctx.clock.advance(60_000);
              const id = ids[concurrentTx % ids.length] as string;
              try {
                await round(ctx, `h${holder++}`, async (s) => {
                  if (s === 'manifest' && concurrentTx > 0) await append(ctx, id, 1); // a commit racing the round
                  if (s === act.crashAt) throw new Crash(s);
                });
              } catch (e) {
                if (!(e instanceof Crash)) throw e;
              }
            }
          }
          ctx.clock.advance(60_000);
          for (let i = 0; i < 3; i++) await round(ctx, 'final');
          await assertLogHolds(ctx, await chainEntries(ctx, ids));
        } finally {
          await close();
        }
      }),
      { numRuns: h.runs },
    );
  });
}
