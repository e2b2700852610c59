/**
 * Large objects go through the direct path (content/direct-read.ts: pooled slots, sha256 on the
 * hashing worker, chunks written straight to the socket or the output file). A good object arrives
 * exactly, whole or ranged; a corrupted one never yields a complete 200 over HTTP, nor an output file
 * from `alp artifact get` (nor its full bytes on stdout).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SLOT_BYTES } from '../../src/content/hash-pool.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { type Harness, startApi } from '../helpers/api-harness.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { tempDir } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';

const SIZE = 8 * SLOT_BYTES + 4321;

/** A GET with node:http that reports whether the response completed, and how many bytes came. */
function download(url: string, headers: Record<string, string>): Promise<{ status: number; body: Buffer; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', () => {});
      res.on('close', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), complete: res.complete }));
    });
    req.on('error', reject);
  });
}

function flipByte(file: string, at: number): void {
  const fd = fs.openSync(file, 'r+');
  const one = Buffer.alloc(1);
  fs.readSync(fd, one, 0, 1, at);
  one[0] = ((one[0] as number) + 1) % 256;
  fs.writeSync(fd, one, 0, 1, at);
  fs.closeSync(fd);
}

describe('large downloads over HTTP (direct path)', () => {
  let h: Harness;
  let url: string;
  let file: string;
  let auth: Record<string, string>;
  const bytes = randomBytes(SIZE);

  before(async () => {
    h = await startApi();
    const { version } = await createArtifact(h.ctx, agent, { name: 'large', filename: 'large.bin', body: [bytes] });
    url = `${h.url}/v1/artifacts/${version.artifact_id}/versions/1/content`;
    file = path.join(h.ctx.contentRoot, version.content_key);
    auth = { authorization: `Bearer ${h.tokens.service}` };
  });
  after(async () => {
    await h.close();
  });

  it('a good object arrives exactly, whole, ranged and from several clients at once', async () => {
    const whole = await Promise.all(Array.from({ length: 4 }, () => download(url, auth)));
    for (const r of whole) {
      assert.equal(r.status, 200);
      assert.ok(r.complete);
      assert.ok(r.body.equals(bytes));
    }
    const [start, end] = [SLOT_BYTES - 7, 5 * SLOT_BYTES + 9];
    const ranged = await download(url, { ...auth, range: `bytes=${start}-${end}` });
    assert.equal(ranged.status, 206);
    assert.ok(ranged.body.equals(bytes.subarray(start, end + 1)));
  });

  it('a byte flipped on disk (first, middle, last) never yields a complete 200, whole or ranged', async () => {
    for (const at of [0, Math.floor(SIZE / 2), SIZE - 1]) {
      flipByte(file, at);
      for (const headers of [auth, { ...auth, range: `bytes=${SLOT_BYTES}-` }]) {
        const r = await download(url, headers);
        if (r.status === 200 || r.status === 206) {
          assert.equal(r.complete, false, `flipped at ${at}: the response must be aborted`);
          assert.ok(r.body.length < SIZE, `flipped at ${at}: received ${r.body.length} bytes`);
        } else assert.equal(r.status, 502);
      }
      const res = await fetch(url, { headers: auth });
      if (res.status === 200) await assert.rejects(res.arrayBuffer());
      else assert.equal(res.status, 502);
      fs.writeFileSync(file, bytes);
    }
    const good = await download(url, auth);
    assert.ok(good.complete && good.body.equals(bytes), 'the server still serves the repaired object');
  });
});

describe('alp artifact get of a large object (direct path)', () => {
  it('writes the exact bytes to a file; a flipped byte exits 5 with no output file and short stdout', async () => {
    const dir = tempDir('alp-large-cli');
    const data = path.join(dir, 'd');
    // ASCII, so the length of stdout as text is its length in bytes.
    const bytes = Buffer.from(Array.from(randomBytes(SIZE), (b) => 97 + (b % 26)));
    fs.writeFileSync(path.join(dir, 'in.bin'), bytes);
    await alpJson(['init', '--data', data]);
    const v = await alpJson(['artifact', 'create', '--data', data, '--name', 'large', '--file', path.join(dir, 'in.bin')]);
    const id = v.artifact_id as string;
    const out = path.join(dir, 'out.bin');
    const ok = await runAlp(['artifact', 'get', id, '--data', data, '--out', out]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.ok(fs.readFileSync(out).equals(bytes));

    flipByte(path.join(data, 'content', v.content_key as string), SIZE - 10);
    fs.rmSync(out);
    const bad = await runAlp(['artifact', 'get', id, '--data', data, '--out', out]);
    assert.equal(bad.code, 5);
    assert.match(bad.stderr, /^alp: INTEGRITY: /);
    assert.equal(fs.existsSync(out), false);
    assert.deepEqual(
      fs.readdirSync(dir).filter((f) => f.includes('out')),
      [],
      'no partial file either',
    );
    const piped = await runAlp(['artifact', 'get', id, '--data', data, '--out', '-']);
    assert.equal(piped.code, 5);
    assert.ok(piped.stdout.length < SIZE, `stdout got ${piped.stdout.length} of ${SIZE} bytes`);
  });
});
