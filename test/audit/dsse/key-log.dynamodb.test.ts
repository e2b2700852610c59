/**
 * The installation key log on DynamoDB Local (issue 20 item 2): the distributed profile's key comes
 * from ALP_SIGNING_KEY or a host signer, so a rotation there is a source giving another key. Two nodes
 * opening the first key at once record one KEY_ACTIVATED (the conditional put on CURRENT); a node
 * given a new key records KEY_ROTATED (not cross-signed) once however many nodes race; a node still
 * given the retired key is refused; `alp audit verify`'s check (verifyAllAudit) finds the log intact,
 * then an edited entry.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { readKeyLog } from '../../../src/audit/key-log.ts';
import { verifyAllAudit } from '../../../src/audit/verify-all.ts';
import { AlpError } from '../../../src/core/errors.ts';
import { KEYS_PK, keyLogSk } from '../../../src/core/keys.ts';
import { createContext, type ServiceContext } from '../../../src/runtime/context.ts';
import { initInstallation } from '../../../src/system/installation.ts';
import { hostKeySource, installationSigner } from '../../../src/system/installation-key.ts';
import { keySigner } from '../../../src/system/signing-key.ts';
import { distributedInstallation, stopDistributedServers } from '../../helpers/distributed.ts';

after(stopDistributedServers);

/** A node of the installation: its own context over the same table, its key from a host signer. */
function node(base: ServiceContext, key: KeyObject): ServiceContext {
  return createContext({
    items: base.items,
    content: base.content,
    clock: base.clock,
    layout: base.layout,
    signingKey: hostKeySource(async (name) => keySigner(name, key)),
  });
}

describe('the installation key log (DynamoDB Local)', () => {
  it('racing nodes record one activation and one rotation; a retired key is refused; verify checks the log', async () => {
    const inst = await distributedInstallation();
    try {
      await initInstallation(inst.ctx);
      const k1 = generateKeyPairSync('ed25519').privateKey;
      const k2 = generateKeyPairSync('ed25519').privateKey;
      await Promise.all([1, 2, 3].map(() => installationSigner(node(inst.ctx, k1))));
      assert.deepEqual(
        (await readKeyLog(inst.ctx)).map((e) => e.action),
        ['KEY_ACTIVATED'],
      );
      const signers = await Promise.all([1, 2, 3].map(() => installationSigner(node(inst.ctx, k2))));
      const log = await readKeyLog(inst.ctx);
      assert.deepEqual(
        log.map((e) => [e.action, e.cross_signed]),
        [
          ['KEY_ACTIVATED', false],
          ['KEY_ROTATED', false],
        ],
      );
      assert.equal(log[1]?.previous_fingerprint, log[0]?.fingerprint);
      assert.deepEqual(Buffer.from(signers[0]?.publicKey ?? []).toString('base64'), log[1]?.public_key);
      await assert.rejects(
        installationSigner(node(inst.ctx, k1)),
        (e: unknown) => e instanceof AlpError && e.code === 'CONFLICT' && (e.details as { reason?: string }).reason === 'KEY_RETIRED',
      );
      assert.deepEqual((await verifyAllAudit(inst.ctx)).key_log, { entries: 2, ok: true });
      const entry = await inst.ctx.items.get({ PK: KEYS_PK, SK: keyLogSk(1) }, { consistent: true });
      await inst.ctx.items.put({ ...(entry as NonNullable<typeof entry>), reason: 'edited' });
      const summary = await verifyAllAudit(inst.ctx);
      assert.equal(summary.ok, false);
      assert.deepEqual(summary.key_log, { entries: 2, ok: false });
    } finally {
      await inst.close();
    }
  });
});
