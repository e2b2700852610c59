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
 *
 * Then, for the embedded key file, the pending directory is swept (sweepPendingKeys): a pending key
 * the log never recorded (a rotation that stopped before step 2 of key-rotation.ts) is removed once it
 * is older than PENDING_KEY_GRACE_MS — younger, it may be a rotation in another process between
 * writing it and recording it — and a pending copy of a retired key at once; each removal is said on
 * ctx.warn when the context has one. So no private key is left lying there that no log entry
 * explains, and none can later be taken for the recorded one.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
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

/**
 * How long a pending key file the log does not name is left alone. A rotation writes it, then records
 * it (key-rotation.ts steps 1 and 2: one signature and one commit apart); one older than this is what
 * a rotation that stopped between the two left. Removing a younger one could take the key of a
 * rotation in flight (which writes it again from memory if so: key-rotation.ts).
 */
export const PENDING_KEY_GRACE_MS = 10 * 60_000;

export async function adoptSigner(ctx: ServiceContext, source: InstallationKeySource, opened: Signer): Promise<Signer> {
  const { signer, log } = await reconcile(ctx, source, opened);
  if (source.rotatable) {
    const recorded = new Set<string>(log.map((e) => e.fingerprint));
    // Housekeeping: a sweep that cannot finish (a file it may not remove) never keeps the key from signing.
    await sweepPendingKeys(ctx, source.rotatable.file, keyFingerprint(signer.publicKey), recorded).catch((e: unknown) =>
      ctx.warn?.(`could not remove a leftover pending signing key: ${(e as Error).message}`),
    );
  }
  return signer;
}

/** The signer to use, and the key log as last read. */
async function reconcile(
  ctx: ServiceContext,
  source: InstallationKeySource,
  opened: Signer,
): Promise<{ signer: Signer; log: readonly KeyEvent[] }> {
  const fingerprint = keyFingerprint(opened.publicKey);
  for (let attempt = 1; ; attempt++) {
    const log = await readKeyLog(ctx);
    const last = log[log.length - 1];
    if (last?.fingerprint === fingerprint) return { signer: opened, log };
    if (last && source.rotatable) {
      const finished = await finishRotation(source.rotatable.file, opened.name, last.fingerprint);
      if (finished) return { signer: finished, log };
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
      return { signer: opened, log };
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

/** `<hex>.ed25519.pem` (pendingKeyFile), and the temporary file writeKeyFileOnce links it from. */
const PENDING_KEY = /^([0-9a-f]{64})\.ed25519\.pem$/;
const PENDING_TEMP = /^\.[0-9a-f]{64}\.ed25519\.pem\.[0-9a-f]+\.tmp$/;

/**
 * Removes what a rotation of `file` left in its pending directory that no rotation can still use:
 * a key the log never recorded, older than PENDING_KEY_GRACE_MS (and such a key's temporary file),
 * and a pending copy of a key the log retired. The key in use (`current`) is never touched, nor any
 * file not named as these are. Returns the paths removed.
 */
export async function sweepPendingKeys(
  ctx: Pick<ServiceContext, 'warn'>,
  file: string,
  current: Digest,
  recorded: ReadonlySet<string>,
  now: number = Date.now(),
): Promise<string[]> {
  const dir = path.dirname(pendingKeyFile(file, digestHex(current)));
  let names: string[];
  try {
    names = await fs.readdir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return []; // never rotated
    throw e;
  }
  const removed: string[] = [];
  for (const name of names.sort()) {
    const hex = PENDING_KEY.exec(name)?.[1];
    if (hex === undefined && !PENDING_TEMP.test(name)) continue;
    if (hex === digestHex(current)) continue;
    const p = path.join(dir, name);
    const retired = hex !== undefined && recorded.has(`sha256:${hex}`);
    if (!retired) {
      const st = await fs.lstat(p).catch(() => undefined);
      if (!st || now - st.mtimeMs < PENDING_KEY_GRACE_MS) continue;
    }
    await fs.rm(p, { force: true });
    removed.push(p);
    ctx.warn?.(
      retired
        ? `removed ${p}: a pending copy of a retired signing key (a retired key never signs again)`
        : hex !== undefined
          ? `removed ${p}: a pending signing key no rotation recorded (an \`alp keys rotate\` stopped before recording it); the installation key is unchanged (${current})`
          : `removed ${p}: a temporary file of a pending signing key a stopped \`alp keys rotate\` left`,
    );
  }
  return removed;
}

function retiredKey(source: InstallationKeySource, fingerprint: string, last: KeyEvent): Conflict {
  return new Conflict(
    `the signing key ${fingerprint} from ${source.describe} was retired: the installation signs with ${last.fingerprint} since ${last.timestamp}; give this process that key (a retired key never signs again)`,
    { reason: 'KEY_RETIRED', fingerprint, current: last.fingerprint, source: source.describe },
  );
}
