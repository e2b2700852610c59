/**
 * The fs engine's small-object write path (issue 18 item 1, docs/design.md §6 "fs publish"): file
 * fsyncs, links, then one round of directory fsyncs shared between concurrent publishes; a directory
 * made by one stage is made durable by whichever publish into it comes first; kill -9 at every fsync
 * of a creation leaves only whole objects or nothing at the keys, temp files that cleanupInterrupted
 * removes, and keys a retry with the same bytes can publish. Fresh keys (a new id's, a reserved
 * version's) are written in place with the files' and directories' fsyncs in one round.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { DirSyncer } from '../../src/content/fs/dir-sync.ts';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { sha256 } from '../../src/core/digest.ts';
import { Conflict, IntegrityError } from '../../src/core/errors.ts';
import { fromSource } from '../helpers/cli-bundle.ts';
import { bytesOf, collect, tempDir } from '../helpers/tmp.ts';
import { tempFiles } from '../torture/checks.ts';

function deferred() {
  let resolve = () => {};
  let reject: (e: Error) => void = () => {};
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('DirSyncer: directory fsyncs shared between concurrent publishes', () => {
  it('a request joins a fsync not yet issued, and one made while a fsync runs gets a fresh one', async () => {
    const issued: Array<{ dir: string; done: ReturnType<typeof deferred> }> = [];
    const syncer = new DirSyncer(async (dir) => {
      const done = deferred();
      issued.push({ dir, done });
      await done.promise;
    });
    const first = syncer.sync('a');
    assert.equal(issued.length, 1, 'the first request is issued at once');
    const second = syncer.sync('a');
    const third = syncer.sync('a');
    const other = syncer.sync('b');
    assert.equal(issued.length, 2, 'requests during a running fsync wait; another directory is not held up');
    let secondDone = false;
    void second.then(() => {
      secondDone = true;
    });
    issued[0]?.done.resolve();
    await first;
    await new Promise((r) => setImmediate(r));
    assert.equal(secondDone, false, 'a request made while a fsync ran is not answered by that fsync');
    assert.equal(issued.length, 3, 'one fresh fsync for both waiting requests');
    assert.equal(issued[2]?.dir, 'a');
    issued[2]?.done.resolve();
    await Promise.all([second, third]);
    issued[1]?.done.resolve();
    await other;
  });

  it('a failed fsync fails every request it answers; the next request issues a new one', async () => {
    let fail = true;
    let calls = 0;
    const syncer = new DirSyncer(async () => {
      calls++;
      await new Promise((r) => setImmediate(r));
      if (fail) throw Object.assign(new Error('EIO'), { code: 'EIO' });
    });
    const running = syncer.sync('a');
    const [a, b] = [syncer.sync('a'), syncer.sync('a')];
    await assert.rejects(running, /EIO/);
    await assert.rejects(a, /EIO/);
    await assert.rejects(b, /EIO/);
    fail = false;
    await syncer.sync('a');
    assert.equal(calls, 3);
  });
});

describe('fs publish: directories', () => {
  it('an object published before the one whose stage made its directory fsyncs that directory’s parent', async () => {
    // Regression: only the stage that made a directory fsynced its parent; an object staged into it
    // meanwhile and published first was durable in a directory whose own entry was not.
    const root = tempDir('alp-fs-dirs');
    const dirs: string[] = [];
    const store = await FsContentStore.open(root, {
      fsyncHook: ({ kind, path: p }) => {
        if (kind === 'dir') dirs.push(path.relative(root, p));
      },
    });
    const maker = await store.stage('executions/run1/a', bytesOf('a'));
    const later = await store.stage('executions/run1/b', bytesOf('b'));
    await store.publish([later]);
    // Its target, the new run directory's parent and the root (the parent of the new executions/).
    assert.deepEqual(dirs.sort(), ['', 'executions', 'executions/run1']);
    dirs.length = 0;
    await store.publish([maker]);
    assert.ok(dirs.includes('executions/run1'), 'its own target directory');
    dirs.length = 0;
    await store.put('executions/run1/c', bytesOf('c'));
    assert.deepEqual(dirs, ['executions/run1'], 'once durable, the parent is not fsynced again');
  });

  it('two stages racing to make the same new directories: whichever publishes first makes all of them durable', async () => {
    for (let run = 0; run < 10; run++) {
      const root = tempDir('alp-fs-dirs');
      const dirs: string[] = [];
      const store = await FsContentStore.open(root, {
        fsyncHook: ({ kind, path: p }) => {
          if (kind === 'dir') dirs.push(path.relative(root, p));
        },
      });
      const [a, b] = await Promise.all([store.stage('artifacts/c/v1/a', bytesOf('a')), store.stage('artifacts/c/v1/b', bytesOf('b'))]);
      const [first, second] = run % 2 ? [a, b] : [b, a];
      await store.publish([first]);
      assert.deepEqual(dirs.sort(), ['', 'artifacts', 'artifacts/c', 'artifacts/c/v1']);
      await store.publish([second]);
      assert.deepEqual((await store.listPage('artifacts/')).objects.map((o) => o.key).sort(), ['artifacts/c/v1/a', 'artifacts/c/v1/b']);
    }
  });

  it('a directory removed underneath the store is made (and made durable) again', async () => {
    const root = tempDir('alp-fs-dirs');
    const dirs: string[] = [];
    const store = await FsContentStore.open(root, {
      fsyncHook: ({ kind, path: p }) => {
        if (kind === 'dir') dirs.push(path.relative(root, p));
      },
    });
    await store.put('artifacts/x/v1/f', bytesOf('one'));
    fs.rmSync(path.join(root, 'artifacts', 'x'), { recursive: true });
    dirs.length = 0;
    await store.put('artifacts/x/v1/g', bytesOf('two'));
    assert.deepEqual(dirs.sort(), ['artifacts', 'artifacts/x', 'artifacts/x/v1']);
    assert.equal((await collect(await store.get('artifacts/x/v1/g', sha256('two')))).toString(), 'two');
  });

  it('concurrent creations share the fsync of their common parent', async () => {
    const root = tempDir('alp-fs-dirs');
    let artifactsSyncs = 0;
    const store = await FsContentStore.open(root, {
      fsyncHook: async ({ kind, path: p }) => {
        if (kind === 'dir' && p === path.join(root, 'artifacts')) artifactsSyncs++;
        await new Promise((r) => setTimeout(r, 20));
      },
    });
    await store.put('artifacts/first/v1/f', bytesOf('0'));
    artifactsSyncs = 0;
    await Promise.all(Array.from({ length: 8 }, (_, i) => store.put(`artifacts/a${i}/v1/f`, bytesOf(String(i)))));
    assert.ok(artifactsSyncs >= 1 && artifactsSyncs < 8, `8 creations, ${artifactsSyncs} fsyncs of artifacts/`);
    for (let i = 0; i < 8; i++) assert.equal((await store.head(`artifacts/a${i}/v1/f`))?.size, 1);
  });
});

const worker = path.join(import.meta.dirname, 'fs-crash-worker.ts');

function runWorker(root: string, id: string, killAt: number, mode = 'temp'): Promise<{ killed: boolean; fsyncs: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...fromSource(worker), root, id, String(killAt), mode], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
    });
    child.stderr.on('data', (b: Buffer) => {
      err += b.toString();
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (signal !== 'SIGKILL' && code !== 0) reject(new Error(`worker exited ${code}: ${err}`));
      const lines = out.split('\n').filter(Boolean);
      resolve({ killed: signal === 'SIGKILL', fsyncs: lines.filter((l) => l !== 'DONE') });
    });
  });
}

describe('fs publish: kill -9 at every fsync of a creation', () => {
  it('leaves whole objects or nothing at the keys, temp files cleanupInterrupted removes, and keys a retry publishes', async () => {
    const root = tempDir('alp-fs-crash');
    // The order the design states: both files, then one round of directory fsyncs (after the links):
    // the target, the new directories' parents (and the root, for the first artifacts/).
    const first = await runWorker(root, 'first', -1);
    assert.deepEqual(
      first.fsyncs.map((l) => l.split(' ')[0]),
      ['file', 'file', 'dir', 'dir', 'dir', 'dir'],
    );
    const full = await runWorker(root, 'full', -1);
    assert.equal(full.killed, false);
    assert.deepEqual(
      full.fsyncs.map((l) => l.split(' ')[0]),
      ['file', 'file', 'dir', 'dir', 'dir'],
    );
    const contentBytes = Buffer.alloc(4096, 7);
    const metaBytes = Buffer.from('{"m":1}\n');
    for (let killAt = 0; killAt < full.fsyncs.length; killAt++) {
      const id = `k${killAt}`;
      const run = await runWorker(root, id, killAt);
      assert.equal(run.killed, true, `killed at fsync ${killAt}`);
      const store = await FsContentStore.open(root);
      const linked = killAt >= 2;
      for (const [key, bytes] of [
        [`artifacts/${id}/v1/f.txt`, contentBytes],
        [`artifacts/${id}/v1/metadata.json`, metaBytes],
      ] as const) {
        const info = await store.head(key);
        // Before the links nothing is at the keys; after them (the directory round running) each key holds whole bytes.
        if (!linked) assert.equal(info, undefined, `${key} after a kill at fsync ${killAt}`);
        else assert.deepEqual(await collect(await store.get(key, sha256(bytes))), bytes);
      }
      assert.equal(await store.cleanupInterrupted(), killAt < 2 ? 2 : 0, 'the dead writer’s temp files');
      assert.deepEqual(tempFiles(root), []);
      // A retry with the same bytes (what a caller does after a crash it was not answered for) succeeds.
      await store.put(`artifacts/${id}/v1/f.txt`, [contentBytes]);
      await store.put(`artifacts/${id}/v1/metadata.json`, [metaBytes]);
    }
  });
});

describe('fs publish: fresh keys written in place (issue 18 item 1)', () => {
  it('the files’ and the directories’ fsyncs are one round', async () => {
    const root = tempDir('alp-fs-round');
    const issued: Array<{ kind: string; at: number }> = [];
    const store = await FsContentStore.open(root, {
      fsyncHook: async ({ kind }) => {
        issued.push({ kind, at: performance.now() });
        await new Promise((r) => setTimeout(r, 50));
      },
    });
    const content = await store.stage('artifacts/one/v1/f.txt', [Buffer.from('content')], { fresh: true });
    const meta = await store.stage('artifacts/one/v1/metadata.json', [Buffer.from('{}')], { fresh: true });
    await store.publish([content, meta]);
    assert.deepEqual(issued.map((i) => i.kind).sort(), ['dir', 'dir', 'dir', 'dir', 'file', 'file']);
    // Every fsync was issued before the first (held 50 ms) finished: one round, not files then directories.
    const spread = Math.max(...issued.map((i) => i.at)) - Math.min(...issued.map((i) => i.at));
    assert.ok(spread < 40, `fsyncs issued over ${spread.toFixed(1)} ms`);
    assert.deepEqual(tempFiles(root), []);
    // The temp path (a key that is not fresh) keeps its two rounds: directories only after the files' fsyncs.
    issued.length = 0;
    const staged = await store.stage('artifacts/two/v1/f.txt', bytesOf('content'));
    await store.publish([staged]);
    const firstDir = Math.min(...issued.filter((i) => i.kind === 'dir').map((i) => i.at));
    assert.ok(firstDir - Math.min(...issued.map((i) => i.at)) >= 45, 'the directory round follows the file round');
  });

  it('kill -9 at every fsync: the keys hold the bytes written (or nothing), no temp files; a retry with the same bytes publishes, torn bytes are CONFLICT', async () => {
    const root = tempDir('alp-fs-crash-fresh');
    await runWorker(root, 'first', -1, 'fresh');
    const full = await runWorker(root, 'full', -1, 'fresh');
    assert.equal(full.killed, false);
    const contentBytes = Buffer.alloc(4096, 7);
    const metaBytes = Buffer.from('{"m":1}\n');
    for (let killAt = 0; killAt < full.fsyncs.length; killAt++) {
      const id = `k${killAt}`;
      assert.equal((await runWorker(root, id, killAt, 'fresh')).killed, true, `killed at fsync ${killAt}`);
      const store = await FsContentStore.open(root);
      // kill -9 keeps the page cache: the bytes written before the round are at the keys (a power loss
      // could leave them partial or absent — nothing names them, and a read checks them against their digest).
      for (const [key, bytes] of [
        [`artifacts/${id}/v1/f.txt`, contentBytes],
        [`artifacts/${id}/v1/metadata.json`, metaBytes],
      ] as const) {
        assert.deepEqual(await collect(await store.get(key, sha256(bytes))), bytes, `${key} after a kill at fsync ${killAt}`);
        await store.put(key, [bytes], { fresh: true });
      }
      assert.equal(await store.cleanupInterrupted(), 0, 'no temp files');
      assert.deepEqual(tempFiles(root), []);
    }
    // What a power loss during the round may leave: partial bytes at a fresh key. Reads refuse them by
    // their digest; writing that key again is CONFLICT — which is why only keys no retry ever writes
    // again (a new id, a reserved version number) are fresh.
    const store = await FsContentStore.open(root);
    const torn = path.join(root, 'artifacts', 'torn', 'v1', 'f.txt');
    fs.mkdirSync(path.dirname(torn), { recursive: true });
    fs.writeFileSync(torn, contentBytes.subarray(0, 1000));
    await assert.rejects(collect(await store.get('artifacts/torn/v1/f.txt', sha256(contentBytes))), IntegrityError);
    await assert.rejects(store.put('artifacts/torn/v1/f.txt', [contentBytes], { fresh: true }), Conflict);
  });
});
