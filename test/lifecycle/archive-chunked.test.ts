/**
 * Archive at any size (issue 16 item 5): an artifact with many settled versions and runs with outputs
 * archives in chunks of audited transactions, each within the transaction limit with one telemetry
 * record per entry; a crash after chunk k or after copy k leaves either nothing recorded or a journal
 * saying ARCHIVING (shown on the HEAD, new versions refused), and re-running archive finishes it:
 * every version ARCHIVED exactly once, the chain verifies. On both profiles; the distributed one runs
 * behind the GLACIER MODEL proxy (test/helpers/s3-glacier-proxy.ts: cold GETs answer 403
 * InvalidObjectState as on real S3), so the archive is shown never to read a GLACIER object.
 *
 * The suite archives 60 versions (past the old limit of 25; ALP_ARCHIVE_VERSIONS changes it; the embedded profile does 1,000 in
 * ~90 s). The 1,000-version archive on DynamoDB Local + s3rver is bench/archive.ts (its setup alone
 * outlasts the runner's 600 s file timeout on DynamoDB Local).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { history } from '../../src/audit/history.ts';
import { verifyArtifactAudit } from '../../src/audit/verify.ts';
import { S3ContentStore } from '../../src/content/s3/s3-content-store.ts';
import { ArchivedCold, Conflict } from '../../src/core/errors.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { archiveArtifact, readArchiveJournal } from '../../src/lifecycle/archive.ts';
import { addVersion, createArtifact, openVersionContent, showArtifact } from '../../src/lifecycle/artifacts.ts';
import { listExecutions } from '../../src/lifecycle/executions.ts';
import { openExecutionOutput } from '../../src/lifecycle/reads.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { listVersions } from '../../src/lifecycle/versions.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import { MAX_TRANSACT_OPS } from '../../src/store/item-store.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, distributedServers, stopDistributedServers } from '../helpers/distributed.ts';
import { watchTransactions } from '../helpers/items.ts';
import { type GlacierProxy, startGlacierProxy } from '../helpers/s3-glacier-proxy.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent, alice, approveAndRun } from '../helpers/walk.ts';

let glacier: GlacierProxy | undefined;
after(async () => {
  await glacier?.stop();
  await stopDistributedServers();
});

const N = Number(process.env.ALP_ARCHIVE_VERSIONS ?? 60);

interface Engine {
  ctx: ServiceContext;
  /** Cold GETs the GLACIER model refused so far (0 on the embedded profile). */
  coldReads(): number;
  close(): Promise<void>;
}

const engines: { name: string; open: () => Promise<Engine> }[] = [
  {
    name: 'SQLite + directory',
    open: async () => {
      const ctx = await embeddedContext();
      return { ctx, coldReads: () => 0, close: async () => ctx.items.close() };
    },
  },
  {
    name: 'DynamoDB Local + s3rver behind the GLACIER model',
    open: async () => {
      const inst = await distributedInstallation();
      const { s3 } = await distributedServers();
      glacier ??= await startGlacierProxy(s3);
      const content = await S3ContentStore.open(
        { engine: 's3', bucket: s3.bucket, prefix: inst.prefix, region: s3.region, endpoint: glacier.endpoint },
        { credentials: s3.credentials },
      );
      const direct = inst.ctx.content;
      Object.assign(inst.ctx, { content });
      await direct.close();
      const proxy = glacier;
      return { ctx: inst.ctx, coldReads: () => proxy.coldRefusals(), close: async () => inst.close() };
    },
  },
];

/** v1 EXECUTED and v2 FAILED (runs with outputs), v3..v(n-1) SUPERSEDED, vn REJECTED: n settled versions. */
async function settledArtifact(ctx: ServiceContext, n: number): Promise<string> {
  const { version } = await createArtifact(ctx, agent, { name: 'archive-me', filename: 'f', body: bytesOf('v1') });
  const id = version.artifact_id;
  await approveAndRun(ctx, id, 1, 'SUCCEEDED');
  await addVersion(ctx, agent, id, { filename: 'f', body: bytesOf('v2') });
  await approveAndRun(ctx, id, 2, 'FAILED');
  for (let i = 3; i <= n; i++) {
    await addVersion(ctx, agent, id, { filename: 'f', body: bytesOf(`v${i}`) });
    await propose(ctx, agent, id, i);
  }
  await decide(ctx, alice, id, n, { decision: 'REJECT', evidenceRef: 'no' });
  return id;
}

/** Makes the content store's copy fail as a crash would after `k` more copies. */
function crashAfterCopies(ctx: ServiceContext, k: number): () => void {
  const content = ctx.content;
  const original = content.copy.bind(content);
  let left = k;
  content.copy = async (...args) => {
    if (left-- <= 0) throw new Error('simulated crash in a copy');
    return original(...args);
  };
  return () => {
    content.copy = original;
  };
}

async function assertArchivedOnce(ctx: ServiceContext, id: string, n: number): Promise<void> {
  const versions = await listVersions(ctx.items, id);
  assert.equal(versions.length, n);
  assert.ok(versions.every((v) => v.state === 'ARCHIVED' && typeof v.archive_key === 'string'));
  const moves = (await history(ctx, id)).filter((e) => e.type === 'transition' && e.to === 'ARCHIVED');
  assert.deepEqual(
    moves.map((e) => e.version as number).sort((a, b) => a - b),
    versions.map((v) => v.version),
    'exactly one ARCHIVED entry per version',
  );
  assert.deepEqual((await verifyArtifactAudit(ctx, id)).findings, []);
  const execs = await listExecutions(ctx, id);
  assert.equal(execs.length, 2);
  for (const e of execs) assert.equal((e.archive_objects as unknown[]).length, Object.keys(e.outputs).length);
  const { head } = await showArtifact(ctx, id);
  const mark = head.archived as unknown as { status: string; object_count: number };
  assert.equal(mark.status, 'ARCHIVED');
  assert.equal(mark.object_count, 2 * n + 4);
  assert.equal((await readArchiveJournal(ctx, id))?.status, 'ARCHIVED');
}

for (const engine of engines) {
  describe(`archive at any size on ${engine.name}`, () => {
    it(`archives ${N} settled versions and two runs with outputs in chunks that fit one transaction each, telemetry kept`, async () => {
      const e = await engine.open();
      try {
        await attachAuditSinks(e.ctx);
        const setup = Date.now();
        const id = await settledArtifact(e.ctx, N);
        console.log(`# ${N} settled versions created on ${engine.name} in ${Date.now() - setup} ms`);
        const watch = watchTransactions(e.ctx);
        const started = Date.now();
        const cold = e.coldReads();
        const { archived } = await archiveArtifact(e.ctx, alice, id);
        const ms = Date.now() - started;
        assert.equal(archived.length, 2 * N + 4);
        assert.ok(watch.sizes.length >= Math.ceil(N / 20), `${watch.sizes.length} chunks`);
        assert.ok(Math.max(...watch.sizes) <= MAX_TRANSACT_OPS, `largest transaction ${Math.max(...watch.sizes)}`);
        assert.equal(e.coldReads(), cold, 'the archive never read a GLACIER object');
        await assertArchivedOnce(e.ctx, id, N);
        const telemetry = (await history(e.ctx, id)).length;
        assert.ok(telemetry > N);
        console.log(`# archive of ${N} versions on ${engine.name}: ${watch.sizes.length} transactions, ${ms} ms`);
        await assert.rejects(archiveArtifact(e.ctx, alice, id), Conflict);
        await assert.rejects(addVersion(e.ctx, agent, id, { filename: 'f', body: bytesOf('late') }), Conflict);
        // Reads are served from the originals while archive leaves them in place (no cold read).
        const run = (await listExecutions(e.ctx, id))[0];
        const runId = run?.run_id as string;
        const coldBefore = e.coldReads();
        const first = await openVersionContent(e.ctx, id, 1);
        first.stream.resume();
        (await openExecutionOutput(e.ctx, runId, 'stdout.log')).stream.resume();
        assert.equal(e.coldReads(), coldBefore, 'reads of archived content use the originals while they exist');
        if (e.ctx.content.hasStorageClasses) {
          // Once the originals are gone, reads of the cold copies say how to restore them (GLACIER model:
          // 403 InvalidObjectState).
          await e.ctx.content.delete(first.version.content_key);
          await assert.rejects(openVersionContent(e.ctx, id, 1), ArchivedCold);
          const out = run?.outputs?.['stdout.log'] as { key: string } | undefined;
          if (out) await e.ctx.content.delete(out.key);
          await assert.rejects(openExecutionOutput(e.ctx, runId, 'stdout.log'), ArchivedCold);
        }
      } finally {
        await e.close();
      }
    });

    it('a crash after chunk k leaves the journal ARCHIVING (shown, new versions refused); re-running finishes it', async () => {
      const e = await engine.open();
      try {
        const n = 25;
        const id = await settledArtifact(e.ctx, n);
        const watch = watchTransactions(e.ctx);
        watch.crashAfter(1);
        await assert.rejects(archiveArtifact(e.ctx, alice, id), /simulated crash/);
        watch.crashAfter(undefined);
        const journal = await readArchiveJournal(e.ctx, id);
        assert.equal(journal?.status, 'ARCHIVING');
        assert.equal(journal?.chunks_committed, 1);
        const { head, versions } = await showArtifact(e.ctx, id);
        assert.equal((head.archived as unknown as { status: string }).status, 'ARCHIVING');
        const done = versions.filter((v) => v.state === 'ARCHIVED').length;
        assert.ok(done > 0 && done < n, `${done} archived after one chunk`);
        await assert.rejects(addVersion(e.ctx, agent, id, { filename: 'f', body: bytesOf('meanwhile') }), Conflict);
        await archiveArtifact(e.ctx, alice, id);
        await assertArchivedOnce(e.ctx, id, n);
      } finally {
        await e.close();
      }
    });

    it('a crash after copy k (first chunk: nothing recorded; later chunk: resumed) never half-archives', async () => {
      const e = await engine.open();
      try {
        const n = 25;
        const id = await settledArtifact(e.ctx, n);
        let restore = crashAfterCopies(e.ctx, 5);
        await assert.rejects(archiveArtifact(e.ctx, alice, id), /simulated crash/);
        restore();
        assert.equal(await readArchiveJournal(e.ctx, id), undefined, 'nothing recorded before the first chunk commits');
        assert.ok((await listVersions(e.ctx.items, id)).every((v) => v.state !== 'ARCHIVED'));
        assert.equal((await showArtifact(e.ctx, id)).head.archived, undefined);
        restore = crashAfterCopies(e.ctx, 50);
        await assert.rejects(archiveArtifact(e.ctx, alice, id), /simulated crash/);
        restore();
        assert.equal((await readArchiveJournal(e.ctx, id))?.status, 'ARCHIVING');
        await archiveArtifact(e.ctx, alice, id);
        await assertArchivedOnce(e.ctx, id, n);
      } finally {
        await e.close();
      }
    });
  });
}
