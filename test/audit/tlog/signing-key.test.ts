/**
 * The installation signing key (src/system/signing-key.ts): generated once as a 0600 PKCS#8 PEM in a
 * 0700 directory, the same key on every later open, one key when several processes race to create it,
 * and refused when group or others may read it, when it is a symbolic link, or when it is not Ed25519.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { generateKeyPairSync, verify } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ed25519PublicKey, openFileSigner } from '../../../src/system/signing-key.ts';
import { tempDir } from '../../helpers/tmp.ts';

const NAME = 'alp.test/log';

describe('file signer', () => {
  it('generates a 0600 PKCS#8 Ed25519 key on first use and reuses it', async () => {
    const dir = path.join(tempDir('alp-key'), 'keys');
    const file = path.join(dir, 'log.ed25519.pem');
    const first = await openFileSigner(file, NAME);
    assert.equal(first.created, true);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.equal(fs.statSync(dir).mode & 0o777, 0o700);
    assert.match(fs.readFileSync(file, 'utf8'), /^-----BEGIN PRIVATE KEY-----\n/);
    assert.deepEqual(fs.readdirSync(dir), ['log.ed25519.pem'], 'no temp file left');

    const again = await openFileSigner(file, NAME);
    assert.equal(again.created, false);
    assert.deepEqual(Buffer.from(again.publicKey), Buffer.from(first.publicKey));
    assert.equal(first.publicKey.length, 32);

    const message = Buffer.from('checkpoint text\n');
    const signature = await again.sign(message);
    assert.equal(signature.length, 64);
    assert.equal(verify(null, message, ed25519PublicKey(first.publicKey), signature), true);
    assert.equal(verify(null, Buffer.from('other text\n'), ed25519PublicKey(first.publicKey), signature), false);
  });

  it('refuses a key file group or others may read, until it is 0600 again', async () => {
    const file = path.join(tempDir('alp-key'), 'k.pem');
    await openFileSigner(file, NAME);
    for (const mode of [0o640, 0o604, 0o660]) {
      fs.chmodSync(file, mode);
      await assert.rejects(openFileSigner(file, NAME), (e: Error & { code?: string }) => {
        assert.equal(e.code, 'INTEGRITY');
        assert.match(e.message, new RegExp(`open to other users \\(mode 0${mode.toString(8)}\\).*chmod 600`));
        return true;
      });
    }
    fs.chmodSync(file, 0o600);
    assert.equal((await openFileSigner(file, NAME)).created, false);
  });

  it('refuses a symbolic link and a key that is not Ed25519', async () => {
    const dir = tempDir('alp-key');
    const real = path.join(dir, 'real.pem');
    await openFileSigner(real, NAME);
    const link = path.join(dir, 'link.pem');
    fs.symlinkSync(real, link);
    await assert.rejects(openFileSigner(link, NAME), /symbolic link/);

    const rsa = path.join(dir, 'rsa.pem');
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    fs.writeFileSync(rsa, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    await assert.rejects(openFileSigner(rsa, NAME), /is ec, not Ed25519/);
  });

  it('processes racing to create the key end with one key', async () => {
    const file = path.join(tempDir('alp-key'), 'race', 'k.pem');
    const module = path.resolve(import.meta.dirname, '../../../src/system/signing-key.ts');
    const script = `import { openFileSigner } from ${JSON.stringify(module)};
const s = await openFileSigner(${JSON.stringify(file)}, 'n');
process.stdout.write(JSON.stringify({ created: s.created, key: Buffer.from(s.publicKey).toString('hex') }));`;
    const run = () =>
      new Promise<{ created: boolean; key: string }>((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let out = '';
        child.stdout.on('data', (d: Buffer) => (out += d));
        child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`exit ${code}`))));
      });
    const results = await Promise.all([run(), run(), run(), run()]);
    assert.equal(new Set(results.map((r) => r.key)).size, 1, JSON.stringify(results));
    assert.equal(results.filter((r) => r.created).length, 1);
    assert.equal(Buffer.from((await openFileSigner(file, 'n')).publicKey).toString('hex'), results[0]?.key);
    assert.deepEqual(fs.readdirSync(path.dirname(file)), ['k.pem']);
  });
});
