/**
 * The installation key in use (issue 20 item 2) and DSSE envelopes (item 3), in-process on real
 * installations opened the way every entry point opens them (runtime/open.ts, startup.ts):
 * - embedded: `<data dir>/keys/installation.ed25519.pem`, made by the startup sequence, 0600 in 0700,
 *   named `alp.local/<installation id>`, the same key on every later open;
 * - ALP_SIGNING_KEY=FILE wins, must exist (a clear NOT_FOUND otherwise, at start), is never generated;
 * - a host-supplied Signer (the KMS seam) is asked for the key name and used as given;
 * - no key configured (the distributed profile without ALP_SIGNING_KEY): the start succeeds, and
 *   whatever must sign fails with NO_SIGNING_KEY;
 * - DSSE: the spec's PAE vector, open refuses a changed payload, type or signature.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { IN_TOTO_PAYLOAD_TYPE, openEnvelope, preAuthEncoding, signEnvelope } from '../../../src/audit/dsse.ts';
import { installationKeys, keyFingerprint, signStatement } from '../../../src/audit/installation-keys.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { resolveStorageConfig } from '../../../src/core/config.ts';
import { AlpError } from '../../../src/core/errors.ts';
import { openInstallation } from '../../../src/runtime/open.ts';
import { startInstallation } from '../../../src/runtime/startup.ts';
import { keySigner, openFileSigner } from '../../../src/system/signing-key.ts';
import { tempDir } from '../../helpers/tmp.ts';

const reason = (code: string, why: string) => (e: unknown) =>
  e instanceof AlpError && e.code === code && (e.details as { reason?: string } | undefined)?.reason === why;

async function withEnv<T>(vars: Record<string, string | undefined>, fn: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  for (const [k, v] of Object.entries(vars))
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  }
}

/** Opens (creating) an embedded installation at `data`, runs the startup sequence, then `fn`. */
async function started<T>(
  data: string,
  fn: (o: Awaited<ReturnType<typeof openInstallation>>, status: Awaited<ReturnType<typeof startInstallation>>) => Promise<T>,
  opts: Parameters<typeof openInstallation>[2] = {},
) {
  const opened = await openInstallation(resolveStorageConfig({ data }), systemClock, opts);
  try {
    return await fn(opened, await startInstallation(opened.ctx, resolveStorageConfig({ data })));
  } finally {
    await opened.close();
  }
}

describe('the installation key in use', () => {
  it('embedded: the startup sequence makes DATA/keys/installation.ed25519.pem, named after the installation, kept across opens', async () => {
    const data = path.join(tempDir('alp-key'), 'data');
    const first = await withEnv({ ALP_SIGNING_KEY: undefined }, () =>
      started(data, async ({ ctx }, status) => {
        const file = path.join(data, 'keys', 'installation.ed25519.pem');
        assert.equal(fs.statSync(file).mode & 0o777, 0o600);
        assert.equal(fs.statSync(path.dirname(file)).mode & 0o777, 0o700);
        assert.equal(status.signing_key?.name, `alp.local/${status.installation_id}`);
        assert.equal(status.signing_key?.source, `file:${file}`);
        const { keys } = await installationKeys(ctx);
        assert.deepEqual({ ...status.signing_key, source: undefined }, { ...keys[0], source: undefined });
        assert.equal(keys[0]?.fingerprint, keyFingerprint(Buffer.from(keys[0]?.public_key ?? '', 'base64')));
        return keys[0];
      }),
    );
    const again = await withEnv({ ALP_SIGNING_KEY: undefined }, () =>
      started(data, async ({ ctx }) => (await installationKeys(ctx)).keys[0]),
    );
    assert.deepEqual(again, first);
  });

  it('ALP_SIGNING_KEY=FILE: that key signs; a missing file fails the start with a clear error and is not created', async () => {
    const dir = tempDir('alp-key-env');
    const file = path.join(dir, 'operator', 'alp.pem');
    const missing = path.join(dir, 'nowhere.pem');
    await withEnv({ ALP_SIGNING_KEY: missing }, () =>
      assert.rejects(
        started(path.join(dir, 'a'), async () => undefined),
        (e: unknown) =>
          reason('NOT_FOUND', 'NO_SIGNING_KEY')(e) && /ALP_SIGNING_KEY.*does not exist.*openssl genpkey/.test((e as Error).message),
      ),
    );
    assert.equal(fs.existsSync(missing), false);
    const made = await openFileSigner(file, 'ignored');
    const shown = await withEnv({ ALP_SIGNING_KEY: `file:${file}` }, () =>
      started(path.join(dir, 'b'), async ({ ctx }, status) => {
        assert.equal(status.signing_key?.source, `file:${file}`);
        return (await installationKeys(ctx)).keys[0];
      }),
    );
    assert.equal(shown?.public_key, Buffer.from(made.publicKey).toString('base64'));
    assert.equal(fs.existsSync(path.join(dir, 'b', 'keys')), false, 'no embedded key made when one is named');
    await withEnv({ ALP_SIGNING_KEY: 'kms://somewhere' }, () =>
      assert.rejects(
        started(path.join(dir, 'c'), async () => undefined),
        (e: unknown) => e instanceof AlpError && e.code === 'USAGE',
      ),
    );
  });

  it('a host-supplied Signer (the KMS seam) is given the key name and signs the envelopes', async () => {
    const { privateKey } = generateKeyPairSync('ed25519');
    const asked: string[] = [];
    const envelope = await started(
      path.join(tempDir('alp-key-host'), 'data'),
      async ({ ctx }, status) => {
        assert.equal(status.signing_key?.source, 'a signer supplied by the host');
        assert.deepEqual(asked, [`alp.local/${status.installation_id}`]);
        return signStatement(ctx, { _type: 'https://in-toto.io/Statement/v1', subject: [], predicateType: 'urn:test', predicate: {} });
      },
      {
        signer: async (name) => {
          asked.push(name);
          return keySigner(name, privateKey);
        },
      },
    );
    const raw = Buffer.from(privateKey.export({ format: 'jwk' }).x as string, 'base64url');
    assert.equal(JSON.parse(openEnvelope(envelope, raw, IN_TOTO_PAYLOAD_TYPE).toString()).predicateType, 'urn:test');
    assert.equal(envelope.signatures[0]?.keyid, keyFingerprint(raw));
  });

  it('no key configured: the start succeeds and reports none; signing fails with NO_SIGNING_KEY', async () => {
    const data = path.join(tempDir('alp-key-none'), 'data');
    await started(data, async ({ ctx }) => {
      // As on the distributed profile without ALP_SIGNING_KEY (runtime/signing.ts gives no source).
      const { signingKey: _configured, ...bare } = ctx;
      await assert.rejects(installationKeys(bare), reason('NOT_FOUND', 'NO_SIGNING_KEY'));
      await assert.rejects(
        signStatement(bare, {}),
        (e: unknown) => reason('NOT_FOUND', 'NO_SIGNING_KEY')(e) && /ALP_SIGNING_KEY/.test((e as Error).message),
      );
      const status = await startInstallation(bare, resolveStorageConfig({ data }));
      assert.equal(status.signing_key, null);
    });
  });
});

describe('DSSE envelopes', () => {
  it('PAE is the protocol’s (its test vector), lengths in bytes', () => {
    assert.equal(
      preAuthEncoding('http://example.com/HelloWorld', Buffer.from('hello world')).toString(),
      'DSSEv1 29 http://example.com/HelloWorld 11 hello world',
    );
    assert.equal(preAuthEncoding('t', Buffer.from('é')).toString(), 'DSSEv1 1 t 2 é');
  });

  it('opens what it signed and refuses a changed payload, type or signature, or another key', async () => {
    const signer = keySigner('alp.local/test', generateKeyPairSync('ed25519').privateKey);
    const other = keySigner('alp.local/other', generateKeyPairSync('ed25519').privateKey);
    const body = Buffer.from('{"a":1}');
    const env = await signEnvelope(IN_TOTO_PAYLOAD_TYPE, body, signer, 'k');
    assert.deepEqual(openEnvelope(env, signer.publicKey, IN_TOTO_PAYLOAD_TYPE), body);
    const integrity = (e: unknown) => e instanceof AlpError && e.code === 'INTEGRITY';
    assert.throws(
      () => openEnvelope({ ...env, payload: Buffer.from('{"a":2}').toString('base64') }, signer.publicKey, IN_TOTO_PAYLOAD_TYPE),
      integrity,
    );
    assert.throws(() => openEnvelope({ ...env, payloadType: 'application/json' }, signer.publicKey, 'application/json'), integrity);
    assert.throws(() => openEnvelope(env, signer.publicKey, 'application/json'), integrity);
    assert.throws(() => openEnvelope(env, other.publicKey, IN_TOTO_PAYLOAD_TYPE), integrity);
    const sig = Buffer.from(env.signatures[0]?.sig ?? '', 'base64');
    sig.writeUInt8((sig[0] as number) ^ 1, 0);
    assert.throws(
      () => openEnvelope({ ...env, signatures: [{ keyid: 'k', sig: sig.toString('base64') }] }, signer.publicKey, IN_TOTO_PAYLOAD_TYPE),
      integrity,
    );
    assert.throws(
      () => openEnvelope({ ...env, payload: '%%%' }, signer.publicKey, IN_TOTO_PAYLOAD_TYPE),
      (e: unknown) => e instanceof AlpError && e.code === 'INVALID',
    );
  });
});
