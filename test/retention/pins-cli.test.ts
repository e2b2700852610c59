/**
 * Issue 17 B8 at the CLI: `alp pins add|remove|list|history` on an embedded installation, run in this
 * process (the same entry function the binary runs). The library behaviour on both profiles is
 * pins.test.ts; this proves the commands, the acting principal rule and the record.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { captureCli, patchCliOutput } from '../helpers/cli-inprocess.ts';
import { tempDir } from '../helpers/tmp.ts';

const d = (c: string) => `sha256:${c.repeat(64)}`;

describe('alp pins (issue 17 B8)', () => {
  let unpatch: () => void;
  let data: string;
  before(async () => {
    unpatch = patchCliOutput();
    data = path.join(tempDir('alp-pins-cli'), 'data');
    assert.equal((await captureCli(['init', '--data', data])).code, 0);
  });
  after(() => unpatch());

  it('adds, lists, removes and records who, when and why; refuses an agent, a missing reason, a bad digest', async () => {
    const added = await captureCli(['pins', 'add', d('b'), '--reason', 'legal hold', '--data', data, '--json']);
    assert.equal(added.code, 0, added.stderr);
    const pin = JSON.parse(added.stdout);
    assert.equal(pin.digest, d('b'));
    assert.equal(pin.added_by.kind, 'human');
    assert.equal(pin.reason, 'legal hold');
    assert.equal((await captureCli(['pins', 'add', d('a'), '--reason', 'keep', '--data', data])).code, 0);

    const dup = await captureCli(['pins', 'add', d('a'), '--reason', 'again', '--data', data]);
    assert.equal(dup.code, 4, dup.stderr);
    assert.match(dup.stderr, /^alp: CONFLICT: .*pinned already/);
    const noReason = await captureCli(['pins', 'add', d('c'), '--data', data]);
    assert.equal(noReason.code, 2);
    assert.match(noReason.stderr, /--reason/);
    assert.equal((await captureCli(['pins', 'add', 'sha256:nothex', '--reason', 'x', '--data', data])).code, 2);

    const token = JSON.parse(
      (await captureCli(['token', 'create', '--data', data, '--principal', 'bot', '--kind', 'agent', '--json'])).stdout,
    ).token as string;
    const asAgent = await captureCli(['pins', 'add', d('c'), '--reason', 'mine', '--data', data, '--token', token]);
    assert.notEqual(asAgent.code, 0);
    assert.match(
      asAgent.stderr,
      /^alp: FORBIDDEN: retention needs the local operator/,
      'pins are retention administration: the local (human) operator only',
    );
    const agentRemove = await captureCli(['pins', 'remove', d('a'), '--reason', 'mine', '--data', data, '--token', token]);
    assert.match(agentRemove.stderr, /^alp: FORBIDDEN: /);

    const listed = await captureCli(['pins', 'list', '--data', data, '--json']);
    assert.equal(listed.code, 0, listed.stderr);
    const doc = JSON.parse(listed.stdout);
    assert.equal(doc.count, 2);
    assert.deepEqual(
      doc.pins.map((p: { digest: string }) => p.digest),
      [d('a'), d('b')],
    );
    const human = await captureCli(['pins', 'list', '--data', data]);
    assert.match(human.stdout, new RegExp(`^${d('a')}  pinned by \\S+ at \\S+: keep\n${d('b')}  pinned by \\S+ at \\S+: legal hold\n$`));

    assert.equal((await captureCli(['pins', 'remove', d('a'), '--data', data])).code, 2, 'remove needs --reason too');
    const removed = await captureCli(['pins', 'remove', d('a'), '--reason', 'released', '--data', data]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.match(removed.stdout, /unpinned by \S+ at \S+: released/);
    assert.equal((await captureCli(['pins', 'remove', d('a'), '--reason', 'again', '--data', data])).code, 3, 'NOT_FOUND');

    const history = JSON.parse((await captureCli(['pins', 'history', '--data', data, '--json'])).stdout);
    assert.deepEqual(
      history.history.map((e: { action: string; digest: string; reason: string }) => [e.action, e.digest, e.reason]),
      [
        ['added', d('b'), 'legal hold'],
        ['added', d('a'), 'keep'],
        ['removed', d('a'), 'released'],
      ],
    );
    const one = await captureCli(['pins', 'history', '--digest', d('a'), '--data', data]);
    assert.equal(one.stdout.trim().split('\n').length, 2);
    assert.match(one.stdout, /removed {2}sha256:a{64} {2}by \S+: released {2}\(pinned by \S+ at \S+: keep\)/);
    const fresh = path.join(tempDir('alp-pins-empty'), 'd');
    assert.equal((await captureCli(['init', '--data', fresh])).code, 0);
    const empty = JSON.parse((await captureCli(['pins', 'list', '--data', fresh, '--json'])).stdout);
    assert.deepEqual(empty, { pins: [], count: 0 });
  });
});
