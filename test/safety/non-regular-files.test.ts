/**
 * Issue 14 item 13: a FIFO (or any non-regular file) at an object's path is refused at once as
 * INTEGRITY, never blocking Node's I/O pool: other reads go on, and `alp verify --all` exits 5 naming it.
 * Filesystem engine only: S3 has no special files.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { FsContentStore } from '../../src/content/fs/fs-content-store.ts';
import { IntegrityError } from '../../src/core/errors.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { bytesOf, collect, tempDir } from '../helpers/tmp.ts';

function plantFifo(file: string): void {
  fs.unlinkSync(file);
  execFileSync('mkfifo', ['-m', '0640', file]);
}

/** Rejects when `p` takes longer than `ms` (a regression fails instead of hanging the suite). */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

describe('non-regular files at object paths (fs engine)', () => {
  it('issue 14 item 13: a FIFO at an object path is INTEGRITY at once and does not block other reads', async () => {
    const root = tempDir('alp-fifo');
    const store = await FsContentStore.open(root);
    const fifo = await store.put('artifacts/F/v1/fifo.bin', bytesOf('was a file'));
    const other = await store.put('artifacts/O/v1/other.bin', bytesOf('still readable'));
    plantFifo(path.join(root, 'artifacts/F/v1/fifo.bin'));
    // More blocked opens than Node's I/O pool has threads (4) would stall every other read.
    const attempts = Array.from({ length: 8 }, () => store.get('artifacts/F/v1/fifo.bin', fifo.digest));
    const results = await within(Promise.allSettled(attempts), 5000, 'gets of a FIFO');
    for (const r of results) {
      assert.equal(r.status, 'rejected');
      assert.ok(r.reason instanceof IntegrityError, String(r.reason));
      assert.match(r.reason.message, /artifacts\/F\/v1\/fifo\.bin is not a regular file \(a FIFO\)/);
    }
    await assert.rejects(within(store.readRaw('artifacts/F/v1/fifo.bin'), 5000, 'readRaw'), IntegrityError);
    await assert.rejects(
      within(store.copy('artifacts/F/v1/fifo.bin', 'archive/2026/03/F/v1/fifo.bin', { expectedDigest: fifo.digest }), 5000, 'copy'),
      IntegrityError,
    );
    assert.equal((await within(store.head('artifacts/F/v1/fifo.bin'), 5000, 'head')) === undefined, true);
    const bytes = await within(collect(await store.get('artifacts/O/v1/other.bin', other.digest)), 5000, 'the other get');
    assert.equal(bytes.toString(), 'still readable');
  });

  it('issue 14 item 13: alp verify --all exits 5 naming a FIFO planted at a content path instead of hanging', async () => {
    const dir = tempDir('alp-fifo-cli');
    const data = path.join(dir, 'd');
    fs.writeFileSync(path.join(dir, 'run.sh'), 'echo fifo\n');
    await alpJson(['init', '--data', data]);
    const v = await alpJson(['artifact', 'create', '--data', data, '--name', 'fifo', '--file', path.join(dir, 'run.sh')]);
    const file = (fs.readdirSync(data, { recursive: true }) as string[]).find((p) => p.endsWith(v.content_key as string));
    assert.ok(file, 'the content file');
    plantFifo(path.join(data, file));
    const verify = await within(runAlp(['verify', '--all', '--data', data, '--json']), 60_000, 'alp verify --all');
    assert.equal(verify.code, 5, verify.stderr);
    const report = JSON.parse(verify.stdout) as { findings: Array<{ key: string; problem: string }> };
    assert.deepEqual(
      report.findings.map((f) => f.key),
      [v.content_key],
    );
    assert.match(verify.stderr, /alp: INTEGRITY: /);
  });
});
