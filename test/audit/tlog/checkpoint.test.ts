/**
 * Signed notes and C2SP checkpoints (src/audit/tlog/note.ts, checkpoint.ts) as ALP reads them: the
 * exact text and signature line, the verifier key string, and every way a note is refused (altered
 * text, another key, a broken signature line, another log's origin). go-verifier.test.ts shows that
 * Go's sumdb/note reads what ALP writes.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { formatCheckpointBody, openCheckpoint, parseCheckpointBody, signCheckpoint } from '../../../src/audit/tlog/checkpoint.ts';
import { leafHash } from '../../../src/audit/tlog/merkle.ts';
import { keyHash, openNote, parseVerifierKey, signNote, verifierKey, verifierOf } from '../../../src/audit/tlog/note.ts';
import { keySigner } from '../../../src/system/signing-key.ts';

const ORIGIN = 'alp.example/log/01J0000000000000000000000';
const signer = keySigner(ORIGIN, generateKeyPairSync('ed25519').privateKey);
const other = keySigner(ORIGIN, generateKeyPairSync('ed25519').privateKey);
const root = leafHash(Buffer.from('root'));

const isCode = (code: string) => (e: Error & { code?: string }) => e.code === code;

describe('signed notes', () => {
  it('the note is the text, a blank line and one signature line naming the key and its hash', async () => {
    const note = await signNote('hello\n', signer);
    const lines = note.split('\n');
    assert.deepEqual(lines.slice(0, 2), ['hello', '']);
    const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/.exec(lines[2] as string);
    assert.ok(m, lines[2]);
    assert.equal(m[1], ORIGIN);
    const raw = Buffer.from(m[2] as string, 'base64');
    assert.equal(raw.length, 4 + 64);
    assert.equal(raw.readUInt32BE(0), keyHash(ORIGIN, signer.publicKey));
    assert.equal(lines[3], '');
    assert.equal(openNote(note, verifierOf(signer)), 'hello\n');
  });

  it('the verifier key string round-trips and pins name, hash and key', () => {
    const vkey = verifierKey(signer.name, signer.publicKey);
    assert.match(vkey, /^alp\.example\/log\/01J0+\+[0-9a-f]{8}\+[A-Za-z0-9+/]{43}[A-Za-z0-9+/=]$/);
    const v = parseVerifierKey(vkey);
    assert.equal(v.name, signer.name);
    assert.deepEqual(Buffer.from(v.publicKey), Buffer.from(signer.publicKey));
    const [name, hash] = vkey.split('+', 2) as [string, string];
    const key = vkey.slice(name.length + hash.length + 2);
    const wrongHash = ((Number.parseInt(hash, 16) + 1) >>> 0).toString(16).padStart(8, '0');
    assert.throws(() => parseVerifierKey(`${name}+${wrongHash}+${key}`), /key hash does not match/);
    assert.throws(() => parseVerifierKey(`other+${hash}+${key}`), /key hash does not match/);
    assert.throws(() => parseVerifierKey(`${name}+${hash}`), /not a verifier key/);
    // The base64 key may hold '+' itself (about every other key does).
    let plus = keySigner('k', generateKeyPairSync('ed25519').privateKey);
    while (!verifierKey('k', plus.publicKey).slice(11).includes('+')) plus = keySigner('k', generateKeyPairSync('ed25519').privateKey);
    assert.deepEqual(Buffer.from(parseVerifierKey(verifierKey('k', plus.publicKey)).publicKey), Buffer.from(plus.publicKey));
    assert.throws(() => verifierKey('has space', signer.publicKey), /key name/);
    assert.throws(() => verifierKey('has+plus', signer.publicKey), /key name/);
  });

  it('refuses an altered text, another key, a broken signature and a malformed note', async () => {
    const note = await signNote('size 5\n', signer);
    assert.throws(() => openNote(note.replace('size 5', 'size 6'), verifierOf(signer)), isCode('INTEGRITY'));
    assert.throws(() => openNote(note, verifierOf(other)), isCode('INTEGRITY'));
    const sig = note.split('\n')[2] as string;
    const b64 = sig.split(' ')[2] as string;
    const raw = Buffer.from(b64, 'base64');
    raw[10] = (raw[10] as number) ^ 1;
    assert.throws(() => openNote(note.replace(b64, raw.toString('base64')), verifierOf(signer)), /does not verify/);
    assert.throws(() => openNote('size 5\n', verifierOf(signer)), isCode('INVALID'));
    assert.throws(() => openNote(note.replace('\u2014', '-'), verifierOf(signer)), /not a signature line/);
    assert.throws(() => openNote(note.slice(0, -1), verifierOf(signer)), isCode('INVALID'));
    await assert.rejects(signNote('no newline', signer), /end with a newline/);
    await assert.rejects(signNote('tab\there\n', signer), /control characters/);
  });

  it('ignores signatures by other keys (cosigners) but needs the pinned one', async () => {
    const mine = await signNote('text\n', signer);
    const theirs = await signNote('text\n', keySigner('witness.example', generateKeyPairSync('ed25519').privateKey));
    const both = mine + theirs.split('\n\n')[1];
    assert.equal(openNote(both, verifierOf(signer)), 'text\n');
    assert.throws(() => openNote(theirs, verifierOf(signer)), /not signed by/);
  });
});

describe('C2SP checkpoints', () => {
  it('the body is origin, decimal size and base64 root, one per line', () => {
    const body = formatCheckpointBody({ origin: ORIGIN, size: 1234, root });
    assert.equal(body, `${ORIGIN}\n1234\n${Buffer.from(root).toString('base64')}\n`);
    assert.deepEqual(parseCheckpointBody(body), { origin: ORIGIN, size: 1234, root: Buffer.from(root) });
    const withExt = formatCheckpointBody({ origin: ORIGIN, size: 0, root, extensions: ['ext one'] });
    assert.deepEqual(parseCheckpointBody(withExt).extensions, ['ext one']);
  });

  it('parsing is strict: no leading zero, sign or space in the size, a canonical 32-byte root', () => {
    const r64 = Buffer.from(root).toString('base64');
    for (const bad of [
      `${ORIGIN}\n012\n${r64}\n`,
      `${ORIGIN}\n-1\n${r64}\n`,
      `${ORIGIN}\n 1\n${r64}\n`,
      `${ORIGIN}\n1\n${r64.slice(0, -4)}\n`,
    ])
      assert.throws(() => parseCheckpointBody(bad), isCode('INVALID'), JSON.stringify(bad));
    assert.throws(() => parseCheckpointBody(`\n1\n${r64}\n`), /origin/);
    assert.throws(() => parseCheckpointBody(`${ORIGIN}\n1\n${r64}`), /newline/);
    assert.throws(() => formatCheckpointBody({ origin: 'a\nb', size: 1, root }), /one non-empty line/);
    assert.throws(() => formatCheckpointBody({ origin: ORIGIN, size: 1.5, root }), /whole number/);
  });

  it('a signed checkpoint opens with the pinned key and origin only', async () => {
    const note = await signCheckpoint({ origin: ORIGIN, size: 42, root }, signer);
    const cp = openCheckpoint(note, parseVerifierKey(verifierKey(signer.name, signer.publicKey)), ORIGIN);
    assert.equal(cp.size, 42);
    assert.deepEqual(Buffer.from(cp.root), Buffer.from(root));
    assert.throws(() => openCheckpoint(note, verifierOf(signer), 'alp.example/another-log'), isCode('CONFLICT'));
    assert.throws(() => openCheckpoint(note, verifierOf(other), ORIGIN), isCode('INTEGRITY'));
    assert.throws(() => openCheckpoint(note.replace('\n42\n', '\n43\n'), verifierOf(signer), ORIGIN), isCode('INTEGRITY'));
  });
});
