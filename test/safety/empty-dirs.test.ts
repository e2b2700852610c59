/**
 * Issue 14 item 15: refused uploads leave no empty directories. Filesystem profile only: S3 has no
 * directories (a refused S3 put leaves nothing at all, which the content conformance suite checks).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { sha256 } from '../../src/core/digest.ts';
import { IntegrityError, TooLarge } from '../../src/core/errors.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { embeddedContext } from '../helpers/context.ts';
import { bytesOf, collect, tempDir } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

const entries = (dir: string) => (fs.existsSync(dir) ? (fs.readdirSync(dir, { recursive: true }) as string[]).sort() : []);

describe('empty directories of refused uploads (fs engine)', () => {
  it('issue 14 item 15: digest-refused, too large and aborted creations leave no artifacts/{id}/ directory behind', async () => {
    const ctx = await embeddedContext();
    const artifacts = path.join(ctx.contentRoot, 'artifacts');
    await assert.rejects(
      createArtifact(ctx, agent, { name: 'refused', filename: 'f', body: bytesOf('these bytes'), expectedDigest: sha256('others') }),
      IntegrityError,
    );
    await assert.rejects(
      createArtifact(ctx, agent, { name: 'big', filename: 'f', body: bytesOf(Buffer.alloc(100)), maxBytes: 10 }),
      TooLarge,
    );
    async function* aborted() {
      yield Buffer.from('half of it');
      throw new Error('client went away');
    }
    await assert.rejects(createArtifact(ctx, agent, { name: 'aborted', filename: 'f', body: aborted() }), /client went away/);
    assert.deepEqual(entries(artifacts), [], 'nothing below artifacts/');
    const ok = await createArtifact(ctx, agent, { name: 'fine', filename: 'f', body: bytesOf('kept') });
    assert.deepEqual(entries(artifacts), [
      ok.version.artifact_id,
      `${ok.version.artifact_id}/v1`,
      `${ok.version.artifact_id}/v1/f`,
      `${ok.version.artifact_id}/v1/metadata.json`,
    ]);
    ctx.items.close();
  });

  it('issue 14 item 15: cleanupInterrupted removes empty directories of dead writers; concurrent writers into one directory never fail', async () => {
    const root = tempDir('alp-dirs');
    const store = await FsContentStore.open(root);
    fs.mkdirSync(path.join(root, 'artifacts/DEAD/v1'), { recursive: true });
    fs.mkdirSync(path.join(root, 'executions/RUN'), { recursive: true });
    fs.writeFileSync(path.join(root, 'executions/RUN/.alp-tmp-999999999-x'), 'a dead writer');
    fs.mkdirSync(path.join(root, 'provenance'), { recursive: true });
    await store.put('artifacts/LIVE/v1/f', bytesOf('kept'));
    assert.equal(await store.cleanupInterrupted(), 1);
    assert.deepEqual(entries(path.join(root, 'artifacts')), ['LIVE', 'LIVE/v1', 'LIVE/v1/f']);
    assert.deepEqual(entries(path.join(root, 'executions')), []);
    assert.ok(fs.existsSync(path.join(root, 'artifacts')) && fs.existsSync(path.join(root, 'provenance')), 'top-level directories stay');

    // Refused writes remove their fresh directory while others write into it, and a cleanup runs too.
    const work = Array.from({ length: 60 }, (_, i) =>
      i % 2 === 0
        ? store.put(`artifacts/SHARED${i % 3}/v1/ok-${i}`, bytesOf(`ok ${i}`))
        : store.put(`artifacts/SHARED${i % 3}/v1/bad-${i}`, bytesOf('x'), { expectedDigest: sha256('y') }).then(
            () => assert.fail('must be refused'),
            (e: unknown) => assert.ok(e instanceof IntegrityError),
          ),
    );
    const [results] = await Promise.all([Promise.allSettled(work), store.cleanupInterrupted()]);
    assert.deepEqual(
      results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason)),
      [],
    );
    for (let i = 0; i < 60; i += 2) {
      assert.equal((await collect(await store.get(`artifacts/SHARED${i % 3}/v1/ok-${i}`, sha256(`ok ${i}`)))).toString(), `ok ${i}`);
    }
  });
});
