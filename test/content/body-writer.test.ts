/**
 * Uploads into the fs engine (content/fs/body-writer.ts) on both paths — hashed on the calling
 * thread (declared small) and gathered into pooled slots hashed on the worker — for any chunking of
 * the body: the file holds exactly the bytes, the digest is theirs, and the limit and a client digest
 * still refuse a body and leave nothing.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { SLOT_BYTES } from '../../src/content/hash-pool.ts';
import { sha256 } from '../../src/core/digest.ts';
import { IntegrityError, TooLarge } from '../../src/core/errors.ts';
import { tempDir } from '../helpers/tmp.ts';

/** Splits bytes at the given fractions (sorted, deduplicated). */
function chunked(bytes: Buffer, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => Math.floor(c * bytes.length)))].sort((a, b) => a - b);
  const parts: Buffer[] = [];
  let from = 0;
  for (const to of [...at, bytes.length]) {
    if (to > from) parts.push(bytes.subarray(from, to));
    from = Math.max(from, to);
  }
  return parts;
}

describe('fs uploads: thread and worker paths', async () => {
  const root = tempDir('alp-upload');
  const store = await FsContentStore.open(root);
  const pool = randomBytes(4 * SLOT_BYTES + 999);
  let n = 0;

  it('any body in any chunking is stored exactly, with its digest', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(0, 1, 4096, SLOT_BYTES - 1, SLOT_BYTES, SLOT_BYTES + 1, 2 * SLOT_BYTES + 3, 4 * SLOT_BYTES + 999),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 12 }),
        fc.boolean(),
        async (size, cuts, hinted) => {
          const bytes = pool.subarray(0, size);
          const key = `artifacts/u/${n++}`;
          const result = await store.put(key, chunked(bytes, cuts), hinted ? { sizeHint: size } : {});
          assert.equal(result.digest, sha256(bytes));
          assert.equal(result.size, size);
          assert.ok(fs.readFileSync(path.join(root, key)).equals(bytes), `size ${size}, ${cuts.length} cuts, hinted ${hinted}`);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('a body over the limit or not matching its digest leaves nothing, on the worker path', async () => {
    const bytes = pool.subarray(0, 3 * SLOT_BYTES);
    await assert.rejects(store.put('artifacts/u/limit', chunked(bytes, [0.1, 0.5]), { maxBytes: 2 * SLOT_BYTES }), TooLarge);
    await assert.rejects(store.put('artifacts/u/digest', chunked(bytes, [0.3]), { expectedDigest: sha256('other') }), IntegrityError);
    assert.deepEqual(
      fs.readdirSync(path.join(root, 'artifacts/u')).filter((f) => f === 'limit' || f === 'digest' || f.startsWith('.alp-tmp-')),
      [],
    );
  });
});
