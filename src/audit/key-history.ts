/**
 * The installation key held to its log (issue 20 item 2; key-log.ts): registered on every context by
 * runtime/context.ts as `ctx.keyHistory`, so installationSigner (system/installation-key.ts) never
 * hands out a key the log does not name as current.
 *
 * When a process opens its key source, the key it gets is compared with the log's last key:
 * - no key recorded yet (a new installation, or one made before the log existed): KEY_ACTIVATED,
 *   signed by the key itself;
 * - the same key: used as it is (the common case: one read of the log);
 * - the embedded key file still holds the previous key and `keys/pending/<hex>.ed25519.pem` holds the
 *   recorded one: a rotation interrupted after it was recorded — finished here (the pending key is
 *   renamed over the file) and the recorded key used;
 * - a key the log retired: refused (CONFLICT, `details.reason: KEY_RETIRED`) — a retired key never
 *   signs again;
 * - any other key (ALP_SIGNING_KEY or a host signer now giving another key, an embedded key file
 *   replaced by hand, a restore onto a host without the old key file): KEY_ROTATED with
 *   `cross_signed: false` — ALP never held the old private key for that change, so only the new key
 *   signs the statement.
 * Every record is conditioned on CURRENT (key-log.ts), so processes racing to record the same key
 * write one entry; the loser reads the log again.
 */
import { type Digest, digestHex } from '../core/digest.ts';
import { ConditionFailed, Conflict, IntegrityError } from '../core/errors.ts';
import type { KeyHistory, ServiceContext } from '../system/context.ts';
import type { InstallationKeySource } from '../system/key-source.ts';
import { openFileSigner, pendingKeyFile, promotePendingKey, rawEd25519PublicKey, readKeyFile, type Signer } from '../system/signing-key.ts';
import { commitKeyChange, currentKeyFingerprint, type KeyEvent, keyChangeDraft, keyFingerprint, readKeyLog } from './key-log.ts';

const MAX_ATTEMPTS = 5;

/** Who records a key change ALP noticed rather than was asked for. */
export const KEY_SYSTEM_ACTOR = { id: 'alp', kind: 'system' } as const;

export const KEY_HISTORY: KeyHistory = {
  adopt: adoptSigner,
  isCurrent: async (ctx, signer) => (await currentKeyFingerprint(ctx)) === keyFingerprint(signer.publicKey),
};

export async function adoptSigner(ctx: ServiceContext, source: InstallationKeySource, opened: Signer): Promise<Signer> {
  const fingerprint = keyFingerprint(opened.publicKey);
  for (let attempt = 1; ; attempt++) {
    const log = await readKeyLog(ctx);
    const last = log[log.length - 1];
    if (last?.fingerprint === fingerprint) return opened;
    if (last && source.rotatable) {
      const finished = await finishRotation(source.rotatable.file, opened.name, last.fingerprint);
      if (finished) return finished;
    }
    if (log.some((e) => e.fingerprint === fingerprint)) throw retiredKey(source, fingerprint, last as KeyEvent);
    const reason = last
      ? `the key source (${source.describe}) gave a key the log does not name: recorded as it is, not cross-signed`
      : 'the first key this installation signs with';
    try {
      await commitKeyChange(
        ctx,
        await keyChangeDraft(last ? signerOf(last) : undefined, opened, { by: KEY_SYSTEM_ACTOR, reason, crossSign: false }),
      );
      return opened;
    } catch (e) {
      // Another process recorded a change first: look again.
      if (!(e instanceof ConditionFailed) || attempt >= MAX_ATTEMPTS) throw e;
    }
  }
}

/** The previous key as keyChangeDraft needs it (its public key; it never signs here). */
function signerOf(e: KeyEvent): Signer {
  return {
    name: e.key_name,
    publicKey: Buffer.from(e.public_key, 'base64'),
    sign: () => Promise.reject(new Error('the previous key does not sign an unannounced change')),
  };
}

/**
 * A rotation recorded but not yet moved into place (a crash between the two): moves the pending key
 * over the key file and opens it. Undefined when there is nothing to finish.
 */
async function finishRotation(file: string, name: string, recorded: string): Promise<Signer | undefined> {
  const pending = pendingKeyFile(file, digestHex(recorded as Digest));
  const key = await readKeyFile(pending);
  if (key) {
    if (keyFingerprint(rawEd25519PublicKey(key)) !== recorded)
      throw new IntegrityError(`the pending signing key ${pending} is not the key its name says: refusing to use it`, { file: pending });
    await promotePendingKey(pending, file);
  }
  const now = await openFileSigner(file, name);
  return keyFingerprint(now.publicKey) === recorded ? now : undefined;
}

function retiredKey(source: InstallationKeySource, fingerprint: string, last: KeyEvent): Conflict {
  return new Conflict(
    `the signing key ${fingerprint} from ${source.describe} was retired: the installation signs with ${last.fingerprint} since ${last.timestamp}; give this process that key (a retired key never signs again)`,
    { reason: 'KEY_RETIRED', fingerprint, current: last.fingerprint, source: source.describe },
  );
}
