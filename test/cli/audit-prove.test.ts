/**
 * `alp audit prove ARTIFACT SEQ` (issue 20 item 1) on the installation and with `--server` against a
 * real `alp start` (whose sequencer runs a round shortly after each commit): the same leaf, proof and
 * checkpoint either way; the checkpoint it prints verifies with `alp audit verify --checkpoint --key`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { remoteAndLocalCli } from '../helpers/remote-cli.ts';

describe('CLI: alp audit prove, local and --server (issue 20 item 1)', () => {
  const cli = remoteAndLocalCli('alp-prove-cli', 'agent');
  const { rjson, same, file, ljson, local, ok } = cli;

  it('proves an entry the server sequenced, the same over HTTP and locally; the checkpoint verifies under the pinned key', async () => {
    const v1 = await rjson(['artifact', 'create', '--name', 'proved', '--file', file('p.sh', 'echo p\n')]);
    await rjson(['artifact', 'create', '--name', 'other', '--file', file('o.sh', 'echo o\n')]);
    await rjson(['artifact', 'propose', 'proved']);
    const remote = await rjson(['audit', 'prove', 'proved', '2']);
    assert.equal(remote.entry && (remote.entry as { artifact_id: string }).artifact_id, v1.artifact_id);
    assert.equal(typeof remote.leaf_index, 'number');
    assert.match(String(remote.checkpoint), /^alp\.local\/\S+\n\d+\n\S+\n\n— alp\.local\//);
    const both = await same(['audit', 'prove', 'proved', '2']);
    assert.deepEqual(both, remote);
    const keys = await ljson(['keys', 'show'], cli.tokens.human);
    const vkey = (keys.keys as Array<{ verifier_key: string }>)[0]?.verifier_key as string;
    const verified = await ok(
      local(['audit', 'verify', '--checkpoint', file('cp.txt', String(remote.checkpoint)), '--key', vkey, '--json'], cli.tokens.human),
      'verify',
    );
    assert.equal(JSON.parse(verified.stdout).log.ok, true);
    const text = (await ok(cli.remote(['audit', 'prove', 'proved', '1']), 'prove text')).stdout;
    assert.match(text, /^entry 1 of \S+ \(sha256:[0-9a-f]{64}\) is leaf \d+ of \d+\n/);
    // The installation logs are chains of the log too: the key's activation is a leaf.
    const key = await same(['audit', 'prove', '--log', 'keys', '1']);
    assert.equal((key.entry as { artifact_id: string }).artifact_id, 'KEYS');
    assert.equal(typeof key.leaf_index, 'number');
    const wrong = await cli.remote(['audit', 'prove', '--log', 'nothing', '1']);
    assert.equal(wrong.code, 2, wrong.stderr);
  });
});
