/**
 * The fs engine's verified read (content/fs/verified-file.ts) on both of its paths — hashed on the
 * calling thread (small objects) and on the hashing worker with pooled slots (large ones) — read as a
 * stream and through sendTo: every range of a good object arrives exactly; a corrupted, truncated or
 * grown object never releases its last chunk, so no consumer ever holds all of its bytes.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { directReadOf } from '../../src/content/direct-read.ts';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { SLOT_BYTES } from '../../src/content/hash-pool.ts';
import { sha256 } from '../../src/core/digest.ts';
import { IntegrityError } from '../../src/core/errors.ts';
import { collect, tempDir } from '../helpers/tmp.ts';

const SIZES = [0, 1, 4096, SLOT_BYTES - 1, SLOT_BYTES, SLOT_BYTES + 1, 3 * SLOT_BYTES + 17, 6 * SLOT_BYTES];

/** Reads through sendTo, copying each chunk before its memory is handed back. */
async function viaSendTo(stream: import('node:stream').Readable): Promise<Buffer> {
  const direct = directReadOf(stream);
  assert.ok(direct, 'the fs engine reads directly');
  const parts: Buffer[] = [];
  await direct.sendTo(async (chunk) => {
    parts.push(Buffer.from(chunk));
    // A slow consumer: the pump must not reuse the slot before this settles.
    await new Promise((r) => setImmediate(r));
  });
  return Buffer.concat(parts);
}

describe('fs verified read: thread and worker paths', async () => {
  const store = await FsContentStore.open(tempDir('alp-vread'));
  const objects = new Map<number, Buffer>();
  for (const size of SIZES) {
    const bytes = randomBytes(size);
    objects.set(size, bytes);
    await store.put(`artifacts/v/${size}`, [bytes]);
  }

  it('every range of every size arrives exactly, as a stream and through sendTo', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...SIZES),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.boolean(),
        fc.boolean(),
        async (size, a, b, ranged, direct) => {
          const bytes = objects.get(size) as Buffer;
          const key = `artifacts/v/${size}`;
          let range: { start: number; end: number } | undefined;
          if (ranged && size > 0) {
            const [lo, hi] = [Math.floor(a * size), Math.floor(b * size)].sort((x, y) => x - y) as [number, number];
            range = { start: lo, end: Math.min(hi, size - 1) };
          }
          const stream = await store.get(key, sha256(bytes), { expectedSize: size, ...range });
          const got = direct ? await viaSendTo(stream) : await collect(stream);
          const want = range ? bytes.subarray(range.start, range.end + 1) : bytes;
          assert.equal(got.length, want.length);
          assert.ok(got.equals(want), `size ${size} range ${JSON.stringify(range)} direct ${direct}`);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('a flipped byte anywhere, a truncated or a grown file never releases the last chunk', async () => {
    const size = 5 * SLOT_BYTES + 123;
    const good = randomBytes(size);
    const key = 'artifacts/v/damaged';
    await store.put(key, [good]);
    const file = path.join(store.location.slice('file:'.length), key);
    const damages: Array<[string, Buffer]> = [
      ['first byte', flip(good, 0)],
      ['middle', flip(good, Math.floor(size / 2))],
      ['last byte', flip(good, size - 1)],
      ['truncated', good.subarray(0, size - 1)],
      ['grown', Buffer.concat([good, Buffer.from('x')])],
    ];
    for (const [what, bytes] of damages) {
      fs.writeFileSync(file, bytes);
      for (const direct of [true, false]) {
        const received: Buffer[] = [];
        const stream = await store.get(key, sha256(good), { expectedSize: size });
        const reading = direct
          ? (directReadOf(stream) as NonNullable<ReturnType<typeof directReadOf>>).sendTo(async (c) => {
              received.push(Buffer.from(c));
            })
          : (async () => {
              for await (const c of stream) received.push(Buffer.from(c as Buffer));
            })();
        await assert.rejects(reading, IntegrityError, `${what} (direct ${direct})`);
        const total = received.reduce((n, c) => n + c.length, 0);
        assert.ok(total < size, `${what} (direct ${direct}): ${total} of ${size} bytes released`);
      }
    }
  });

  it('many concurrent large reads share the worker and every one verifies', async () => {
    const size = 3 * SLOT_BYTES + 5;
    const bytes = objects.get(3 * SLOT_BYTES + 17) as Buffer;
    assert.ok(bytes.length > size);
    const reads = Array.from({ length: 40 }, async (_, i) => {
      const stream = await store.get(`artifacts/v/${3 * SLOT_BYTES + 17}`, sha256(bytes));
      const got = i % 2 ? await viaSendTo(stream) : await collect(stream);
      assert.ok(got.equals(bytes));
    });
    await Promise.all(reads);
  });

  it('a stream destroyed before or during its read closes its file and leaves nothing pending', async () => {
    const bytes = objects.get(6 * SLOT_BYTES) as Buffer;
    const unread = await store.get(`artifacts/v/${6 * SLOT_BYTES}`, sha256(bytes));
    unread.destroy();
    const partly = await store.get(`artifacts/v/${6 * SLOT_BYTES}`, sha256(bytes));
    for await (const _ of partly) break;
    assert.ok(partly.destroyed);
    // The slots went back: a full read afterwards is exact.
    const again = await store.get(`artifacts/v/${6 * SLOT_BYTES}`, sha256(bytes));
    assert.ok((await viaSendTo(again)).equals(bytes));
  });
});

function flip(bytes: Buffer, at: number): Buffer {
  const copy = Buffer.from(bytes);
  copy[at] = ((copy[at] as number) + 1) % 256;
  return copy;
}
