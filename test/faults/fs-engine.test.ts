/**
 * Disk faults inside the fs engine, through its test-only seam (FsContentStoreOptions.fsyncHook):
 * a failed fsync of a staged file, a failed directory fsync after the rename, and a torn write (the
 * temp file on disk shorter than the bytes that were hashed). Each time the put fails with a clear
 * error, nothing partial is left at the key or in temp files, and a service writing through the store
 * commits nothing that references bytes that are not whole.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { FsContentStore, type FsContentStoreOptions } from '../../src/content/fs/fs-content-store.ts';
import { ManualClock } from '../../src/core/clock.ts';
import { sha256 } from '../../src/core/digest.ts';
import { IntegrityError, StorageFailure, toAlpError } from '../../src/core/errors.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { reconcile } from '../../src/recovery/reconcile.ts';
import { createContext } from '../../src/runtime/context.ts';
import { SqliteItemStore } from '../../src/store/sqlite/sqlite-item-store.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { collect, tempDir } from '../helpers/tmp.ts';
import { tempFiles } from '../torture/checks.ts';
import { errnoError } from './faulty-stores.ts';

type Hook = NonNullable<FsContentStoreOptions['fsyncHook']>;
const body = Buffer.alloc(300 * 1024, 7);
async function* chunks() {
  for (let off = 0; off < body.length; off += 64 * 1024) yield body.subarray(off, off + 64 * 1024);
}

async function store(hook: Hook) {
  const root = tempDir('alp-fs-fault');
  return { root, store: await FsContentStore.open(root, { fsyncHook: hook }) };
}

function filesUnder(root: string): string[] {
  return (fs.readdirSync(root, { recursive: true }) as string[]).filter((f) => fs.statSync(path.join(root, f)).isFile());
}

describe('fs engine: fsync failures and torn writes', () => {
  it('a failed fsync of the staged file: the put fails with EIO, nothing at the key, no temp file', async () => {
    const { root, store: s } = await store(({ kind }) => {
      if (kind === 'file') throw errnoError('EIO', 'fsync');
    });
    await assert.rejects(s.put('artifacts/a/v1/f', chunks()), (e: unknown) => e instanceof StorageFailure && /\bEIO\b/.test(e.message));
    assert.equal(await s.head('artifacts/a/v1/f'), undefined);
    assert.deepEqual(filesUnder(root), []);
  });

  it('a failed directory fsync after the rename: the put fails, and what is at the key is whole', async () => {
    // The target directory is fsynced only after the rename (new directories are made durable through their parents).
    const { root, store: s } = await store(({ kind, path: p }) => {
      if (kind === 'dir' && p.endsWith(path.join('a', 'v1'))) throw errnoError('EIO', 'fsync');
    });
    await assert.rejects(s.put('artifacts/a/v1/f', chunks()), (e: unknown) => e instanceof StorageFailure && /\bEIO\b/.test(e.message));
    // The contract: each object is whole at its key or absent — never partial.
    assert.equal((await s.head('artifacts/a/v1/f'))?.size, body.length);
    assert.deepEqual(await collect(await s.get('artifacts/a/v1/f', sha256(body))), body);
    assert.deepEqual(tempFiles(root), []);
  });

  it('a torn write (the temp file shorter than what was hashed) is never published', async () => {
    // Regression: publish trusted the bytes on disk to be the bytes hashed, and published a truncated file.
    const { root, store: s } = await store(({ kind, path: p }) => {
      if (kind === 'file') fs.truncateSync(p, 1000);
    });
    await assert.rejects(s.put('artifacts/a/v1/f', chunks()), (e: unknown) => e instanceof IntegrityError && /torn write/.test(e.message));
    assert.equal(await s.head('artifacts/a/v1/f'), undefined);
    assert.deepEqual(filesUnder(root), []);
  });

  for (const [name, hook] of [
    [
      'failed file fsync',
      (({ kind }) => {
        if (kind === 'file') throw errnoError('EIO', 'fsync');
      }) as Hook,
    ],
    [
      'torn write',
      (({ kind, path: p }) => {
        if (kind === 'file' && fs.statSync(p).size > 2000) fs.truncateSync(p, 2000);
      }) as Hook,
    ],
  ] as const) {
    it(`createArtifact over a ${name}: a clear error, no version, reconcile VERIFIED`, async () => {
      const dir = tempDir('alp-fs-fault');
      const items = new SqliteItemStore(path.join(dir, 'alp.db'));
      const content = await FsContentStore.open(path.join(dir, 'content'), { fsyncHook: hook });
      const ctx = createContext({ items, content, clock: new ManualClock() });
      await initInstallation(ctx);
      const err = await createArtifact(ctx, { id: 'a', kind: 'agent' }, { name: 'x', filename: 'f.bin', body: chunks() }).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err, 'the create failed');
      const shown = toAlpError(err);
      assert.match(`${shown.code}: ${shown.message}`, /^(STORAGE: storage failure: EIO \(input\/output error\)|INTEGRITY: torn write)/);
      const heads = (await items.scan()).items.filter((i) => i.type === 'head');
      assert.deepEqual(heads, [], 'nothing was committed');
      assert.equal((await reconcile(ctx, { actor: 't' })).status, 'VERIFIED');
      assert.deepEqual(tempFiles(path.join(dir, 'content')), []);
      await items.close();
    });
  }
});
