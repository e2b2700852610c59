import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { ContentStore } from '../../src/content/content-store.ts';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { HAND_OVER_AT, workerWalks } from '../../src/content/fs/fs-walk.ts';
import { compareUtf8 } from '../../src/core/object-keys.ts';

function busyFor(ms: number): void {
  for (const end = performance.now() + ms; performance.now() < end; );
}

import { sha256 } from '../../src/core/digest.ts';
import { InvalidInput, NotFound } from '../../src/core/errors.ts';
import { bytesOf, collect, tempDir } from '../helpers/tmp.ts';
import { contentStoreConformance, immutableKeyConformance } from './conformance.ts';

const roots = new WeakMap<ContentStore, string>();

contentStoreConformance({
  name: 'fs',
  runs: 40,
  open: async () => {
    const root = tempDir('alp-fs');
    const store = await FsContentStore.open(root);
    roots.set(store, root);
    return store;
  },
  corrupt: async (store, key, bytes) => {
    fs.writeFileSync(path.join(roots.get(store) as string, key), bytes);
  },
  failingDisk: () =>
    FsContentStore.open(tempDir('alp-fs'), {
      fsyncHook: () => {
        throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO', errno: -5, syscall: 'fsync' });
      },
    }),
});

immutableKeyConformance({
  name: 'fs',
  open: async () => {
    const root = tempDir('alp-fs');
    const store = await FsContentStore.open(root);
    roots.set(store, root);
    return store;
  },
  corrupt: async (store, key, bytes) => {
    fs.writeFileSync(path.join(roots.get(store) as string, key), bytes);
  },
});

describe('fs engine specifics', () => {
  it('refuses symlinks planted inside the root, for directories and files', async () => {
    const root = tempDir('alp-fs');
    const outside = tempDir('alp-outside');
    fs.writeFileSync(path.join(outside, 'secret'), 'secret');
    const store = await FsContentStore.open(root);
    fs.symlinkSync(outside, path.join(root, 'linkdir'));
    await assert.rejects(store.get('linkdir/secret', sha256('secret')), InvalidInput);
    await assert.rejects(store.put('linkdir/new', bytesOf('x')), InvalidInput);
    assert.equal(fs.existsSync(path.join(outside, 'new')), false);
    fs.mkdirSync(path.join(root, 'd'));
    fs.symlinkSync(path.join(outside, 'secret'), path.join(root, 'd', 'file'));
    await assert.rejects(store.get('d/file', sha256('secret')), InvalidInput);
    await assert.rejects(store.head('d/file'), InvalidInput);
    const listed: string[] = [];
    for await (const o of store.list('')) listed.push(o.key);
    assert.deepEqual(listed, [], 'symlinks are never listed');
  });

  it('leaves no temp file after success or failure, and cleans up those of dead writers', async () => {
    const root = tempDir('alp-fs');
    const store = await FsContentStore.open(root);
    await store.put('a/b/ok', bytesOf('fine'));
    await store.put('a/b/bad', bytesOf('x'), { expectedDigest: sha256('y') }).catch(() => {});
    assert.deepEqual(fs.readdirSync(path.join(root, 'a', 'b')), ['ok']);
    fs.writeFileSync(path.join(root, 'a', 'b', '.alp-tmp-999999999-abc'), 'left by a crash');
    fs.writeFileSync(path.join(root, 'a', 'b', `.alp-tmp-${process.pid}-def`), 'in flight here');
    assert.equal(await store.cleanupInterrupted(), 1);
    assert.deepEqual(fs.readdirSync(path.join(root, 'a', 'b')).sort(), [`.alp-tmp-${process.pid}-def`, 'ok']);
  });

  it('a staged object is invisible until published', async () => {
    const root = tempDir('alp-fs');
    const store = await FsContentStore.open(root);
    const staged = await store.stage('a/b/c', bytesOf('later'));
    assert.equal(await store.head('a/b/c'), undefined);
    assert.deepEqual((await store.listPage('')).objects, []);
    await store.publish([staged]);
    assert.equal((await store.head('a/b/c'))?.size, 5);
    await assert.rejects(store.publish([staged]), InvalidInput, 'published once');
  });

  it('maps keys below the root only', async () => {
    const root = tempDir('alp-fs');
    const store = await FsContentStore.open(root);
    await store.put('artifacts/x/v1/f.txt', bytesOf('hi'));
    assert.equal(fs.readFileSync(path.join(root, 'artifacts/x/v1/f.txt'), 'utf8'), 'hi');
    await assert.rejects(store.get('artifacts/x/v1/f.txt/more', sha256('')), NotFound);
    assert.equal((await collect(await store.get('artifacts/x/v1/f.txt', sha256('hi')))).toString(), 'hi');
  });

  it('list() skips temp files and symlinks like a page does, and an early stop ends its worker', async () => {
    const root = tempDir('alp-fs');
    const store = await FsContentStore.open(root);
    for (let i = 0; i < 1200; i++) await store.put(`artifacts/many/v1/f${String(i).padStart(4, '0')}`, bytesOf('x'));
    fs.writeFileSync(path.join(root, 'artifacts/many/v1/.alp-tmp-1-x'), 'partial');
    fs.symlinkSync(path.join(root, 'artifacts/many/v1/f0000'), path.join(root, 'artifacts/many/v1/link'));
    const listed: string[] = [];
    for await (const o of store.list('artifacts/')) listed.push(o.key);
    assert.equal(listed.length, 1200);
    assert.deepEqual(listed.slice(0, 2), ['artifacts/many/v1/f0000', 'artifacts/many/v1/f0001']);
    const paged = [
      ...(await store.listPage('artifacts/')).objects,
      ...(await store.listPage('artifacts/', { cursor: (await store.listPage('artifacts/')).cursor as string })).objects,
    ];
    assert.deepEqual(
      paged.map((o) => o.key),
      listed,
    );
    let taken = 0;
    for await (const _ of store.list('artifacts/')) if (++taken === 3) break;
    assert.equal(taken, 3);
  });
  it('list() of a large tree for a busy caller hands over to a worker thread after HAND_OVER_AT (10,000) keys without losing or repeating one', async () => {
    const root = tempDir('alp-fs');
    const store = await FsContentStore.open(root);
    const expected: string[] = [];
    for (let d = 0; d < 101; d++) {
      const dir = path.join(root, 'artifacts', `d${d}`, 'v1');
      fs.mkdirSync(dir, { recursive: true });
      for (let f = 0; f < 100; f++) {
        fs.writeFileSync(path.join(dir, `f${f}`), `${d}/${f}`);
        expected.push(`artifacts/d${d}/v1/f${f}`);
      }
    }
    expected.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    const listed: string[] = [];
    let bytes = 0;
    const workers = workerWalks.count;
    for await (const o of store.list('artifacts/')) {
      listed.push(o.key);
      bytes += o.size;
      // A caller with work of its own (as the retention scan's item pass): the walk moves to a worker.
      if (listed.length <= HAND_OVER_AT) busyFor(0.05);
    }
    assert.equal(workerWalks.count, workers + 1, 'the walk went on in a worker');
    assert.equal(listed.length, 10_100);
    assert.deepEqual(listed, expected);
    assert.equal(
      bytes,
      expected.reduce((n, k) => n + Buffer.byteLength(k.split('/')[1]?.slice(1) + '/' + k.split('/')[3]?.slice(1)), 0),
    );
  });
});

describe('fs listing order', () => {
  it('pages and list() order astral keys by their UTF-8 bytes (above U+FF5E, unlike UTF-16 code units)', async () => {
    const store = await FsContentStore.open(tempDir('alp-fs'));
    const keys = ['artifacts/o/\u{1f600}', 'artifacts/o/\uff5e', 'artifacts/o/z', 'artifacts/o/\u00e9'];
    for (const k of keys) await store.put(k, bytesOf(k));
    const expected = [...keys].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    assert.equal(expected.at(-1), 'artifacts/o/\u{1f600}');
    const paged: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await store.listPage('artifacts/', cursor ? { cursor, limit: 1 } : { limit: 1 });
      paged.push(...page.objects.map((o) => o.key));
      cursor = page.cursor;
    } while (cursor);
    assert.deepEqual(paged, expected);
    const listed: string[] = [];
    for await (const o of store.list('artifacts/')) listed.push(o.key);
    assert.deepEqual(listed, expected);
  });

  it('compareUtf8 orders strings as their UTF-8 bytes do', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (a, b) => {
        const bytes = Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b)));
        assert.equal(Math.sign(compareUtf8(a, b)), bytes);
      }),
      { numRuns: 2000 },
    );
  });
});
