/**
 * Packed history segments and compressed content under hostile input: malformed gzip, truncated gzip,
 * a compression bomb (gzip members expanding to GiBs), one oversized JSON line, lines that are not
 * items, and wrong digests. `alp history` fails closed (exit 5, one line), `alp audit verify` reports
 * the segment and exits 5, both bounded in time and memory (decompression stops at the segment's
 * recorded size); the retention reference scan fails closed on a segment it cannot read whole (it
 * would not know the references inside), and refuses a bomb past its bound instead of inflating it.
 * A damaged segment is never mistaken for a shorter history.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { compactHistory, SEGMENT_MAX_ENTRIES, SEGMENT_MAX_RAW_BYTES, segmentParts } from '../../src/audit/compaction.ts';
import { history, MAX_SEGMENT_LINE_BYTES, type SegmentItem } from '../../src/audit/history.ts';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { digestHex, sha256 } from '../../src/core/digest.ts';
import { AlpError, IntegrityError, InvalidInput } from '../../src/core/errors.ts';
import { artifactPk } from '../../src/core/keys.ts';
import { historySegmentKey } from '../../src/core/object-keys.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { propose, withdraw } from '../../src/lifecycle/transitions.ts';
import { scanForDigests } from '../../src/retention/digest-scan.ts';
import { scanReferences } from '../../src/retention/references.ts';
import { queryAll } from '../../src/store/item-store.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { captureCli, patchCliOutput } from '../helpers/cli-inprocess.ts';
import { embeddedContext, type TestContext } from '../helpers/context.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

const MiB = 1024 * 1024;

let member: Buffer | undefined;

/** `members` gzip members of 64 MiB of zeros each: ~64 KiB per member, 64 MiB × members expanded. */
function bomb(members: number, tail = Buffer.alloc(0)): Buffer {
  // One member compressed once per file (level 9 over 64 MiB costs ~1 s), the same bytes every time.
  member ??= gzipSync(Buffer.alloc(64 * MiB), { level: 9 });
  const one = member;
  return Buffer.concat([...Array.from({ length: members }, () => one), gzipSync(tail)]);
}

describe('hostile packed history segments and compressed content', () => {
  let ctx: TestContext;
  let id: string;
  let original: SegmentItem;
  let originalGz: Buffer;
  let unpatch: () => void;

  before(async () => {
    unpatch = patchCliOutput();
    ctx = await embeddedContext('2026-01-01T00:00:00.000Z');
    await initInstallation(ctx);
    const { version } = await createArtifact(ctx, agent, { name: 'h', filename: 'h.sh', body: bytesOf('echo h\n') });
    id = version.artifact_id;
    for (let i = 0; i < 6; i++) {
      ctx.clock.advance(3_600_000);
      await (i % 2 === 0 ? propose(ctx, agent, id, 1) : withdraw(ctx, agent, id, 1));
    }
    ctx.clock.advance(100 * DAY_MS);
    const report = await compactHistory(ctx, { before: '2026-01-02' });
    assert.equal(report.segments.length, 1);
    original = (await queryAll(ctx.items, { pk: artifactPk(id) })).find((i) => i.type === 'history_segment') as SegmentItem;
    originalGz = fs.readFileSync(path.join(ctx.contentRoot, original.key));
  });
  after(() => {
    unpatch();
    // history + audit verify + both CLI commands per hostile segment.
    console.log(`# hostile segments, failed closed: ${figures.join('; ')}`);
  });

  /** Stores `gz` as a segment object named by its digest and points the segment item at it. */
  async function plant(gz: Buffer, item: Partial<SegmentItem> = {}): Promise<void> {
    const digest = sha256(gz);
    const key = historySegmentKey(id, digestHex(digest));
    await ctx.content.put(key, [gz]);
    await ctx.items.put({ ...original, key, digest, size: gz.length, ...item });
  }

  /** The retention reference scan refuses to go on without the references a segment holds. */
  async function scanFailsClosed(what: string, code: 'INTEGRITY' | 'INVALID'): Promise<void> {
    await assert.rejects(scanReferences(ctx), (e: unknown) => {
      assert.ok(e instanceof AlpError && e.code === code, `${what}: ${String(e)}`);
      assert.match(e.message, /history\/segments\//, what);
      return true;
    });
  }

  const figures: string[] = [];
  async function failsClosed(what: string, pattern: RegExp): Promise<void> {
    const rss0 = process.memoryUsage().rss;
    const started = performance.now();
    await assert.rejects(history(ctx, id), (e: unknown) => {
      assert.ok(e instanceof IntegrityError, `${what}: ${String(e)}`);
      assert.match(e.message, pattern, what);
      return true;
    });
    const report = await verifyArtifactAudit(ctx, id);
    assert.equal(report.ok, false, what);
    assert.ok(
      report.findings.some((f) => f.problem.includes('packed history segment') && pattern.test(f.problem)),
      `${what}: ${JSON.stringify(report.findings)}`,
    );
    const cliHistory = await captureCli(['history', id, '--data', ctx.dir]);
    assert.equal(cliHistory.code, 5, `${what}: ${cliHistory.stderr}`);
    assert.match(cliHistory.stderr, /^alp: INTEGRITY: [^\n]+\n$/);
    const cliVerify = await captureCli(['audit', 'verify', id, '--data', ctx.dir]);
    assert.equal(cliVerify.code, 5, `${what}: ${cliVerify.stderr}`);
    assert.match(cliVerify.stderr, /^alp: INTEGRITY: audit chain broken at [^\n]+\n$/);
    const ms = performance.now() - started;
    const grew = (process.memoryUsage().rss - rss0) / MiB;
    figures.push(`${what}: ${ms.toFixed(0)} ms, RSS +${Math.max(0, grew).toFixed(0)} MiB`);
    assert.ok(ms < 10_000, `${what}: took ${ms.toFixed(0)} ms`);
    assert.ok(grew < 128, `${what}: RSS grew by ${grew.toFixed(0)} MiB`);
  }

  it('the intact segment reads back', async () => {
    assert.equal((await history(ctx, id)).length, 7);
    assert.equal((await verifyArtifactAudit(ctx, id)).ok, true);
  });

  it('malformed gzip fails closed', async () => {
    await plant(Buffer.from('this is not gzip at all\n'));
    await failsClosed('malformed', /not valid gzip/);
    await scanFailsClosed('malformed', 'INTEGRITY');
  });

  it('truncated gzip fails closed', async () => {
    await plant(originalGz.subarray(0, Math.floor(originalGz.length / 2)));
    await failsClosed('truncated', /not valid gzip|unexpected end/);
    await scanFailsClosed('truncated', 'INTEGRITY');
  });

  it('a compression bomb stops at the recorded size instead of expanding to GiBs', async () => {
    // 2 GiB of zeros behind the real lines: what the item records (raw_bytes) is all that is inflated.
    const gz = Buffer.concat([originalGz, bomb(32)]);
    await plant(gz, { raw_bytes: original.raw_bytes });
    await failsClosed('bomb', /expands beyond \d+ bytes/);
    await scanFailsClosed('bomb', 'INVALID');
    // Without a recorded size (an item from before raw_bytes, or edited), the absolute bound holds.
    // The bomb's object is already stored under its digest's key: only the item changes (writing the
    // same bytes again would inflate 1 GiB in the write's reference scan once more, ~15 s).
    const planted = (await queryAll(ctx.items, { pk: artifactPk(id) })).find((i) => i.type === 'history_segment') as SegmentItem;
    assert.equal(planted.digest, sha256(gz));
    assert.ok(await ctx.content.head(planted.key), 'the bomb is stored');
    await ctx.items.put({ ...planted, raw_bytes: undefined as unknown as number });
    await failsClosed('bomb, no recorded size', /expands beyond \d+ bytes/);
    // The bomb leaves the store with this test: every later whole-store reference scan would inflate
    // 1 GiB of it again (~15 s each) on the way to what that test is about.
    await ctx.items.put(original);
    await ctx.content.delete(planted.key);
  });

  it('an oversized JSON line, and lines that are not items, fail closed', async () => {
    const line = `${JSON.stringify({ PK: artifactPk(id), pad: 'x'.repeat(MAX_SEGMENT_LINE_BYTES) })}\n`;
    await plant(gzipSync(line), { raw_bytes: Buffer.byteLength(line) });
    await failsClosed('oversized line', /line 1 is \d+ bytes/);
    for (const text of ['[1,2,3]\n', 'null\n', '{"PK":1}\n', '{"PK":"x"\n', '\n']) {
      await plant(gzipSync(text), { raw_bytes: Buffer.byteLength(text) });
      await failsClosed(JSON.stringify(text), /not an item|not audit entry|holds \d+ entries/);
    }
  });

  it('a wrong digest, size or recorded length fails closed', async () => {
    await ctx.items.put({ ...original, digest: sha256('something else') });
    await failsClosed('wrong digest', /digest|does not match/);
    await scanFailsClosed('wrong digest', 'INTEGRITY');
    await ctx.items.put({ ...original, size: original.size + 1 });
    await failsClosed('wrong size', /bytes|size|shorter|longer/);
    await ctx.items.put({ ...original, raw_bytes: original.raw_bytes + 1 });
    await failsClosed('wrong raw length', /holds \d+ bytes of JSON Lines/);
    await ctx.items.put({ ...original, size: 10 * 1024 * MiB });
    await failsClosed('absurd size', /recorded as \d+ bytes/);
    await ctx.items.put(original);
    assert.equal((await history(ctx, id)).length, 7, 'the original reads again');
  });

  it('compaction cuts segments by entries and by bytes, so every segment it writes stays inside what readers accept', () => {
    const big = Array.from({ length: 70 }, (_, i) => ({ PK: 'ART#x', SK: `T#${i}`, seq: i + 1, pad: 'x'.repeat(MiB) }));
    const parts = segmentParts(big);
    assert.equal(parts.flat().length, 70);
    for (const p of parts) assert.ok(p.reduce((n, e) => n + JSON.stringify(e).length + 1, 0) <= SEGMENT_MAX_RAW_BYTES);
    assert.ok(parts.length >= 3);
    const many = Array.from({ length: 2 * SEGMENT_MAX_ENTRIES + 1 }, (_, i) => ({ PK: 'ART#x', SK: `T#${i}`, seq: i + 1 }));
    assert.deepEqual(
      segmentParts(many).map((p) => p.length),
      [SEGMENT_MAX_ENTRIES, SEGMENT_MAX_ENTRIES, 1],
    );
  });

  it('the retention digest scanner refuses a bomb past its bound, bounded in memory', async () => {
    const rss0 = process.memoryUsage().rss;
    const inside = `sha256:${'a'.repeat(64)}`;
    // 2 GiB expanded: refused at the default 1 GiB bound, streaming (never held in memory).
    await assert.rejects(scanForDigests(Readable.from([bomb(32, Buffer.from(inside))])), InvalidInput);
    // No wall-clock bound here (a shared machine): the scan stops at the bound, so it ends; its rate is a benchmark's business.
    const grew = (process.memoryUsage().rss - rss0) / MiB;
    assert.ok(grew < 128, `RSS grew by ${grew.toFixed(0)} MiB`);
    // Below the bound, digests inside compressed content are found (conservatively, raw bytes too).
    const found = await scanForDigests(Readable.from([bomb(1, Buffer.from(inside))]));
    assert.ok(found.has(inside));
    // Malformed or truncated gzip: the raw bytes are still scanned.
    const gz = gzipSync(`see ${inside} here`);
    assert.ok((await scanForDigests(Readable.from([Buffer.concat([gz.subarray(0, 12), Buffer.from(` ${inside}`)])]))).has(inside));
  });
});
