/**
 * Issue 14 item 16, through the CLI in child processes: `alp retention run --restore` accepts what
 * `alp restore --data DIR` created — the directory, its alp.db, a sqlite: URL — and refuses anything
 * else with a coded error naming the path (never a raw SQLite message). (dynamodb:// restore URLs are
 * covered on the distributed profile by test/retention/retention-distributed.test.ts.)
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { cliErrorText } from '../helpers/cli.ts';
import { cliRetention } from '../helpers/retention-harness.ts';

describe('alp retention run --restore (issue 14 item 16)', () => {
  it('issue 14 item 16: --restore takes the data directory `alp restore --data DIR` created (and its db path and sqlite: URL); anything else is a coded error naming the path', async () => {
    const cli = await cliRetention('alp-restore-ref', 'artifacts/orphan/v1/f');
    const { dir, restored } = cli;
    // The approval is a review (issue 17 B6): every run names the digest of the plan it was shown.
    const retention = async (restore: string, days: number) => cli.run(days, { restore, digest: (await cli.plan(days)).plan_digest });
    const first = await retention(restored, 0);
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(JSON.parse(first.stdout).observed, ['artifacts/orphan/v1/f']);

    // After the grace period the approval's restore proof is actually read: the directory is accepted.
    const byDir = await retention(restored, 8);
    assert.equal(byDir.code, 0, byDir.stderr);
    const done = JSON.parse(byDir.stdout);
    assert.equal(done.status, 'DONE', done.reason);
    assert.deepEqual(done.quarantined, ['artifacts/orphan/v1/f']);
    for (const ref of [path.join(restored, 'alp.db'), `sqlite:${path.join(restored, 'alp.db')}`]) {
      const r = await retention(ref, 9);
      assert.equal(r.code, 0, `${ref}: ${r.stderr}`);
      assert.notEqual(JSON.parse(r.stdout).status, 'REFUSED', `${ref}: ${r.stdout}`);
    }

    const notADb = path.join(dir, 'b1', 'manifest.json');
    const fifo = path.join(dir, 'fifo');
    const bogus: Array<[string, RegExp, number]> = [
      [path.join(dir, 'nope'), /^alp: NOT_FOUND: no restore at .*nope/m, 3],
      [path.join(dir, 'b1'), /^alp: NOT_FOUND: the restore .*b1 is a directory but not an installation's data directory/m, 3],
      [notADb, /^alp: INVALID: the restore .*manifest\.json is not a SQLite database/m, 2],
      ['sqlite:', /^alp: USAGE: sqlite: URL needs a file path/m, 2],
    ];
    try {
      (await import('node:child_process')).execFileSync('mkfifo', [fifo]);
      bogus.push([fifo, /^alp: INVALID: the restore .*fifo is not a regular file/m, 2]);
    } catch {
      // no mkfifo here: the other cases still stand
    }
    for (const [ref, message, code] of bogus) {
      const r = await retention(ref, 9);
      assert.equal(r.code, code, `${ref}: ${r.stderr}`);
      assert.match(cliErrorText(r.stderr), message, ref);
      assert.doesNotMatch(r.stderr, /disk I\/O|SQLITE_|INTERNAL/, ref);
    }
  });
});
