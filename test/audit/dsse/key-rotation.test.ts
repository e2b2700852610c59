/**
 * Installation key rotation, recorded in the key log (issue 20 item 2), on real embedded
 * installations opened as every entry point opens them (runtime/open.ts, startup.ts):
 * - the first start records KEY_ACTIVATED once, even with processes racing to open the key;
 * - `alp keys rotate` replaces the key file, records KEY_ROTATED cross-signed by the old key (checked
 *   with node:crypto and with Debian's python3-cryptography), lists the retired key with its dates,
 *   and what the old key signed still verifies with it; new envelopes carry the new keyid;
 * - a process that opened the key before the rotation signs with the new key afterwards;
 * - a crash after each step leaves either the old key with nothing recorded or the new key recorded
 *   (the next open finishes the rename); a pending key left unrecorded is removed by an open once it
 *   is older than PENDING_KEY_GRACE_MS (said on the CLI's stderr), the current key untouched; a
 *   rotation whose pending key vanished before the rename writes it again;
 * - a key source that changes its key (ALP_SIGNING_KEY, a host signer) records KEY_ROTATED not
 *   cross-signed, a retired key is refused, and `alp keys rotate` refuses such a source;
 * - `alp audit verify` detects an edited key log, a forged cross-signature and a moved CURRENT.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync, verify } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { IN_TOTO_PAYLOAD_TYPE, openEnvelope } from '../../../src/audit/dsse.ts';
import { keyFingerprint, signStatement } from '../../../src/audit/installation-keys.ts';
import { PENDING_KEY_GRACE_MS } from '../../../src/audit/key-history.ts';
import { keyStatement, readKeyLog } from '../../../src/audit/key-log.ts';
import { rotateInstallationKey } from '../../../src/audit/key-rotation.ts';
import { verifyAllAudit } from '../../../src/audit/verify-all.ts';
import { canonicalDigest } from '../../../src/core/canonical-json.ts';
import { systemClock } from '../../../src/core/clock.ts';
import { resolveStorageConfig } from '../../../src/core/config.ts';
import { AlpError } from '../../../src/core/errors.ts';
import { KEY_CURRENT_SK, KEYS_PK, keyLogSk } from '../../../src/core/keys.ts';
import { type OpenOptions, openInstallation } from '../../../src/runtime/open.ts';
import { startInstallation } from '../../../src/runtime/startup.ts';
import type { ServiceContext } from '../../../src/system/context.ts';
import { installationSigner } from '../../../src/system/installation-key.ts';
import { keySigner } from '../../../src/system/signing-key.ts';
import { captureCli, clearCliEnv, patchCliOutput } from '../../helpers/cli-inprocess.ts';
import { tempDir } from '../../helpers/tmp.ts';

const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const OPERATOR = { id: 'os:test', kind: 'human' };
const STATEMENT = { _type: 'https://in-toto.io/Statement/v1', subject: [], predicateType: 'urn:test', predicate: { n: 1 } };

const reason = (code: string, why: string) => (e: unknown) =>
  e instanceof AlpError && e.code === code && (e.details as { reason?: string } | undefined)?.reason === why;

type Opened = Awaited<ReturnType<typeof openInstallation>>;

/** Opens (creating) the embedded installation at `data` and runs the startup sequence. */
async function open(data: string, opts: OpenOptions = {}): Promise<Opened> {
  const opened = await openInstallation(resolveStorageConfig({ data }), systemClock, opts);
  await startInstallation(opened.ctx, resolveStorageConfig({ data }));
  return opened;
}

async function withOpen<T>(data: string, fn: (ctx: ServiceContext) => Promise<T>, opts: OpenOptions = {}): Promise<T> {
  const o = await open(data, opts);
  try {
    return await fn(o.ctx);
  } finally {
    await o.close();
  }
}

const keyFile = (data: string) => path.join(data, 'keys', 'installation.ed25519.pem');
const pendingDir = (data: string) => path.join(data, 'keys', 'pending');
const fingerprintOf = async (ctx: ServiceContext) => keyFingerprint((await installationSigner(ctx)).publicKey);
const pendingKeys = (data: string) => fs.readdirSync(pendingDir(data)).filter((n) => n.endsWith('.ed25519.pem'));
/** Makes the pending files look as old as a crash's leftover past the grace period. */
const age = (data: string) => {
  const then = new Date(Date.now() - PENDING_KEY_GRACE_MS - 60_000);
  for (const n of fs.readdirSync(pendingDir(data))) fs.utimesSync(path.join(pendingDir(data), n), then, then);
};
/** A rotation that stops (a crash) after `step`, leaving what it wrote. */
const crashAfter = (data: string, step: 'pending' | 'recorded') =>
  withOpen(data, (ctx) =>
    assert.rejects(
      rotateInstallationKey(ctx, {
        by: OPERATOR,
        afterStep: (s) => {
          if (s === step) throw new Error('crash');
        },
      }),
      /crash/,
    ),
  );

/** Ed25519 verification by python3-cryptography (fails, never skips, without it). */
function pythonVerifies(publicKeyB64: string, message: string, signatureB64: string): boolean {
  const script = [
    'import base64, json, sys',
    'from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey',
    'from cryptography.exceptions import InvalidSignature',
    'd = json.load(sys.stdin)',
    'k = Ed25519PublicKey.from_public_bytes(base64.b64decode(d["key"]))',
    'try:',
    '    k.verify(base64.b64decode(d["sig"]), d["msg"].encode("utf-8")); print("ok")',
    'except InvalidSignature:',
    '    print("bad")',
  ].join('\n');
  const r = spawnSync(PYTHON, ['-c', script], {
    input: JSON.stringify({ key: publicKeyB64, msg: message, sig: signatureB64 }),
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`python3-cryptography is needed (apt-get install -y python3-cryptography): ${r.stderr}`);
  return r.stdout.trim() === 'ok';
}

const nodeVerifies = (publicKeyB64: string, message: string, signatureB64: string) =>
  verify(
    null,
    Buffer.from(message),
    { key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKeyB64, 'base64').toString('base64url') }, format: 'jwk' },
    Buffer.from(signatureB64, 'base64'),
  );

describe('installation key rotation (SQLite)', () => {
  let restoreEnv: () => void;
  let restoreOutput: () => void;
  before(() => {
    restoreEnv = clearCliEnv();
    restoreOutput = patchCliOutput();
    delete process.env.ALP_SIGNING_KEY;
  });
  after(() => {
    restoreOutput();
    restoreEnv();
  });

  it('the first start records KEY_ACTIVATED once, self-signed; racing opens write one entry', async () => {
    const data = path.join(tempDir('alp-keylog'), 'data');
    const [a, b] = await Promise.all([open(data), open(data)]);
    try {
      const [fa, fb] = await Promise.all([fingerprintOf(a.ctx), fingerprintOf(b.ctx)]);
      assert.equal(fa, fb);
      const log = await readKeyLog(a.ctx);
      assert.equal(log.length, 1);
      const [e] = log;
      assert.equal(e?.action, 'KEY_ACTIVATED');
      assert.equal(e?.fingerprint, fa);
      assert.equal(e?.previous_fingerprint, null);
      assert.equal(e?.cross_signed, false);
      assert.equal(e?.old_key_signature, undefined);
      assert.ok(nodeVerifies(e?.public_key ?? '', e?.statement ?? '', e?.new_key_signature ?? ''));
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
    await withOpen(data, async (ctx) => assert.equal((await readKeyLog(ctx)).length, 1, 'a later open records nothing'));
  });

  it('alp keys rotate: new key file, KEY_ROTATED cross-signed (node:crypto, python3-cryptography), the retired key still verifies what it signed', async () => {
    const data = path.join(tempDir('alp-rotate'), 'data');
    const before = await withOpen(data, async (ctx) => ({ fp: await fingerprintOf(ctx), envelope: await signStatement(ctx, STATEMENT) }));
    const oldPem = fs.readFileSync(keyFile(data), 'utf8');

    const r = await captureCli(['keys', 'rotate', '--reason', 'yearly', '--data', data, '--json']);
    assert.equal(r.code, 0, r.stderr);
    const rotated = JSON.parse(r.stdout);
    assert.equal(rotated.previous_fingerprint, before.fp);
    assert.notEqual(rotated.fingerprint, before.fp);
    assert.notEqual(fs.readFileSync(keyFile(data), 'utf8'), oldPem, 'the key file holds the new key');
    assert.equal(fs.statSync(keyFile(data)).mode & 0o777, 0o600);
    assert.deepEqual(fs.readdirSync(pendingDir(data)), [], 'nothing left pending');

    const shown = await captureCli(['keys', 'show', '--data', data, '--json']);
    assert.equal(shown.code, 0, shown.stderr);
    const { keys, history } = JSON.parse(shown.stdout);
    assert.deepEqual(
      keys.map((k: { fingerprint: string; status: string }) => [k.fingerprint, k.status]),
      [
        [rotated.fingerprint, 'current'],
        [before.fp, 'retired'],
      ],
    );
    assert.equal(keys[1].retired_at, keys[0].activated_at);
    assert.deepEqual(keys[0].recorded_by, { seq: 2, action: 'KEY_ROTATED', cross_signed: true });
    const rotation = history[1];
    assert.equal(rotation.reason, 'yearly');
    assert.equal(rotation.by.kind, 'human');
    assert.equal(rotation.statement, keyStatement(rotation));
    // The old key vouches for the new one, and the new one for itself: checked by two implementations.
    for (const check of [nodeVerifies, pythonVerifies]) {
      assert.ok(check(keys[1].public_key, rotation.statement, rotation.old_key_signature), 'the old key’s cross-signature');
      assert.ok(check(keys[0].public_key, rotation.statement, rotation.new_key_signature), 'the new key’s signature');
      assert.ok(!check(keys[0].public_key, rotation.statement, rotation.old_key_signature), 'a signature is its key’s only');
    }
    // What the old key signed still verifies with the retired key the list gives, found by its keyid.
    const keyid = before.envelope.signatures[0]?.keyid;
    const retired = keys.find((k: { fingerprint: string }) => k.fingerprint === keyid);
    assert.ok(retired);
    openEnvelope(before.envelope, Buffer.from(retired.public_key, 'base64'), IN_TOTO_PAYLOAD_TYPE);

    await withOpen(data, async (ctx) => {
      const envelope = await signStatement(ctx, STATEMENT);
      assert.equal(envelope.signatures[0]?.keyid, rotated.fingerprint, 'new envelopes carry the new keyid');
      openEnvelope(envelope, Buffer.from(keys[0].public_key, 'base64'), IN_TOTO_PAYLOAD_TYPE);
      const summary = await verifyAllAudit(ctx);
      assert.deepEqual(summary.key_log, { entries: 2, ok: true });
    });
    const hist = await captureCli(['keys', 'history', '--data', data]);
    assert.match(hist.stdout, /#2 .* KEY_ROTATED .*\n.*yearly\n.*cross-signed by the previous key: yes/);
    const remote = await captureCli(['keys', 'rotate', '--data', data, '--server', 'http://127.0.0.1:9']);
    assert.equal(remote.code, 2);
    assert.match(remote.stderr, /LOCAL_ONLY|operator command/);
  });

  it('a process that opened the key before a rotation by another process signs with the new key after it', async () => {
    const data = path.join(tempDir('alp-rotate-memo'), 'data');
    const server = await open(data);
    try {
      const old = await fingerprintOf(server.ctx);
      const rotated = await withOpen(data, (ctx) => rotateInstallationKey(ctx, { by: OPERATOR }));
      assert.equal(rotated.previous_fingerprint, old);
      const envelope = await signStatement(server.ctx, STATEMENT);
      assert.equal(envelope.signatures[0]?.keyid, rotated.fingerprint);
    } finally {
      await server.close();
    }
  });

  it('a crash after writing the pending key: the old key stays in use, nothing recorded; an open removes the leftover once it is old', async () => {
    const data = path.join(tempDir('alp-rotate-crash1'), 'data');
    const old = await withOpen(data, fingerprintOf);
    const oldPem = fs.readFileSync(keyFile(data), 'utf8');
    await crashAfter(data, 'pending');
    const [leftover] = pendingKeys(data);
    assert.ok(leftover, 'the crash left the unrecorded pending key');
    const warnings: string[] = [];
    const warn = (m: string) => warnings.push(m);
    // Young, it may be a rotation in another process between writing and recording it: left alone.
    await withOpen(data, async (ctx) => assert.equal(await fingerprintOf(ctx), old), { warn });
    assert.deepEqual([pendingKeys(data), warnings], [[leftover], []]);
    // Past the grace period it is a crash's leftover: the next open removes it, and says so.
    age(data);
    await withOpen(
      data,
      async (ctx) => {
        assert.equal(await fingerprintOf(ctx), old, 'the current key is unchanged');
        assert.equal((await readKeyLog(ctx)).length, 1, 'nothing recorded');
        assert.equal((await verifyAllAudit(ctx)).ok, true);
      },
      { warn },
    );
    assert.deepEqual(fs.readdirSync(pendingDir(data)), [], 'the leftover is gone');
    assert.equal(fs.readFileSync(keyFile(data), 'utf8'), oldPem, 'the key file is untouched');
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.match(
      warnings[0] as string,
      new RegExp(`removed .*${leftover.replace(/\./g, '\\.')}: a pending signing key no rotation recorded`),
    );
    assert.match(warnings[0] as string, new RegExp(`the installation key is unchanged \\(${old}\\)`));
    await withOpen(data, async (ctx) => {
      // A later rotation is not disturbed by the leftover having been there.
      await rotateInstallationKey(ctx, { by: OPERATOR });
      assert.equal((await readKeyLog(ctx)).length, 2);
    });
    assert.deepEqual(fs.readdirSync(pendingDir(data)), []);
  });

  it('the CLI says on stderr that it removed an unrecorded pending key, and prints its document as usual', async () => {
    const data = path.join(tempDir('alp-rotate-crash-cli'), 'data');
    const old = await withOpen(data, fingerprintOf);
    await crashAfter(data, 'pending');
    const [leftover] = pendingKeys(data);
    age(data);
    const r = await captureCli(['keys', 'show', '--data', data, '--json']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).keys[0].fingerprint, old);
    assert.match(
      r.stderr,
      new RegExp(`^alp: warning: removed \\S*${leftover?.replace(/\./g, '\\.')}: a pending signing key no rotation recorded`, 'm'),
    );
    assert.deepEqual(fs.readdirSync(pendingDir(data)), []);
    const again = await captureCli(['keys', 'show', '--data', data, '--json']);
    assert.equal(again.stderr, '', 'said once: nothing left to remove');
  });

  it('a crash after recording the rotation: the next open finishes it and signs with the recorded key', async () => {
    const data = path.join(tempDir('alp-rotate-crash2'), 'data');
    const old = await withOpen(data, fingerprintOf);
    const oldPem = fs.readFileSync(keyFile(data), 'utf8');
    await withOpen(data, (ctx) =>
      assert.rejects(
        rotateInstallationKey(ctx, {
          by: OPERATOR,
          afterStep: (step) => {
            if (step === 'recorded') throw new Error('crash');
          },
        }),
        /crash/,
      ),
    );
    assert.equal(fs.readFileSync(keyFile(data), 'utf8'), oldPem, 'the crash left the old key in the file');
    await withOpen(data, async (ctx) => {
      const log = await readKeyLog(ctx);
      assert.equal(log.length, 2);
      assert.equal(log[1]?.previous_fingerprint, old);
      assert.equal(await fingerprintOf(ctx), log[1]?.fingerprint, 'the recorded key signs');
      assert.equal((await signStatement(ctx, STATEMENT)).signatures[0]?.keyid, log[1]?.fingerprint);
    });
    assert.notEqual(fs.readFileSync(keyFile(data), 'utf8'), oldPem, 'the open renamed the pending key into place');
    assert.deepEqual(fs.readdirSync(pendingDir(data)), []);
  });

  it('both leftovers at once, old: the recorded rotation is finished (never swept), the unrecorded key removed', async () => {
    const data = path.join(tempDir('alp-rotate-crash-both'), 'data');
    await withOpen(data, fingerprintOf);
    await crashAfter(data, 'pending');
    const [unrecorded] = pendingKeys(data);
    await crashAfter(data, 'recorded');
    assert.equal(pendingKeys(data).length, 2, 'two pending keys: one recorded, one not');
    age(data);
    const warnings: string[] = [];
    await withOpen(
      data,
      async (ctx) => {
        const log = await readKeyLog(ctx);
        assert.equal(log.length, 2);
        assert.notEqual(`${String(log[1]?.fingerprint).slice('sha256:'.length)}.ed25519.pem`, unrecorded);
        assert.equal(await fingerprintOf(ctx), log[1]?.fingerprint, 'the recorded key signs');
        assert.equal((await signStatement(ctx, STATEMENT)).signatures[0]?.keyid, log[1]?.fingerprint);
      },
      { warn: (m) => warnings.push(m) },
    );
    assert.deepEqual(fs.readdirSync(pendingDir(data)), [], 'one promoted, the other removed');
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.match(warnings[0] as string, /no rotation recorded/);
  });

  it('a rotation whose pending key vanished before the rename (a sweep, another process) writes it again from memory', async () => {
    const data = path.join(tempDir('alp-rotate-vanished'), 'data');
    const old = await withOpen(data, fingerprintOf);
    const rotated = await withOpen(data, (ctx) =>
      rotateInstallationKey(ctx, {
        by: OPERATOR,
        afterStep: (step) => {
          if (step === 'recorded') for (const n of pendingKeys(data)) fs.rmSync(path.join(pendingDir(data), n));
        },
      }),
    );
    assert.equal(rotated.previous_fingerprint, old);
    assert.deepEqual(fs.readdirSync(pendingDir(data)), []);
    await withOpen(data, async (ctx) => {
      assert.equal(await fingerprintOf(ctx), rotated.fingerprint, 'the recorded key is in the key file');
      assert.equal((await verifyAllAudit(ctx)).ok, true);
    });
  });

  it('a host signer (or ALP_SIGNING_KEY) that changes its key: KEY_ROTATED not cross-signed; a retired key is refused; keys rotate refuses the source', async () => {
    const data = path.join(tempDir('alp-key-host-rotate'), 'data');
    const k1 = generateKeyPairSync('ed25519').privateKey;
    const k2 = generateKeyPairSync('ed25519').privateKey;
    const host = (k: typeof k1) => ({ signer: async (name: string) => keySigner(name, k) });
    await withOpen(
      data,
      async (ctx) => {
        await fingerprintOf(ctx);
        await assert.rejects(rotateInstallationKey(ctx, { by: OPERATOR }), reason('USAGE', 'KEY_NOT_ROTATABLE'));
      },
      host(k1),
    );
    await withOpen(
      data,
      async (ctx) => {
        const fp = await fingerprintOf(ctx);
        const log = await readKeyLog(ctx);
        assert.deepEqual(
          log.map((e) => [e.action, e.cross_signed]),
          [
            ['KEY_ACTIVATED', false],
            ['KEY_ROTATED', false],
          ],
        );
        assert.equal(log[1]?.fingerprint, fp);
        assert.equal(log[1]?.by.kind, 'system');
        assert.deepEqual((await verifyAllAudit(ctx)).key_log, { entries: 2, ok: true });
      },
      host(k2),
    );
    await assert.rejects(
      withOpen(data, fingerprintOf, host(k1)),
      (e: unknown) => reason('CONFLICT', 'KEY_RETIRED')(e) && /retired/.test((e as Error).message),
    );
  });

  it('alp audit verify detects an edited entry, a forged cross-signature and a moved CURRENT', async () => {
    const data = path.join(tempDir('alp-keylog-tamper'), 'data');
    await withOpen(data, (ctx) => rotateInstallationKey(ctx, { by: OPERATOR, reason: 'r' }));
    const findings = async (edit: (ctx: ServiceContext) => Promise<void>) =>
      withOpen(data, async (ctx) => {
        const entry = await ctx.items.get({ PK: KEYS_PK, SK: keyLogSk(2) });
        const current = await ctx.items.get({ PK: KEYS_PK, SK: KEY_CURRENT_SK });
        await edit(ctx);
        const summary = await verifyAllAudit(ctx);
        // Put the log back for the next case.
        if (entry) await ctx.items.put(entry);
        if (current) await ctx.items.put(current);
        return summary.broken.filter((b) => b.artifact_id === 'key-log').flatMap((b) => b.findings.map((f) => f.problem));
      });
    const entryOf = async (ctx: ServiceContext) => (await ctx.items.get({ PK: KEYS_PK, SK: keyLogSk(2) })) as Record<string, unknown>;
    assert.match(
      (await findings(async (ctx) => ctx.items.put({ ...(await entryOf(ctx)), reason: 'edited' } as never))).join('\n'),
      /hash does not match/,
    );
    // A forged cross-signature whose entry hash was recomputed: the chain holds, the signature does not.
    const forged = await findings(async (ctx) => {
      const { hash: _h, ...rest } = await entryOf(ctx);
      const other = keySigner('x', generateKeyPairSync('ed25519').privateKey);
      const sig = Buffer.from(await other.sign(Buffer.from(String(rest.statement)))).toString('base64');
      const item = { ...rest, old_key_signature: sig };
      await ctx.items.put({ ...item, hash: canonicalDigest(item as never) } as never);
    });
    assert.ok(
      forged.some((p) => /cross-signature .* does not verify/.test(p)),
      forged.join('\n'),
    );
    const moved = await findings(async (ctx) => {
      const first = (await readKeyLog(ctx))[0];
      await ctx.items.put({ PK: KEYS_PK, SK: KEY_CURRENT_SK, type: 'installation_key_current', fingerprint: first?.fingerprint });
    });
    assert.ok(
      moved.some((p) => /CURRENT names/.test(p)),
      moved.join('\n'),
    );
    // Through the CLI: exit 5 (INTEGRITY) naming the key log row.
    await withOpen(data, async (ctx) => ctx.items.put({ ...(await entryOf(ctx)), reason: 'edited' } as never));
    const r = await captureCli(['audit', 'verify', '--data', data]);
    assert.equal(r.code, 5, r.stdout + r.stderr);
    assert.match(r.stdout + r.stderr, /KEYS LOG#0000000002/);
  });
});
