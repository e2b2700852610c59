/**
 * `alp keys rotate` (issue 20 item 2): replaces the embedded installation key
 * (`<data dir>/keys/installation.ed25519.pem`) with a new one, cross-signed, in an order a crash
 * cannot break:
 *
 * 1. the new key is written to `keys/pending/<hex of its fingerprint>.ed25519.pem` (0600, fsynced,
 *    linked: system/signing-key.ts `writeKeyFileOnce`);
 * 2. KEY_ROTATED is recorded (key-log.ts), the statement signed by the old key and the new one,
 *    conditioned on CURRENT still naming the old key;
 * 3. the pending file is renamed over the key file (the old private key is gone: ALP never signs with
 *    a retired key, and its public key stays in the log for verifying what it signed).
 *
 * A crash before 2 leaves the old key in use and nothing recorded: the pending file is never used,
 * and an open of the key (key-history.ts sweepPendingKeys) removes it once it is older than
 * PENDING_KEY_GRACE_MS (younger, it may be this step of a rotation still running elsewhere). A crash
 * after 2 leaves the log naming the pending key: the next open of the key (key-history.ts) renames it
 * into place. Other processes holding the old key (a running `alp start`) check the log's CURRENT
 * before each signature and reopen (system/installation-key.ts).
 *
 * A key named by ALP_SIGNING_KEY or supplied by the host is not ALP's to replace (every node shares
 * it): it is rotated at its source, and the first open of the new key records KEY_ROTATED, not
 * cross-signed (key-history.ts).
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { digestHex } from '../core/digest.ts';
import { ConditionFailed, Conflict, UsageError } from '../core/errors.ts';
import type { ServiceContext } from '../system/context.ts';
import { forgetInstallationSigner, installationSigner } from '../system/installation-key.ts';
import { keySigner, pendingKeyFile, promotePendingKey, rawEd25519PublicKey, readKeyFile, writeKeyFileOnce } from '../system/signing-key.ts';
import { commitKeyChange, type KeyEvent, keyChangeDraft, keyFingerprint } from './key-log.ts';

/** The steps of a rotation, for a test to stop it after one (a crash). */
export type RotationStep = 'pending' | 'recorded';

export interface RotateKeyOptions {
  by: { id: string; kind: string };
  reason?: string | undefined;
  /** Called after each step (a test throws here to leave a rotation half done). */
  afterStep?: (step: RotationStep) => void | Promise<void>;
}

export interface RotatedKey {
  previous_fingerprint: string;
  fingerprint: string;
  entry: KeyEvent;
}

/**
 * Moves the recorded key into place. Its pending file may be gone by now: another process's open
 * promoted it (the key file holds the recorded key: done), or an open swept it as unrecorded while
 * this rotation stalled between writing and recording it for longer than PENDING_KEY_GRACE_MS — then
 * it is written again from the key this process still holds, so the recorded key is never lost.
 */
async function promoteRecorded(pending: string, file: string, key: KeyObject, fingerprint: string): Promise<void> {
  if (await promotePendingKey(pending, file)) return;
  const inPlace = await readKeyFile(file);
  if (inPlace && keyFingerprint(rawEd25519PublicKey(inPlace)) === fingerprint) return;
  await writeKeyFileOnce(pending, key);
  await promotePendingKey(pending, file);
}

export async function rotateInstallationKey(ctx: ServiceContext, opts: RotateKeyOptions): Promise<RotatedKey> {
  const old = await installationSigner(ctx);
  const file = ctx.signingKey?.rotatable?.file;
  if (!file) {
    throw new UsageError(
      `the installation key comes from ${ctx.signingKey?.describe ?? 'nowhere'}, which ALP does not replace: put the new key there on every node; the first open of it records the rotation (not cross-signed)`,
      { reason: 'KEY_NOT_ROTATABLE' },
    );
  }
  const nextKey = generateKeyPairSync('ed25519').privateKey;
  const next = keySigner(old.name, nextKey);
  const pending = pendingKeyFile(file, digestHex(keyFingerprint(next.publicKey)));
  await writeKeyFileOnce(pending, nextKey);
  await opts.afterStep?.('pending');
  let entry: KeyEvent;
  try {
    entry = await commitKeyChange(ctx, await keyChangeDraft(old, next, { by: opts.by, reason: opts.reason, crossSign: true }));
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    // Not recorded (someone else changed the key first): this pending key will never be used.
    await fs.rm(pending, { force: true });
    throw new Conflict('the installation key changed while it was being rotated: run `alp keys rotate` again', { reason: 'KEY_CHANGED' });
  }
  await opts.afterStep?.('recorded');
  await promoteRecorded(pending, file, nextKey, entry.fingerprint);
  forgetInstallationSigner(ctx);
  return { previous_fingerprint: keyFingerprint(old.publicKey), fingerprint: entry.fingerprint, entry };
}
