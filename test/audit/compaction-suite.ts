/**
 * History compaction (issue 6, part 6) on one engine: packed, digest-addressed segments that history
 * and audit verify read transparently; the 90-day hot window as a minimum; verification before any
 * hot item is removed; crashes at each step; tamper evidence for segments.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { compactHistory, HOT_HISTORY_MS } from '../../src/audit/compaction.ts';
import { history, loadChain } from '../../src/audit/history.ts';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { canonicalJson } from '../../src/core/canonical-json.ts';
import { DAY_MS, ManualClock } from '../../src/core/clock.ts';
import { sha256 } from '../../src/core/digest.ts';
import { IntegrityError, InvalidInput, MaintenanceInProgress } from '../../src/core/errors.ts';
import { artifactPk } from '../../src/core/keys.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { refsOfArtifact } from '../../src/lifecycle/references.ts';
import { propose, withdraw } from '../../src/lifecycle/transitions.ts';
import { collectRefs, verifyObjects } from '../../src/lifecycle/verify-content.ts';
import { createContext, type ServiceContext } from '../../src/runtime/context.ts';
import type { Item, ItemStore, TransactOp } from '../../src/store/item-store.ts';
import { queryAll } from '../../src/store/item-store.ts';
import { fenceKey } from '../../src/system/fence.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, walkEveryState } from '../helpers/walk.ts';

export interface CompactionHarness {
  name: string;
  /** A fresh installation: its own table or file; fs content under `contentRoot`. */
  open(): Promise<{ items: ItemStore; content: import('../../src/content/content-store.ts').ContentStore; contentRoot: string }>;
}

const T0 = '2026-01-01T00:00:00.000Z';

interface Inst {
  ctx: ServiceContext & { clock: ManualClock };
  contentRoot: string;
  /** Fails the next transaction whose operations satisfy `when` (a crash at that step). */
  failNext(when: (ops: TransactOp[]) => boolean | Promise<boolean>): void;
}

export function compactionSuite(h: CompactionHarness): void {
  async function install(): Promise<Inst> {
    const { items, content, contentRoot } = await h.open();
    let trap: ((ops: TransactOp[]) => boolean | Promise<boolean>) | undefined;
    const trapped = new Proxy(items, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver) as unknown;
        if (prop !== 'transactWrite' || typeof v !== 'function') return typeof v === 'function' ? v.bind(target) : v;
        return async (ops: TransactOp[], opts?: unknown) => {
          const t = trap;
          if (t && (await t(ops))) {
            trap = undefined;
            throw new Error('simulated crash');
          }
          return (v as (o: TransactOp[], x?: unknown) => Promise<void>).call(target, ops, opts);
        };
      },
    });
    const clock = new ManualClock(T0);
    const ctx = createContext({ items: trapped, content, clock }) as ServiceContext & { clock: ManualClock };
    return { ctx, contentRoot, failNext: (when) => (trap = when) };
  }

  /** An artifact with `n` audit entries one hour apart, starting now. */
  async function chain(inst: Inst, n: number, name = 'c'): Promise<string> {
    const { version } = await createArtifact(inst.ctx, agent, { name, filename: 'c.sh', body: bytesOf(`echo ${name}\n`) });
    for (let i = 1; i < n; i++) {
      inst.ctx.clock.advance(3_600_000);
      await (i % 2 === 1 ? propose(inst.ctx, agent, version.artifact_id, 1) : withdraw(inst.ctx, agent, version.artifact_id, 1));
    }
    return version.artifact_id;
  }

  const hot = async (inst: Inst, id: string) =>
    (await queryAll(inst.ctx.items, { pk: artifactPk(id), consistent: true })).filter(
      (i) => typeof i.seq === 'number' && i.type !== 'history_segment',
    );
  const segments = async (inst: Inst, id: string) =>
    (await queryAll(inst.ctx.items, { pk: artifactPk(id), consistent: true })).filter((i) => i.type === 'history_segment');

  describe(`history compaction: ${h.name}`, () => {
    it('the seed’s retention figures are minimums: a cut-off inside the 90-day hot window is refused and nothing is written', async () => {
      const inst = await install();
      const id = await chain(inst, 3);
      inst.ctx.clock.advance(100 * DAY_MS);
      const latest = new Date(inst.ctx.clock.now().getTime() - HOT_HISTORY_MS);
      await assert.rejects(compactHistory(inst.ctx, { before: new Date(latest.getTime() + 1) }), (e: unknown) => {
        assert.ok(e instanceof InvalidInput);
        assert.match(e.message, /history stays hot for 90 days/);
        return true;
      });
      await assert.rejects(compactHistory(inst.ctx, { before: 'not a date' }), InvalidInput);
      assert.equal((await segments(inst, id)).length, 0);
      assert.equal((await hot(inst, id)).length, 3);
      const ok = await compactHistory(inst.ctx, { before: latest });
      assert.equal(ok.entries_packed, 3, 'exactly at the window edge is allowed');
    });

    it('packs entries older than the cut-off into an immutable, digest-addressed JSON Lines + gzip segment recorded by a segment item; history and audit verify read it transparently', async () => {
      const inst = await install();
      const id = await chain(inst, 6); // T0 .. T0+5h
      inst.ctx.clock.set(Date.parse(T0) + 100 * DAY_MS);
      await propose(inst.ctx, agent, id, 1).catch(() => withdraw(inst.ctx, agent, id, 1)); // a hot entry, recent
      const before = await history(inst.ctx, id);
      const report = await compactHistory(inst.ctx, { before: '2026-01-02' });
      assert.deepEqual([report.entries_packed, report.items_removed, report.segments.length, report.skipped.length], [6, 6, 1, 0]);
      const [seg] = await segments(inst, id);
      assert.ok(seg);
      assert.deepEqual([seg.first_seq, seg.last_seq, seg.entries, seg.SK], [1, 6, 6, 'SEG#0000000001']);
      assert.match(seg.key as string, new RegExp(`^history/segments/${id}/[0-9a-f]{64}\\.jsonl\\.gz$`));
      const bytes = fs.readFileSync(path.join(inst.contentRoot, seg.key as string));
      assert.equal(sha256(bytes), seg.digest);
      assert.equal((seg.key as string).includes((seg.digest as string).slice(7)), true, 'named by its digest');
      const lines = gunzipSync(bytes).toString('utf8').trimEnd().split('\n');
      assert.equal(lines.length, 6);
      assert.deepEqual(
        lines.map((l) => (JSON.parse(l) as Item).seq),
        [1, 2, 3, 4, 5, 6],
      );
      assert.equal(lines[0], canonicalJson(JSON.parse(lines[0] as string)), 'canonical JSON lines');
      assert.deepEqual(
        (await hot(inst, id)).map((i) => i.seq),
        [7],
        'the packed transitions left the hot set',
      );
      assert.deepEqual(await history(inst.ctx, id), before, 'history is unchanged');
      const report2 = await verifyArtifactAudit(inst.ctx, id);
      assert.deepEqual([report2.ok, report2.entries, report2.findings], [true, 7, []]);
      // The segment is a named reference (retention, alp verify) and verifies.
      const refs = await refsOfArtifact(inst.ctx.items, id);
      assert.ok(refs.some((r) => r.key === seg.key && r.digest === seg.digest && r.size === bytes.length));
      const objects = await verifyObjects(inst.ctx, await collectRefs(inst.ctx, id));
      assert.deepEqual(objects.findings, []);
      // Idempotent; a later run continues the chain in a new segment.
      assert.equal((await compactHistory(inst.ctx, { before: '2026-01-02' })).segments.length, 0);
      inst.ctx.clock.advance(100 * DAY_MS);
      const third = await compactHistory(inst.ctx, { before: new Date(inst.ctx.clock.now().getTime() - HOT_HISTORY_MS) });
      assert.deepEqual(
        third.segments.map((s) => [s.first_seq, s.last_seq]),
        [[7, 7]],
      );
      assert.deepEqual(await history(inst.ctx, id), before);
      assert.equal((await verifyArtifactAudit(inst.ctx, id)).ok, true);
      assert.equal((await loadChain(inst.ctx, id)).segments.length, 2);
    });

    it('every audit type is packed; executions, compensations, provenance and approvals (read by rules) also stay hot', async () => {
      const inst = await install();
      const { id, compensations } = await walkEveryState(inst.ctx);
      const beforeHistory = await history(inst.ctx, id);
      const beforeHot = await hot(inst, id);
      inst.ctx.clock.advance(91 * DAY_MS);
      const report = await compactHistory(inst.ctx, { before: new Date(Date.parse(T0) + DAY_MS) });
      assert.equal(report.artifacts, 1 + compensations.length);
      assert.equal(report.skipped.length, 0);
      const kept = await hot(inst, id);
      const stays = ['approval', 'compensation', 'execution', 'provenance'];
      assert.deepEqual([...new Set(kept.map((i) => i.type))].sort(), stays);
      assert.equal(kept.length, beforeHot.filter((i) => stays.includes(i.type as string)).length);
      let total = 0;
      for (const a of [id, ...compensations]) total += ((await loadChain(inst.ctx, a)).head?.audit_seq as number) ?? 0;
      assert.equal(report.entries_packed, total, 'every entry of every chain was packed');
      const packedTypes = new Set((await loadChain(inst.ctx, id)).segments.flatMap((sg) => sg.entries.map((e) => e.type)));
      assert.deepEqual([...packedTypes].sort(), [
        'approval',
        'compensation',
        'execution',
        'execution_finish',
        'execution_output',
        'provenance',
        'transition',
      ]);
      assert.deepEqual(await history(inst.ctx, id), beforeHistory);
      for (const a of [id, ...compensations]) assert.deepEqual((await verifyArtifactAudit(inst.ctx, a)).findings, [], a);
    });

    it('a crash after the segment item is recorded but before the hot items are removed leaves duplicates: history de-duplicates them and the next run finishes the removal', async () => {
      const inst = await install();
      const id = await chain(inst, 5);
      inst.ctx.clock.advance(100 * DAY_MS);
      const before = await history(inst.ctx, id);
      inst.failNext((ops) => ops.some((o) => o.op === 'delete'));
      await assert.rejects(compactHistory(inst.ctx, { before: '2026-01-02' }), /simulated crash/);
      assert.equal((await segments(inst, id)).length, 1);
      assert.equal((await hot(inst, id)).length, 5, 'both hot and packed');
      assert.deepEqual(await history(inst.ctx, id), before);
      assert.equal((await verifyArtifactAudit(inst.ctx, id)).ok, true);
      const again = await compactHistory(inst.ctx, { before: '2026-01-02' });
      assert.deepEqual([again.items_removed, again.segments.length], [5, 0]);
      assert.equal((await hot(inst, id)).length, 0);
      assert.deepEqual(await history(inst.ctx, id), before);
    });

    it('a crash after the segment object is written but before its item is recorded changes nothing; the next run writes the same digest file and records it', async () => {
      const inst = await install();
      const id = await chain(inst, 4);
      inst.ctx.clock.advance(100 * DAY_MS);
      const before = await history(inst.ctx, id);
      inst.failNext((ops) => ops.some((o) => o.op === 'put' && o.item.type === 'history_segment'));
      await assert.rejects(compactHistory(inst.ctx, { before: '2026-01-02' }), /simulated crash/);
      assert.equal((await segments(inst, id)).length, 0);
      assert.equal((await hot(inst, id)).length, 4);
      const written = fs.readdirSync(path.join(inst.contentRoot, 'history/segments', id)).filter((f) => f.endsWith('.jsonl.gz'));
      assert.equal(written.length, 1, 'an unnamed segment object remains');
      const report = await compactHistory(inst.ctx, { before: '2026-01-02' });
      assert.equal(report.segments[0]?.key, `history/segments/${id}/${written[0]}`, 'same bytes, same digest, same key');
      assert.deepEqual(await history(inst.ctx, id), before);
    });

    it('the segment is read back and compared with the items it replaces before any item is removed: a segment that does not read back intact removes nothing', async () => {
      const inst = await install();
      const id = await chain(inst, 3);
      inst.ctx.clock.advance(100 * DAY_MS);
      const realPut = inst.ctx.content.put.bind(inst.ctx.content);
      // The storage loses the write after acknowledging it: the object now holds other bytes.
      inst.ctx.content.put = async (key, body, opts) => {
        const result = await realPut(key, body, opts);
        if (key.startsWith('history/')) fs.writeFileSync(path.join(inst.contentRoot, key), 'garbage');
        return result;
      };
      await assert.rejects(compactHistory(inst.ctx, { before: '2026-01-02' }), IntegrityError);
      inst.ctx.content.put = realPut;
      assert.equal((await segments(inst, id)).length, 0, 'no segment item');
      assert.equal((await hot(inst, id)).length, 3, 'nothing left the hot set');
      assert.equal((await compactHistory(inst.ctx, { before: '2026-01-02' })).items_removed, 3, 'a healthy retry packs');
    });

    it('audit verify names a tampered, missing or misdescribed segment and a hot copy that differs from its packed copy; history refuses a broken segment', async () => {
      const inst = await install();
      const id = await chain(inst, 4);
      inst.ctx.clock.advance(100 * DAY_MS);
      inst.failNext((ops) => ops.some((o) => o.op === 'delete'));
      await compactHistory(inst.ctx, { before: '2026-01-02' }).catch(() => undefined); // leaves duplicates
      const [seg] = await segments(inst, id);
      assert.ok(seg);
      const file = path.join(inst.contentRoot, seg.key as string);
      const original = fs.readFileSync(file);
      const rowOf = `${seg.PK} ${seg.SK}`;

      // 1. Segment bytes edited.
      const lines = gunzipSync(original).toString('utf8').replace('"DRAFT"', '"APPROVED"');
      fs.writeFileSync(file, (await import('node:zlib')).gzipSync(lines));
      let report = await verifyArtifactAudit(inst.ctx, id);
      assert.ok(
        report.findings.some((f) => f.row === rowOf && /packed history segment/.test(f.problem)),
        JSON.stringify(report.findings),
      );
      await assert.rejects(history(inst.ctx, id), IntegrityError);
      fs.writeFileSync(file, original);
      assert.equal((await verifyArtifactAudit(inst.ctx, id)).ok, true);

      // 2. A hot duplicate edited: it no longer agrees with its packed copy.
      const dup = (await hot(inst, id))[0] as Item;
      await inst.ctx.items.put({ ...dup, reason: 'forged' });
      report = await verifyArtifactAudit(inst.ctx, id);
      assert.ok(report.findings.some((f) => f.row === `${dup.PK} ${dup.SK}` && /differs from its packed copy/.test(f.problem)));
      await inst.ctx.items.put(dup);

      // 3. The segment item misdescribes its segment.
      await inst.ctx.items.put({ ...seg, last_hash: `sha256:${'0'.repeat(64)}` });
      report = await verifyArtifactAudit(inst.ctx, id);
      assert.ok(report.findings.some((f) => f.row === rowOf));
      await inst.ctx.items.put(seg);

      // 4. The segment object is gone (after the hot copies were removed): the chain has a gap.
      await compactHistory(inst.ctx, { before: '2026-01-02' });
      fs.rmSync(file);
      report = await verifyArtifactAudit(inst.ctx, id);
      assert.ok(report.findings.some((f) => f.row === rowOf && /is missing/.test(f.problem)));
      assert.ok(report.findings.some((f) => /HEAD says 4 audit entries/.test(f.problem)));
      await assert.rejects(history(inst.ctx, id), IntegrityError);
    });

    it('compaction is a writer like any other: a held maintenance fence refuses it, also when taken mid-way', async () => {
      const inst = await install();
      const id = await chain(inst, 3);
      inst.ctx.clock.advance(100 * DAY_MS);
      await inst.ctx.items.put({ ...fenceKey, holder: 'retention', epoch: 1 });
      await assert.rejects(compactHistory(inst.ctx, { before: '2026-01-02' }), MaintenanceInProgress);
      await inst.ctx.items.delete(fenceKey);
      // The fence is taken after compaction's first check, just before it records the segment.
      let armed = true;
      inst.failNext(async (ops) => {
        if (armed && ops.some((o) => o.op === 'put' && o.item.type === 'history_segment')) {
          armed = false;
          await inst.ctx.items.put({ ...fenceKey, holder: 'retention', epoch: 1 });
        }
        return false;
      });
      await assert.rejects(compactHistory(inst.ctx, { before: '2026-01-02' }), MaintenanceInProgress);
      assert.equal((await segments(inst, id)).length, 0);
      assert.equal((await hot(inst, id)).length, 3);
      await inst.ctx.items.delete(fenceKey);
      assert.equal((await compactHistory(inst.ctx, { before: '2026-01-02' })).items_removed, 3);
    });

    it('nothing in compaction or telemetry deletes audit history, segments, logs or backups on a timer', () => {
      const root = path.resolve(import.meta.dirname, '../../src');
      for (const dir of ['audit', 'telemetry']) {
        // Subfolders too (audit/tlog/): every source file below the folder, not the folders themselves.
        for (const f of fs.readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' }).filter((n) => n.endsWith('.ts'))) {
          const text = fs.readFileSync(path.join(root, dir, f), 'utf8');
          assert.doesNotMatch(text, /setInterval|setTimeout|\.unref\(/, `${dir}/${f} has no timers`);
        }
      }
      assert.doesNotMatch(
        fs.readFileSync(path.join(root, 'audit/compaction.ts'), 'utf8'),
        /content\.delete|\.rm\(|unlink/,
        'compaction never deletes objects',
      );
    });
  });
}
