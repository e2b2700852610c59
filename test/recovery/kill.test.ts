/**
 * kill -9 at random points of backup and restore, many runs. After every kill:
 * - the source (its items, its content files and their bytes; for a restore also the backup
 *   directory) is unchanged, and a backup directory exists only when it is complete;
 * - a restore's target either reconciles VERIFIED, or reconciliation reports exactly what is missing
 *   (the items and objects the test finds missing by comparing with the backup itself), and running the
 *   restore again completes it to VERIFIED.
 * ALP_RECOVERY_KILL_RUNS (default 6) sets the runs per operation; a long campaign: ALP_RECOVERY_KILL_RUNS=200.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { createBackup, listBackups } from '../../src/recovery/backup.ts';
import { isNeverBackedUp, openBackup } from '../../src/recovery/backup-format.ts';
import { type ReconcileReport, reconcile } from '../../src/recovery/reconcile.ts';
import { heldRestore, restoreBackup } from '../../src/recovery/restore.ts';
import { fromSource } from '../helpers/cli-bundle.ts';
import { tempDir } from '../helpers/tmp.ts';
import { allItems, dirState, type Embedded, embeddedAt, populate, tableLines } from './helpers.ts';

const RUNS = Number(process.env.ALP_RECOVERY_KILL_RUNS ?? 6);
const worker = path.join(import.meta.dirname, 'fixtures', 'kill-worker.ts');
const notRegistry = (i: { PK: string; SK: string }) => i.PK === 'SYS#installation' && i.SK.startsWith('BACKUP#');

interface Outcome {
  completed: boolean;
  workMs: number;
}

/** Runs the worker; SIGKILLs it `killAfterMs` after READY (never when undefined). */
function runWorker(mode: 'backup' | 'restore', options: Record<string, unknown>, killAfterMs?: number): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...fromSource(worker), mode, JSON.stringify(options)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    });
    let out = '';
    let err = '';
    let readyAt = 0;
    let doneAt = 0;
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (!readyAt && out.includes('READY\n')) {
        readyAt = performance.now();
        if (killAfterMs !== undefined) setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      }
      if (!doneAt && out.includes('DONE\n')) doneAt = performance.now();
    });
    child.stderr.on('data', (b: Buffer) => {
      err += b.toString();
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (signal !== 'SIGKILL' && code !== 0) reject(new Error(`worker ${mode} exited ${code}: ${err}`));
      else resolve({ completed: out.includes('DONE\n'), workMs: doneAt && readyAt ? doneAt - readyAt : 0 });
    });
  });
}

async function sourceInstallation(dir: string): Promise<Embedded> {
  const src = await embeddedAt(path.join(dir, 'src'));
  await populate(src, 40);
  return src;
}

/** The keys of a backup's items and of its immutable objects. */
async function backupContents(dir: string) {
  const b = await openBackup(dir);
  const items: string[] = [];
  for await (const i of b.items()) if (!isNeverBackedUp(i)) items.push(`${i.PK} ${i.SK}`);
  const objects: string[] = [];
  for await (const o of b.objects()) if (!o.mutable) objects.push(o.key);
  return { items, objects };
}

function missingOf(report: ReconcileReport, kind: 'item' | 'object'): string[] {
  return report.findings
    .filter((f) => f.kind === kind && f.problem === 'missing')
    .map((f) => (kind === 'item' ? (f.row as string) : (f.key as string)))
    .sort();
}

describe('kill -9 during backup and restore', () => {
  it(`backup: ${RUNS} kills at random points leave the source unchanged and no backup that looks complete unless it is`, async () => {
    const dir = tempDir('alp-kill-b');
    const src = await sourceInstallation(dir);
    const data = src.dir;
    const items = await tableLines(src.items, notRegistry);
    const content = dirState(src.contentRoot);
    // How long each kind of backup works once started (the faster of two uncut runs).
    const workMs: number[] = [];
    for (const withContent of [false, true]) {
      const times: number[] = [];
      for (const n of [1, 2]) {
        const probe = await runWorker('backup', { data, out: path.join(dir, `probe-${withContent}-${n}`), withContent });
        assert.ok(probe.completed && probe.workMs > 0);
        times.push(probe.workMs);
      }
      workMs.push(Math.min(...times));
    }
    let complete = 0;
    for (let i = 0; i < RUNS; i++) {
      const out = path.join(dir, 'backups', `b${i}`);
      const withContent = i % 2 === 0;
      const kill = Math.random() * (workMs[withContent ? 1 : 0] as number);
      const r = await runWorker('backup', { data, out, withContent }, kill);
      assert.deepEqual(await tableLines(src.items, notRegistry), items, `run ${i}: the source items are unchanged`);
      assert.deepEqual(dirState(src.contentRoot), content, `run ${i}: the source content is unchanged`);
      const exists = fs.existsSync(out);
      const record = (await listBackups(src)).find((b) => b.location === out);
      if (exists) {
        // Complete: it verifies, and a restore of it reconciles VERIFIED.
        const b = await openBackup(out);
        assert.equal(b.manifest.with_content, withContent);
        const dst = await embeddedAt(path.join(dir, `verify-${i}`));
        await restoreBackup(dst, { from: out, actor: 't', ...(withContent ? {} : { fetchFrom: src.content }) });
        assert.equal((await reconcile(dst, { actor: 't' })).status, 'VERIFIED', `run ${i}`);
        await dst.items.close();
        complete++;
      } else {
        assert.notEqual(record?.status, 'COMPLETE', `run ${i}: no COMPLETE record without its directory`);
        assert.equal(r.completed, false);
      }
    }
    process.stdout.write(
      `# backup kills: ${RUNS} runs, ${complete} completed before the kill; work ${workMs.map(Math.round).join('/')} ms\n`,
    );
  });

  it(`restore: ${RUNS} kills at random points leave the backup and the source unchanged; the target reconciles or names what is missing`, async () => {
    const dir = tempDir('alp-kill-r');
    const src = await sourceInstallation(dir);
    const bk = path.join(dir, 'bk');
    await createBackup(src, { out: bk, withContent: true, actor: 't' });
    const backupFiles = dirState(bk);
    const srcItems = await tableLines(src.items);
    const srcContent = dirState(src.contentRoot);
    const expected = await backupContents(bk);
    const workMs: number[] = [];
    for (const sameRoot of [false, true]) {
      const times: number[] = [];
      for (const n of [1, 2]) {
        const probe = await runWorker('restore', {
          data: path.join(dir, `probe-${sameRoot}-${n}`),
          from: bk,
          ...(sameRoot ? { content: `file:${src.contentRoot}` } : {}),
        });
        assert.ok(probe.completed && probe.workMs > 0);
        times.push(probe.workMs);
      }
      workMs.push(Math.min(...times));
    }
    const tally = { verified: 0, partial: 0, empty: 0 };
    for (let i = 0; i < RUNS; i++) {
      const data = path.join(dir, `t${i}`);
      // Odd runs restore into the source's own content root: it must not change either.
      const sameRoot = i % 2 === 1;
      const kill = Math.random() * (workMs[sameRoot ? 1 : 0] as number);
      await runWorker('restore', { data, from: bk, ...(sameRoot ? { content: `file:${src.contentRoot}` } : {}) }, kill);
      assert.deepEqual(dirState(bk), backupFiles, `run ${i}: the backup is unchanged`);
      assert.deepEqual(await tableLines(src.items), srcItems, `run ${i}: the source items are unchanged`);
      assert.deepEqual(dirState(src.contentRoot), srcContent, `run ${i}: the source content is unchanged`);

      const target = await embeddedAt(data);
      if (sameRoot) Object.assign(target, { content: await FsContentStore.open(src.contentRoot) });
      const report = await reconcile(target, { actor: 't' });
      const held = await heldRestore(target);
      if (report.status === 'VERIFIED') {
        assert.equal(held?.record?.status, 'RESTORED');
        tally.verified++;
      } else if (!held) {
        // Killed before the restore began: nothing was written, and reconciliation says so.
        assert.deepEqual(await allItems(target.items), []);
        assert.equal(report.persisted, false);
        tally.empty++;
      } else {
        assert.equal(held.record?.status, 'RESTORING', `run ${i}: only an unfinished restore fails`);
        const present = new Set((await allItems(target.items)).map((x) => `${x.PK} ${x.SK}`));
        const missingItems = expected.items.filter((k) => !present.has(k)).sort();
        const missingObjects: string[] = [];
        for (const k of expected.objects) if (!(await target.content.head(k))) missingObjects.push(k);
        if (report.findings_total <= report.findings.length) {
          assert.deepEqual(missingOf(report, 'item'), missingItems, `run ${i}: exactly the missing items`);
          assert.deepEqual(missingOf(report, 'object'), missingObjects.sort(), `run ${i}: exactly the missing objects`);
        } else {
          // More findings than a report lists (MAX_REPORTED_FINDINGS; an early kill leaves most items missing, and
          // the transparency log's markers made the installation's item count larger): what it lists is right.
          for (const k of missingOf(report, 'item')) assert.ok(missingItems.includes(k), `run ${i}: ${k} is missing`);
          for (const k of missingOf(report, 'object')) assert.ok(missingObjects.includes(k), `run ${i}: ${k} is missing`);
        }
        assert.equal(report.restore?.items_missing, missingItems.length);
        tally.partial++;
      }
      // Running the restore again completes it.
      if (report.status !== 'VERIFIED') {
        await restoreBackup(target, { from: bk, actor: 't' });
        const again = await reconcile(target, { actor: 't' });
        assert.equal(again.status, 'VERIFIED', `run ${i}: ${JSON.stringify(again.findings.slice(0, 3))}`);
      }
      await target.items.close();
    }
    process.stdout.write(`# restore kills: ${JSON.stringify(tally)}; work ${workMs.map(Math.round).join('/')} ms\n`);
  });
});
