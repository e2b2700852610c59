/**
 * One regression test per defect the crash campaign (test/torture) and the fault matrix
 * (test/faults/matrix.ts) found — each fails on the code before its fix. The list with symptoms and
 * fixes is in docs/reliability-figures-crash.md.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { DAY_MS } from '../../src/core/clock.ts';
import { sha256 } from '../../src/core/digest.ts';
import { IntegrityError, toAlpError } from '../../src/core/errors.ts';
import { artifactPk, backupSk, HEAD_SK, SYS_PK } from '../../src/core/keys.ts';
import { decide } from '../../src/lifecycle/approvals.ts';
import { addVersion, createArtifact } from '../../src/lifecycle/artifacts.ts';
import { compensate } from '../../src/lifecycle/compensation.ts';
import { readExecution, startExecution, uploadOutput } from '../../src/lifecycle/executions.ts';
import { addProvenance } from '../../src/lifecycle/provenance.ts';
import { propose } from '../../src/lifecycle/transitions.ts';
import { readVersion } from '../../src/lifecycle/versions.ts';
import { abandonBackup, createBackup, listBackups, settleInterruptedBackups } from '../../src/recovery/backup.ts';
import { reconcile } from '../../src/recovery/reconcile.ts';
import { ArtifactRetention } from '../../src/retention/retention.ts';
import { createContext } from '../../src/runtime/context.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { contentRootId, deleteRefIndexEntry } from '../../src/system/ref-index.ts';
import { embeddedContext } from '../helpers/context.ts';
import { embedded, epochOf, host, type RetentionInstallation } from '../helpers/retention-harness.ts';
import { bytesOf, tempDir } from '../helpers/tmp.ts';
import { agent, alice, approveAndRun } from '../helpers/walk.ts';
import { errnoError, FaultPlan, type FaultRule, FaultyContentStore, FaultyItemStore, timeoutError } from './faulty-stores.ts';

const root = path.resolve(import.meta.dirname, '../..');
const tsx = import.meta.resolve('tsx');

/** The context through fault wrappers, with the rules armed. */
function faulty(ctx: ReturnType<typeof createContext>, rules: FaultRule[]) {
  const plan = new FaultPlan(rules);
  return {
    plan,
    ctx: createContext({
      items: new FaultyItemStore(ctx.items, plan),
      content: new FaultyContentStore(ctx.content, plan),
      clock: ctx.clock,
    }),
  };
}

/** A pid that surely belongs to no process any more. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(r.stdout.toString());
}

/** A full retention cycle: observe, quarantine 8 days later, purge 31 days after that. */
async function sweep(i: RetentionInstallation, restore: string) {
  const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
  const h = host(i.ctx, { restore });
  await retention.run(await epochOf(i.ctx), 'QUARANTINE', h);
  i.ctx.clock.advance(8 * DAY_MS);
  await retention.run(await epochOf(i.ctx), 'QUARANTINE', h);
  i.ctx.clock.advance(31 * DAY_MS);
  return retention.run(await epochOf(i.ctx), 'PURGE', h);
}

describe('regressions found by the crash campaign and the fault matrix', () => {
  it('D1: a first `alp start` killed before it printed the bootstrap tokens: the next start prints them', async () => {
    const data = tempDir('alp-boot');
    // What the killed first start had done: created the installation (marked for bootstrap tokens).
    const items = new SqliteItemStore(path.join(data, 'alp.db'));
    const ctx = await embeddedContext();
    await initInstallation(createContext({ items, content: ctx.content, clock: ctx.clock }), { bootstrapTokens: true });
    await items.close();
    const start = () =>
      new Promise<{ tokens: unknown[] }>((resolve, reject) => {
        const child = spawn(
          process.execPath,
          ['--import', tsx, path.join(root, 'src/cli/main.ts'), 'start', '--data', data, '--port', '0', '--json'],
          {
            stdio: ['ignore', 'pipe', 'pipe'],
            env: { ...process.env, ALP_TOKEN: '' },
          },
        );
        let out = '';
        let stopping = false;
        child.stdout.on('data', (b: Buffer) => {
          out += b.toString();
          const line = out.split('\n').find((l) => l.startsWith('{') && l.includes('"tokens"'));
          // One SIGTERM: the server logs its shutdown on stdout, and a second signal means "exit now"
          // (before it may have recorded that the tokens were shown).
          if (line && !stopping) {
            stopping = true;
            child.kill('SIGTERM');
            child.on('exit', () => resolve(JSON.parse(line) as { tokens: unknown[] }));
          }
        });
        child.on('error', reject);
      });
    assert.equal((await start()).tokens.length, 2, 'the tokens nobody saw are issued now');
    assert.equal((await start()).tokens.length, 0, 'and only until they were shown');
  });

  describe('D2: an interrupted backup never blocks retention or maintenance recovery', () => {
    const pending = async (i: RetentionInstallation, location: string, pid: number, hostName = os.hostname()) => {
      const id = `01PENDING${String(pid).padStart(17, '0')}`;
      await i.ctx.items.put({
        PK: SYS_PK,
        SK: backupSk(id),
        type: 'backup',
        backup_id: id,
        status: 'PENDING',
        location,
        installation_id: 'x',
        started_at: i.ctx.clock.now().toISOString(),
        created_by: 'os:operator',
        host: hostName,
        pid,
      });
      return id;
    };

    it('a writer that died before the rename: retention proceeds; the next start records it FAILED and removes its partial directory', async () => {
      const i = await embedded.open();
      const restore = await i.verifiedRestore();
      const out = path.join(tempDir('alp-bk'), 'b1');
      const id = await pending(i, out, deadPid());
      fs.mkdirSync(path.join(path.dirname(out), `.b1.partial-${id}`));
      await i.ctx.content.put('artifacts/ORPHAN/v1/x', bytesOf('orphan bytes'));
      const purge = await sweep(i, restore);
      assert.deepEqual(purge.purged, ['artifacts/ORPHAN/v1/x']);
      assert.deepEqual(await settleInterruptedBackups(i.ctx), { completed: [], failed: [id], running: [] });
      assert.equal((await listBackups(i.ctx)).find((b) => b.backup_id === id)?.status, 'FAILED');
      assert.equal(fs.existsSync(path.join(path.dirname(out), `.b1.partial-${id}`)), false);
      await i.close();
    });

    it('a writer that died after the rename: the complete directory is registered COMPLETE and honoured', async () => {
      const i = await embedded.open();
      const out = path.join(tempDir('alp-bk'), 'b2');
      const done = await createBackup(i.ctx, { out, actor: 'os:operator' });
      // As if the writer died between the rename and the registry update.
      await i.ctx.items.update(
        { PK: SYS_PK, SK: backupSk(done.backup_id) },
        { set: { status: 'PENDING', pid: deadPid(), host: os.hostname() }, remove: ['manifest_digest'] },
      );
      assert.deepEqual(await settleInterruptedBackups(i.ctx), { completed: [done.backup_id], failed: [], running: [] });
      const rec = (await listBackups(i.ctx)).find((b) => b.backup_id === done.backup_id);
      assert.equal(rec?.status, 'COMPLETE');
      assert.equal(rec?.manifest_digest, done.manifest.manifest_digest);
      await i.close();
    });

    it('a writer that may still run (alive, or another host): retention fails closed naming `alp backups --abandon`; abandoning releases it', async () => {
      const i = await embedded.open();
      const restore = await i.verifiedRestore();
      const id = await pending(i, path.join(tempDir('alp-bk'), 'b3'), process.pid, 'another-host');
      const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
      await assert.rejects(retention.run(await epochOf(i.ctx), 'QUARANTINE', host(i.ctx, { restore })), /alp backups --abandon/);
      assert.equal((await abandonBackup(i.ctx, id, 'os:operator')).status, 'FAILED');
      assert.equal((await retention.run(await epochOf(i.ctx), 'QUARANTINE', host(i.ctx, { restore }))).status, 'NOTHING_TO_DO');
      await i.close();
    });

    it('a backup whose registration fails after the rename leaves no directory that looks complete', async () => {
      const i = await embedded.open();
      const out = path.join(tempDir('alp-bk'), 'b4');
      const f = faulty(i.ctx, [
        { store: 'items', method: 'update', kind: 'EIO', when: (args) => (args[0] as { SK: string }).SK.startsWith('BACKUP#') },
      ]);
      await assert.rejects(createBackup(f.ctx, { out, actor: 'os:operator' }), /EIO/);
      assert.equal(fs.existsSync(out), false);
      await i.close();
    });
  });

  describe('D3: a change that committed is never reported as failed', () => {
    it('propose: reading the version back fails → the committed version is returned', async () => {
      const ctx = await embeddedContext();
      const { version } = await createArtifact(ctx, agent, { name: 'a', filename: 'f', body: bytesOf('x') });
      const f = faulty(ctx, [
        { store: 'items', method: 'get', kind: 'EIO', when: (args) => (args[0] as { SK: string }).SK === version.SK },
      ]);
      const v = await propose(f.ctx, agent, version.artifact_id, 1);
      assert.equal(f.plan.fired.length, 1);
      assert.equal(v.state, 'PROPOSED');
      assert.equal(v.row_version, 2);
    });

    it('addProvenance: writing the derived document fails → the committed step is returned', async () => {
      const ctx = await embeddedContext();
      await initInstallation(ctx);
      const { version } = await createArtifact(ctx, agent, { name: 'a', filename: 'f', body: bytesOf('x') });
      const f = faulty(ctx, [{ store: 'content', method: 'put', kind: 'ENOSPC' }]);
      const step = await addProvenance(f.ctx, agent, version.artifact_id, { action: 'generate' });
      assert.equal(f.plan.fired.length, 1);
      assert.equal(step.step, 1);
      // A stale derived document is reported as such, never as a failure.
      assert.equal((await reconcile(ctx, { actor: 't' })).status, 'VERIFIED');
    });
  });

  describe('D4: an upload that fails can be retried at once', () => {
    const running = async () => {
      const ctx = await embeddedContext();
      const { version } = await createArtifact(ctx, agent, { name: 'a', filename: 'f', body: bytesOf('x') });
      await propose(ctx, agent, version.artifact_id, 1);
      await decide(ctx, alice, version.artifact_id, 1, { decision: 'APPROVE', evidenceRef: 'e' });
      return { ctx, run: (await startExecution(ctx, agent, version.artifact_id, 1)).run_id };
    };

    it('its commit failed: the reservation is released', async () => {
      const { ctx, run } = await running();
      const f = faulty(ctx, [{ store: 'items', method: 'transactWrite', call: 2, kind: 'EIO' }]);
      await assert.rejects(uploadOutput(f.ctx, agent, run, 'stdout.log', bytesOf('log')), /EIO/);
      assert.equal((await uploadOutput(ctx, agent, run, 'stdout.log', bytesOf('log'))).size, 3);
    });

    it('its reservation timed out after it was written: the reservation is taken back', async () => {
      const { ctx, run } = await running();
      const f = faulty(ctx, [{ store: 'items', method: 'transactWrite', call: 1, kind: 'TIMEOUT_AFTER' }]);
      await assert.rejects(uploadOutput(f.ctx, agent, run, 'stdout.log', bytesOf('log')), /ETIMEDOUT/);
      assert.equal((await uploadOutput(ctx, agent, run, 'stdout.log', bytesOf('log'))).size, 3);
      assert.deepEqual(Object.keys((await readExecution(ctx, run)).outputs), ['stdout.log']);
    });
  });

  it('D5: a compensation whose commit failed can be retried with the same filename', async () => {
    const ctx = await embeddedContext();
    const { version } = await createArtifact(ctx, agent, { name: 'a', filename: 'f', body: bytesOf('x') });
    await approveAndRun(ctx, version.artifact_id, 1, 'SUCCEEDED');
    const f = faulty(ctx, [{ store: 'items', method: 'transactWrite', call: 1, kind: 'ENOSPC' }]);
    await assert.rejects(compensate(f.ctx, agent, version.artifact_id, 1, { filename: 'undo.sh', body: bytesOf('undo') }), /ENOSPC/);
    const res = await compensate(ctx, agent, version.artifact_id, 1, { filename: 'undo.sh', body: bytesOf('undo') });
    assert.equal(res.compensated.state, 'COMPENSATING');
  });

  it('D10: two compensations of one version with the same filename at once: one commits, over its own bytes', async () => {
    // Found while fixing D5: both passed the check, both wrote the rollback key, and the winner's
    // committed record named bytes the loser had written over (the read then failed INTEGRITY).
    const ctx = await embeddedContext();
    await initInstallation(ctx);
    const { version } = await createArtifact(ctx, agent, { name: 'a', filename: 'f', body: bytesOf('x') });
    await approveAndRun(ctx, version.artifact_id, 1, 'SUCCEEDED');
    async function* slow(c: string, n: number) {
      for (let i = 0; i < n; i++) {
        await new Promise((r) => setTimeout(r, 1));
        yield Buffer.from(c.repeat(1000));
      }
    }
    const results = await Promise.allSettled([
      compensate(ctx, agent, version.artifact_id, 1, { filename: 'undo.sh', body: slow('a', 4) }),
      compensate(ctx, agent, version.artifact_id, 1, { filename: 'undo.sh', body: slow('b', 6) }),
    ]);
    assert.deepEqual(results.map((r) => r.status).sort(), ['fulfilled', 'rejected']);
    assert.equal((await reconcile(ctx, { actor: 't' })).status, 'VERIFIED');
    const v = await readVersion(ctx.items, version.artifact_id, 1);
    assert.equal(v.state, 'COMPENSATING');
    assert.equal(v.rollback_upload_at, undefined, 'the commit removed the reservation');
  });

  it('D6: orphans a reconciliation reported are still reclaimed (a report is not a reference)', async () => {
    const i = await embedded.open();
    const restore = await i.verifiedRestore();
    await i.ctx.content.put('artifacts/ORPHAN/v1/x', bytesOf('left by a crash'));
    const report = await reconcile(i.ctx, { actor: 't' });
    assert.ok(report.findings.some((f) => f.kind === 'unexpected' && f.key === 'artifacts/ORPHAN/v1/x'));
    assert.deepEqual((await sweep(i, restore)).purged, ['artifacts/ORPHAN/v1/x']);
    await i.close();
  });

  describe('D7: bytes of uploads that died become reclaimable once their reservation is stale', () => {
    it('an output reservation on a run: kept while fresh, reclaimed once stale', async () => {
      const i = await embedded.open();
      const restore = await i.verifiedRestore();
      const { version } = await createArtifact(i.ctx, agent, { name: 'a', filename: 'f', body: bytesOf('x') });
      await propose(i.ctx, agent, version.artifact_id, 1);
      await decide(i.ctx, alice, version.artifact_id, 1, { decision: 'APPROVE', evidenceRef: 'e' });
      const run = await startExecution(i.ctx, agent, version.artifact_id, 1);
      // An upload that died after its bytes were written: reservation and object, no commit.
      await i.ctx.items.update({ PK: run.PK, SK: run.SK }, { set: { 'reserved:stdout.log': i.ctx.clock.now().toISOString() } });
      await i.ctx.content.put(`executions/${run.run_id}/stdout.log`, bytesOf('partial run log'));
      const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
      const fresh = await retention.run(await epochOf(i.ctx), 'QUARANTINE', host(i.ctx, { restore }));
      assert.deepEqual(fresh.observed, [], 'in flight: not even a candidate');
      i.ctx.clock.advance(2 * 60 * 60 * 1000);
      assert.deepEqual((await sweep(i, restore)).purged, [`executions/${run.run_id}/stdout.log`]);
      await i.close();
    });

    it('a reserved version number never committed: kept while fresh, reclaimed once stale', async () => {
      const i = await embedded.open();
      const restore = await i.verifiedRestore();
      const { version } = await createArtifact(i.ctx, agent, { name: 'a', filename: 'f', body: bytesOf('x') });
      // addVersion that died after its bytes were written: the number is reserved, the version never committed.
      const f = faulty(i.ctx, [{ store: 'items', method: 'transactWrite', call: 2, kind: 'EIO' }]);
      await assert.rejects(addVersion(f.ctx, agent, version.artifact_id, { filename: 'f', body: bytesOf('v2 bytes') }), /EIO/);
      const head = await i.ctx.items.get({ PK: artifactPk(version.artifact_id), SK: HEAD_SK });
      assert.equal(head?.latest_version, 2);
      const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
      assert.deepEqual((await retention.run(await epochOf(i.ctx), 'QUARANTINE', host(i.ctx, { restore }))).observed, []);
      i.ctx.clock.advance(2 * 60 * 60 * 1000);
      const purged = (await sweep(i, restore)).purged.sort();
      assert.deepEqual(purged, [`artifacts/${version.artifact_id}/v2/f`, `artifacts/${version.artifact_id}/v2/metadata.json`]);
      await i.close();
    });
  });

  it('D9: a short read of referenced content during a PURGE fails closed instead of purging what that content names', async () => {
    const i = await embedded.open();
    const restore = await i.verifiedRestore();
    const trap = 'artifacts/ORPHAN/v1/needed-later.bin';
    const bytes = Buffer.from('bytes a later artifact names');
    await i.ctx.content.put(trap, bytesOf(bytes));
    const retention = new ArtifactRetention(i.ctx.items, i.ctx.content, { clock: i.ctx.clock });
    await retention.run(await epochOf(i.ctx), 'QUARANTINE', host(i.ctx, { restore }));
    i.ctx.clock.advance(8 * DAY_MS);
    assert.deepEqual((await retention.run(await epochOf(i.ctx), 'QUARANTINE', host(i.ctx, { restore }))).quarantined, [trap]);
    // An artifact whose content names the quarantined bytes near its end: they are referenced again.
    const namer = Buffer.concat([Buffer.alloc(200 * 1024, 1), Buffer.from(`\nneeds ${sha256(bytes)}\n`)]);
    const { version } = await createArtifact(i.ctx, agent, { name: 'namer', filename: 'plan.txt', body: bytesOf(namer) });
    i.ctx.clock.advance(31 * DAY_MS);
    // The namer as an object written before the reference index (issue 17): no entry, so the scan
    // must read its bytes, and the short read must fail the scan closed.
    await deleteRefIndexEntry(i.ctx.items, contentRootId(i.ctx.content.location), i.ctx.layout.index_shards, version.content_key);
    const f = faulty(i.ctx, [
      { store: 'content', method: 'readRaw', kind: 'PARTIAL_READ', when: (args) => args[0] === version.content_key },
    ]);
    const faultyRetention = new ArtifactRetention(f.ctx.items, f.ctx.content, { clock: i.ctx.clock });
    await assert.rejects(faultyRetention.run(await epochOf(i.ctx), 'PURGE', host(f.ctx, { restore })), IntegrityError);
    assert.ok(await i.ctx.content.head(trap), 'the named bytes are still there');
    // Without the fault, the reference is found and the quarantine is reset.
    const again = await retention.run(await epochOf(i.ctx), 'PURGE', host(i.ctx, { restore }));
    assert.deepEqual(again.purged, []);
    assert.ok(again.reset.includes(trap));
    await i.close();
  });

  it('storage errors say what failed; timeouts and lost connections say the outcome is unknown', () => {
    assert.equal(toAlpError(errnoError('ENOSPC', 'write')).message, 'storage failure: ENOSPC (no space left on device)');
    assert.equal(
      toAlpError(Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR_SHORT_READ' })).message,
      'storage failure: SQLITE_IOERR_SHORT_READ (the database hit an input/output error)',
    );
    assert.match(
      toAlpError(timeoutError('transactWrite')).message,
      /^storage timeout \(ETIMEDOUT\): the operation may or may not have taken effect/,
    );
    assert.match(toAlpError(errnoError('ECONNRESET', 'read')).message, /^storage connection lost \(ECONNRESET\)/);
  });
});
