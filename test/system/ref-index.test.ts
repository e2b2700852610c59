/**
 * The reference index written at write time (issue 17 item 1, system/indexed-content.ts), on both
 * profiles (SQLite + directory, DynamoDB Local + s3rver): every write path that stores an object under
 * an indexed prefix leaves an entry with the object's digest and size and exactly the digests its bytes
 * hold (what the retention scan's scanForDigests finds in them); no entry for a write that failed, for
 * a scan that could not finish, or when the entry write itself failed (the object stays). A version's
 * entries are ops of its own transaction: there once the creation returned, absent when it failed.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { readHead } from '../../src/audit/chain.ts';
import { compactHistory } from '../../src/audit/compaction.ts';
import { DAY_MS } from '../../src/core/clock.ts';
import { sha256 } from '../../src/core/digest.ts';
import { scanForDigests } from '../../src/core/digest-scan.ts';
import { IntegrityError, MaintenanceInProgress, TooLarge } from '../../src/core/errors.ts';
import { archiveArtifact } from '../../src/lifecycle/archive.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { compensate } from '../../src/lifecycle/compensation.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import type { ServiceContext } from '../../src/runtime/context.ts';
import { clearFenceForTest, plantFenceForTest } from '../../src/system/fence.ts';
import { indexedContent, innerContent } from '../../src/system/indexed-content.ts';
import {
  contentRootId,
  entryOf,
  MAX_INDEXED_DIGESTS,
  REF_INDEX_TYPE,
  type RefIndexEntry,
  refIndexKey,
} from '../../src/system/ref-index.ts';
import { FaultPlan, FaultyItemStore } from '../faults/faulty-stores.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf, collect } from '../helpers/tmp.ts';
import { agent, alice, approveAndRun } from '../helpers/walk.ts';

after(stopDistributedServers);

type Ctx = ServiceContext & { clock: { advance(ms: number): Date } };

const digestOf = (s: string) => sha256(s);

/** The context with its content indexed (as runtime/ builds it), whatever the helper gave. */
function indexed<T extends ServiceContext>(ctx: T): T {
  ctx.content = indexedContent(ctx.content, ctx.items, () => ctx.layout, ctx.clock);
  return ctx;
}

async function entry(ctx: ServiceContext, key: string): Promise<RefIndexEntry | undefined> {
  const root = contentRootId(ctx.content.location);
  return entryOf(await ctx.items.get(refIndexKey(root, key, ctx.layout.index_shards), { consistent: true }));
}

const isEntry = (item: unknown) => (item as { type?: string }).type === REF_INDEX_TYPE;

async function keysUnder(ctx: ServiceContext, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of ctx.content.list(prefix)) keys.push(o.key);
  return keys;
}

/** The entry of `key` says exactly what its bytes say (digest, size, the digests scanForDigests finds). */
async function assertIndexed(ctx: ServiceContext, key: string, digest?: string): Promise<RefIndexEntry> {
  const e = await entry(ctx, key);
  assert.ok(e, `an entry for ${key}`);
  const bytes = await collect(await ctx.content.readRaw(key));
  assert.equal(e.digest, sha256(bytes));
  if (digest) assert.equal(e.digest, digest);
  assert.equal(e.size, bytes.length);
  const found = await scanForDigests(bytesOf(bytes), undefined, key, key.startsWith('history/segments/'));
  assert.deepEqual(e.digests, [...found].sort());
  return e;
}

const PROFILES: Array<[string, () => Promise<{ ctx: Ctx; close(): Promise<void> }>]> = [
  [
    'SQLite + directory',
    async () => {
      const ctx = await embeddedContext();
      return { ctx: indexed(ctx), close: async () => ctx.items.close() };
    },
  ],
  [
    'DynamoDB Local + s3rver',
    async () => {
      const inst = await distributedInstallation();
      return { ctx: indexed(inst.ctx), close: () => inst.close() };
    },
  ],
];

for (const [profile, open] of PROFILES) {
  describe(`reference index at write time (${profile})`, () => {
    test('creating a version indexes its content and metadata.json: another artifact named inside, a digest across a 64 KiB read, one hidden in gzip', async () => {
      const { ctx, close } = await open();
      try {
        const { version: a } = await createArtifact(ctx, agent, { name: 'a', filename: 'a.sh', body: bytesOf('echo a\n') });
        const hidden = digestOf('hidden in gzip');
        const body = Buffer.concat([
          Buffer.from(`uses ${a.content_hash}\n`),
          Buffer.alloc(64 * 1024 - 60, 0x20),
          Buffer.from(digestOf('straddling')),
          Buffer.from('\n'),
        ]);
        const { version: b } = await createArtifact(ctx, agent, { name: 'b', filename: 'b.txt', body: bytesOf(body) });
        const e = await assertIndexed(ctx, b.content_key, b.content_hash);
        assert.ok(e.digests.includes(a.content_hash) && e.digests.includes(digestOf('straddling')));
        const meta = await assertIndexed(ctx, b.metadata_key, b.metadata_hash);
        assert.ok(meta.digests.includes(b.content_hash), 'metadata.json names its content');

        const { version: g } = await createArtifact(ctx, agent, {
          name: 'g',
          filename: 'g.gz',
          body: bytesOf(gzipSync(Buffer.from(`inside ${hidden}`))),
        });
        assert.ok((await assertIndexed(ctx, g.content_key)).digests.includes(hidden));
      } finally {
        await close();
      }
    });

    test('more digests than an entry holds: overflow, no digests listed (readers scan the bytes)', async () => {
      const { ctx, close } = await open();
      try {
        const many = Array.from({ length: MAX_INDEXED_DIGESTS + 1 }, (_, i) => digestOf(`n${i}`)).join('\n');
        const { version } = await createArtifact(ctx, agent, { name: 'many', filename: 'm.txt', body: bytesOf(many) });
        const e = await entry(ctx, version.content_key);
        assert.equal(e?.overflow, true);
        assert.deepEqual(e?.digests, []);
        assert.equal(e?.digest, version.content_hash);
      } finally {
        await close();
      }
    });

    test('exec output upload, compensation, provenance (replaced on each put) and archive copies are indexed', async () => {
      const { ctx, close } = await open();
      try {
        const { version } = await createArtifact(ctx, agent, { name: 'w', filename: 'w.sh', body: bytesOf('echo w\n') });
        const id = version.artifact_id;
        const run = await approveAndRun(ctx, id, 1, 'FAILED');
        await assertIndexed(ctx, `executions/${run}/stdout.log`);
        await assertIndexed(ctx, `executions/${run}/output.json`);
        const c = await compensate(ctx, agent, id, 1, { filename: 'undo.sh', body: bytesOf(`undo ${version.content_hash}\n`) });
        const rollback = await assertIndexed(ctx, c.version.content_key, c.version.content_hash);
        assert.deepEqual(rollback.digests, [version.content_hash]);
        await assertIndexed(ctx, c.version.metadata_key, c.version.metadata_hash);
        await approveAndRun(ctx, c.compensation.artifact_id, 1, 'SUCCEEDED');

        await addProvenance(ctx, agent, id, { action: 'generate', outputs: [version.content_hash] });
        const head1 = await readHead(ctx, id);
        const p1 = await assertIndexed(ctx, `provenance/${id}.json`, head1.provenance_hash as string);
        await addProvenance(ctx, agent, id, { action: 'review', outputs: [digestOf('second')] });
        const head2 = await readHead(ctx, id);
        const p2 = await assertIndexed(ctx, `provenance/${id}.json`, head2.provenance_hash as string);
        assert.notEqual(p1.digest, p2.digest);
        assert.ok(p2.digests.includes(digestOf('second')));

        const { archived } = await archiveArtifact(ctx, alice, id);
        assert.ok(archived.length >= 4);
        for (const o of archived) {
          const original = await entry(ctx, o.original_key);
          const copy = await entry(ctx, o.archive_key);
          assert.ok(original && copy, `entries for ${o.original_key} and its copy`);
          assert.deepEqual({ ...copy, indexed_at: '' }, { ...original, key: o.archive_key, indexed_at: '' });
        }
      } finally {
        await close();
      }
    });

    test('a packed history segment is indexed through its gzip (compaction); a "segment" that is not gzip gets no entry', async () => {
      const { ctx, close } = await open();
      try {
        const { version } = await createArtifact(ctx, agent, { name: 'h', filename: 'h.sh', body: bytesOf('echo h\n') });
        ctx.clock.advance(100 * DAY_MS);
        const report = await compactHistory(ctx, {
          before: new Date(ctx.clock.advance(0).getTime() - 91 * DAY_MS),
          artifactId: version.artifact_id,
        });
        assert.ok(report.segments.length >= 1);
        for (const s of report.segments) {
          const e = await assertIndexed(ctx, s.key, s.digest);
          assert.ok(e.digests.includes(version.content_hash), 'the packed creation entry names the content');
        }
        const bogus = `history/segments/${version.artifact_id}/${'0'.repeat(64)}.jsonl.gz`;
        await ctx.content.put(bogus, bytesOf(`plain ${version.content_hash}`));
        assert.equal(await entry(ctx, bogus), undefined);
      } finally {
        await close();
      }
    });

    test('delete removes the entry; failed puts, discarded stages and repaired puts', async () => {
      const { ctx, close } = await open();
      try {
        const d = digestOf('x');
        const key = 'artifacts/01TESTINDEX/v1/x.txt';
        const put = await ctx.content.put(key, bytesOf(`names ${d}`));
        assert.deepEqual((await assertIndexed(ctx, key, put.digest)).digests, [d]);
        assert.equal(await ctx.content.delete(key), true);
        assert.equal(await entry(ctx, key), undefined);

        const bad = 'artifacts/01TESTINDEX/v2/x.txt';
        await assert.rejects(ctx.content.put(bad, bytesOf(`names ${d}`), { expectedDigest: digestOf('other') }), IntegrityError);
        await assert.rejects(ctx.content.put(bad, bytesOf(`names ${d}`, 'x'.repeat(100)), { maxBytes: 50 }), TooLarge);
        const failing = (async function* () {
          yield Buffer.from(`names ${d}`);
          throw new Error('the client went away');
        })();
        await assert.rejects(ctx.content.put(bad, failing), /client went away/);
        assert.equal(await entry(ctx, bad), undefined);

        const staged = await ctx.content.stage(bad, bytesOf(`names ${d}`));
        await ctx.content.discard([staged]);
        assert.equal(await entry(ctx, bad), undefined);
        const staged2 = await ctx.content.stage(bad, bytesOf(`names ${d}`));
        assert.equal(await entry(ctx, bad), undefined, 'not before publish');
        await ctx.content.publish([staged2]);
        await assertIndexed(ctx, bad, staged2.digest);

        // Restore's repair put: indexed like any other.
        const repaired = 'artifacts/01TESTINDEX/v3/r.txt';
        const bytes = Buffer.from(`restored ${d}`);
        await ctx.content.put(repaired, bytesOf(bytes), { expectedDigest: sha256(bytes), repair: true });
        await assertIndexed(ctx, repaired, sha256(bytes));

        // A copy whose source has no entry gets none.
        const plain = 'artifacts/01TESTINDEX/v4/p.txt';
        const p = await innerContent(ctx.content).put(plain, bytesOf(`p ${d}`));
        await ctx.content.copy(plain, 'archive/2026/03/01TESTINDEX/v4/p.txt', { expectedDigest: p.digest });
        assert.equal(await entry(ctx, 'archive/2026/03/01TESTINDEX/v4/p.txt'), undefined);
      } finally {
        await close();
      }
    });

    test('a failed entry write leaves the object and no entry; the put succeeds', async () => {
      const { ctx, close } = await open();
      try {
        const plan = new FaultPlan([
          { store: 'items', method: 'put', when: (args) => (args[0] as { type?: string }).type === 'ref_index', kind: 'EIO', times: 10 },
        ]);
        const faulty = { ...ctx, items: new FaultyItemStore(ctx.items, plan) };
        faulty.content = indexedContent(ctx.content, faulty.items, ctx.layout, ctx.clock);
        const key = 'executions/01TESTRUN/stdout.log';
        const bytes = Buffer.from(`log ${digestOf('y')}`);
        const put = await faulty.content.put(key, bytesOf(bytes));
        assert.equal(put.digest, sha256(bytes));
        assert.ok(plan.fired.length >= 1, 'the entry write failed');
        assert.deepEqual(await collect(await ctx.content.get(key, put.digest)), bytes);
        assert.equal(await entry(ctx, key), undefined);
      } finally {
        await close();
      }
    });

    test("a version's entries are written by its own transaction: present once createArtifact / addVersion returned, with no entry write of their own", async () => {
      const { ctx, close } = await open();
      try {
        // Every entry write outside a transaction fails: the creations' entries cannot come from one.
        const plan = new FaultPlan([
          { store: 'items', method: 'put', when: (args) => isEntry(args[0]), kind: 'EIO', times: 100 },
          { store: 'items', method: 'batchPut', when: (args) => (args[0] as unknown[]).some(isEntry), kind: 'EIO', times: 100 },
        ]);
        const faulty = { ...ctx, items: new FaultyItemStore(ctx.items, plan) };
        faulty.content = indexedContent(ctx.content, faulty.items, ctx.layout, ctx.clock);
        const d = digestOf('named');
        const { version: v1 } = await createArtifact(faulty, agent, { name: 'tx', filename: 'a.txt', body: bytesOf(`a ${d}`) });
        const v2 = await addVersion(faulty, agent, v1.artifact_id, { filename: 'b.txt', body: bytesOf(`b ${v1.content_hash}`) });
        assert.deepEqual(plan.fired, [], 'no entry was written outside the transactions');
        assert.deepEqual((await assertIndexed(ctx, v1.content_key, v1.content_hash)).digests, [d]);
        assert.deepEqual((await assertIndexed(ctx, v2.content_key, v2.content_hash)).digests, [v1.content_hash]);
        for (const v of [v1, v2]) assert.ok((await assertIndexed(ctx, v.metadata_key, v.metadata_hash)).digests.includes(v.content_hash));
      } finally {
        await close();
      }
    });

    test('a creation whose transaction fails leaves its objects without entries (orphans retention scans)', async () => {
      const { ctx, close } = await open();
      try {
        const { version: v1 } = await createArtifact(ctx, agent, { name: 'base', filename: 'a.txt', body: bytesOf('a') });
        // The maintenance fence is taken while the body streams: past createArtifact's early check,
        // so the bytes are written and published and the version's transaction is refused.
        const fencedWhileStreaming = (text: string) =>
          (async function* () {
            yield Buffer.from(text);
            await plantFenceForTest(ctx, { holder: 'test maintenance', epoch: 1 });
          })();
        const before = new Set(await keysUnder(ctx, 'artifacts/'));
        await assert.rejects(
          createArtifact(ctx, agent, { name: 'fenced', filename: 'f.txt', body: fencedWhileStreaming(`f ${v1.content_hash}`) }),
          MaintenanceInProgress,
        );
        await clearFenceForTest(ctx);
        await assert.rejects(
          addVersion(ctx, agent, v1.artifact_id, { filename: 'g.txt', body: fencedWhileStreaming(`g ${v1.content_hash}`) }),
          MaintenanceInProgress,
        );
        await clearFenceForTest(ctx);
        const orphans = (await keysUnder(ctx, 'artifacts/')).filter((k) => !before.has(k));
        assert.equal(orphans.length, 4, 'content and metadata.json of both refused versions were published');
        for (const key of orphans) assert.equal(await entry(ctx, key), undefined, `no entry for ${key}`);
        // A version committed afterwards on the same store still gets its entries.
        const v2 = await addVersion(ctx, agent, v1.artifact_id, { filename: 'h.txt', body: bytesOf('h') });
        await assertIndexed(ctx, v2.content_key, v2.content_hash);
      } finally {
        await close();
      }
    });

    test('the decorator passes the engine through: location, classes, optional methods, reads', async () => {
      const { ctx, close } = await open();
      try {
        const inner = innerContent(ctx.content);
        assert.notEqual(inner, ctx.content);
        assert.equal(ctx.content.location, inner.location);
        assert.equal(ctx.content.engine, inner.engine);
        assert.equal(ctx.content.hasStorageClasses, inner.hasStorageClasses);
        for (const m of ['storageClass', 'getLifecycleRules', 'putLifecycleRules'] as const) {
          assert.equal(m in ctx.content, m in inner, m);
          assert.equal(typeof ctx.content[m], typeof inner[m], m);
        }
        assert.equal(innerContent(indexedContent(ctx.content, ctx.items, ctx.layout, ctx.clock)), inner, 'never stacked');
      } finally {
        await close();
      }
    });
  });
}
