/**
 * WritebackAhead (core/fsync.ts): background data syncs while a large file is written, so the final
 * fsync does not flush the whole file after the transfer — one at a time, and a failed one is never
 * lost (the file is not durable then).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { WritebackAhead } from '../../src/core/fsync.ts';
import { tempDir } from '../helpers/tmp.ts';

describe('WritebackAhead', () => {
  it('starts a sync after every `every` bytes, never two at once, and settles after the last', async () => {
    let started = 0;
    let running = 0;
    let most = 0;
    const release: Array<() => void> = [];
    const w = new WritebackAhead(async () => {
      started++;
      running++;
      most = Math.max(most, running);
      await new Promise<void>((r) => release.push(r));
      running--;
    }, 100);
    w.wrote(60);
    assert.equal(started, 0, 'below the threshold');
    w.wrote(60);
    assert.equal(started, 1);
    w.wrote(500);
    assert.equal(started, 1, 'one in flight: no second sync');
    release.shift()?.();
    await new Promise((r) => setImmediate(r));
    w.wrote(100);
    assert.equal(started, 2, 'the next one after the first finished');
    const settled = w.settle();
    release.shift()?.();
    await settled;
    assert.equal(most, 1);
  });

  it('a failed background sync is reported by settle, even after later ones succeed', async () => {
    let calls = 0;
    const w = new WritebackAhead(async () => {
      if (calls++ === 0) throw new Error('EIO');
    }, 1);
    w.wrote(1);
    await new Promise((r) => setImmediate(r));
    w.wrote(1);
    await assert.rejects(w.settle(), /EIO/);
  });

  it('on a real file: the bytes written are the bytes read back after the final fsync', async () => {
    const file = path.join(tempDir('alp-writeback'), 'f');
    const fh = await fs.open(file, 'w');
    const w = new WritebackAhead(() => fh.datasync(), 1 << 20);
    const chunk = Buffer.alloc(1 << 18, 3);
    for (let i = 0; i < 24; i++) {
      await fh.write(chunk, 0, chunk.length, i * chunk.length);
      w.wrote(chunk.length);
    }
    await w.settle();
    await fh.sync();
    await fh.close();
    const back = await fs.readFile(file);
    assert.equal(back.length, 24 * chunk.length);
    assert.ok(back.every((b) => b === 3));
  });
});
