import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { ContentStore } from '../../src/content/content-store.ts';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
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
});
