/**
 * Issue 14 item 10: the embedded installation (SQLite + fs, the only profile with local files) is
 * private whatever the umask: the data directory and content directories 0750, alp.db, -wal, -shm
 * and stored objects 0640. The CLI runs in child processes that inherit this process's umask 022; an
 * existing installation left open by a looser umask is tightened (with a warning) by alp start/init.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startAlpProcess } from '../helpers/alp-process.ts';
import { alpJson, runAlp } from '../helpers/cli.ts';
import { tempDir } from '../helpers/tmp.ts';

const modeOf = (p: string) => fs.statSync(p).mode & 0o777;
const octal = (m: number) => m.toString(8).padStart(4, '0');

describe('issue 14 item 10: files private whatever the umask', () => {
  let previous: number;
  before(() => {
    previous = process.umask(0o022);
  });
  after(() => {
    process.umask(previous);
  });

  it('issue 14 item 10: under umask 022 a new installation is 0750 / 0640, -wal and -shm included', async () => {
    const dir = tempDir('alp-modes');
    const data = path.join(dir, 'd');
    const input = path.join(dir, 'in.txt');
    fs.writeFileSync(input, 'private\n');
    const server = await startAlpProcess({ args: ['--data', data] });
    try {
      const created = await alpJson(['artifact', 'create', '--name', 'p', '--file', input, '--data', data]);
      // The server holds its connection open: the WAL and shared-memory files exist now.
      const expected: Array<[string, number]> = [
        [data, 0o750],
        [path.join(data, 'alp.db'), 0o640],
        [path.join(data, 'alp.db-wal'), 0o640],
        [path.join(data, 'alp.db-shm'), 0o640],
        [path.join(data, 'content'), 0o750],
        [path.join(data, 'content', 'artifacts', created.artifact_id as string), 0o750],
        [path.join(data, 'content', 'artifacts', created.artifact_id as string, 'v1', 'in.txt'), 0o640],
      ];
      for (const [p, mode] of expected) assert.equal(octal(modeOf(p)), octal(mode), p);
    } finally {
      await server.stop();
    }
  });

  it('issue 14 item 10: alp start and alp init warn about and fix a too-open existing installation', async () => {
    const data = path.join(tempDir('alp-modes'), 'd');
    assert.equal((await runAlp(['init', '--data', data])).code, 0);
    const db = path.join(data, 'alp.db');
    fs.chmodSync(data, 0o777);
    fs.chmodSync(db, 0o666);
    const init = await runAlp(['init', '--data', data]);
    assert.equal(init.code, 0, init.stderr);
    assert.match(
      init.stderr,
      new RegExp(`warning: ${data.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} was open to other local users \\(mode 777\\); now 750`),
    );
    assert.match(init.stderr, /alp\.db was open to other local users \(mode 666\); now 640/);
    assert.deepEqual([octal(modeOf(data)), octal(modeOf(db))], ['0750', '0640']);

    fs.chmodSync(data, 0o755);
    fs.chmodSync(db, 0o644);
    const server = await startAlpProcess({ args: ['--data', data] });
    try {
      assert.match(server.stderr(), /was open to other local users \(mode 755\); now 750/);
      assert.deepEqual([octal(modeOf(data)), octal(modeOf(db)), octal(modeOf(`${db}-wal`))], ['0750', '0640', '0640']);
    } finally {
      await server.stop();
    }
    const quiet = await runAlp(['init', '--data', data]);
    assert.equal(quiet.stderr, '', 'nothing left to fix, nothing said');
  });

  it('issue 14 item 10: a sqlite:PATH in a shared directory leaves that directory alone', async () => {
    const shared = tempDir('alp-shared');
    fs.chmodSync(shared, 0o755);
    const r = await runAlp([
      'init',
      '--metadata',
      `sqlite:${path.join(shared, 'x.db')}`,
      '--content',
      `file:${path.join(tempDir('alp-objects'), 'objects')}`,
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(octal(modeOf(shared)), '0755', 'not ALP’s directory to change');
    assert.equal(octal(modeOf(path.join(shared, 'x.db'))), '0640');
  });
});
