/**
 * The installation's signing key (issue 20 item 2): Ed25519, used for the transparency log's signed
 * checkpoints (and later the DSSE attestations). ALP asks only for a `Signer` — a key name, the raw
 * public key and a sign operation — so a host can keep the private key in a KMS or HSM and hand ALP
 * an implementation of the interface; ALP never needs the private bytes.
 *
 * The default is a key file: generated on first use (PKCS#8 PEM, mode 0600, in a 0700 directory),
 * never overwritten, and refused when it belongs to someone else or group or others may read it.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { constants as C, promises as fs } from 'node:fs';
import path from 'node:path';
import { IntegrityError, InvalidInput } from '../core/errors.ts';
import { fsyncDir } from '../core/fsync.ts';

export const ED25519_PUBLIC_KEY_SIZE = 32;
export const ED25519_SIGNATURE_SIZE = 64;

/** What signs: implementable by a KMS (ALP never sees the private key). */
export interface Signer {
  /** The key's name in signed notes: non-empty, no whitespace, no '+'. */
  readonly name: string;
  /** The raw 32-byte Ed25519 public key. */
  readonly publicKey: Uint8Array;
  /** The 64-byte Ed25519 signature of `message` (pure Ed25519, RFC 8032: the message itself, not a digest). */
  sign(message: Uint8Array): Promise<Uint8Array>;
}

/** The raw 32 bytes of an Ed25519 public key object. */
export function rawEd25519PublicKey(key: KeyObject): Uint8Array {
  if (key.asymmetricKeyType !== 'ed25519') throw new InvalidInput(`not an Ed25519 key: ${String(key.asymmetricKeyType)}`);
  const x = (key.type === 'private' ? createPublicKey(key) : key).export({ format: 'jwk' }).x;
  if (typeof x !== 'string') throw new InvalidInput('the Ed25519 key has no public part');
  return Buffer.from(x, 'base64url');
}

/** A public key object from the raw 32 bytes (for verifying). */
export function ed25519PublicKey(raw: Uint8Array): KeyObject {
  if (raw.length !== ED25519_PUBLIC_KEY_SIZE) throw new InvalidInput(`an Ed25519 public key has 32 bytes, not ${raw.length}`);
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(raw).toString('base64url') }, format: 'jwk' });
}

/** A Signer over a private key held in this process. */
export function keySigner(name: string, privateKey: KeyObject): Signer {
  const publicKey = rawEd25519PublicKey(privateKey);
  return {
    name,
    publicKey,
    sign: async (message) => new Uint8Array(sign(null, message, privateKey)),
  };
}

export interface FileSigner extends Signer {
  readonly file: string;
  /** Whether this call generated the key (false: it was already there). */
  readonly created: boolean;
}

/**
 * The signer whose private key is in `file`, generating the key if there is none. Two processes
 * racing to create it end with one key: each writes a private temp file and links it to `file`, which
 * only the first link wins; the other reads the winner's.
 */
export async function openFileSigner(file: string, name: string): Promise<FileSigner> {
  const existing = await readKeyFile(file);
  if (existing) return { ...keySigner(name, existing), file, created: false };
  const created = await createKeyFile(file);
  const key = created ?? (await readKeyFile(file));
  if (!key) throw new IntegrityError(`the signing key ${file} vanished while it was being created`);
  return { ...keySigner(name, key), file, created: created !== undefined };
}

/** The private key in `file`, or undefined when there is no file (refused as openFileSigner refuses it). */
export async function readKeyFile(file: string): Promise<KeyObject | undefined> {
  let fh: fs.FileHandle;
  try {
    fh = await fs.open(file, C.O_RDONLY | C.O_NOFOLLOW);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    if ((e as NodeJS.ErrnoException).code === 'ELOOP')
      throw new IntegrityError(`the signing key ${file} is a symbolic link: refusing to use it`);
    throw e;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new IntegrityError(`the signing key ${file} is not a regular file`);
    assertPrivate(file, st);
    const key = createPrivateKey(await fh.readFile('utf8'));
    if (key.asymmetricKeyType !== 'ed25519')
      throw new IntegrityError(`the signing key ${file} is ${String(key.asymmetricKeyType)}, not Ed25519`);
    return key;
  } finally {
    await fh.close();
  }
}

/** Refuses a key file another user owns, or one group or others have any permission on. */
function assertPrivate(file: string, st: { mode: number; uid: number }): void {
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid)
    throw new IntegrityError(`the signing key ${file} belongs to uid ${st.uid}, not to this process (uid ${uid}): refusing to use it`);
  const mode = st.mode & 0o777;
  if ((mode & 0o077) !== 0) {
    const octal = mode.toString(8).padStart(4, '0');
    throw new IntegrityError(
      `the signing key ${file} is open to other users (mode ${octal}): refusing to use it; run \`chmod 600 ${file}\``,
      {
        file,
        mode: octal,
      },
    );
  }
}

/** Generates a key into `file`; undefined when another process created the file first. */
async function createKeyFile(file: string): Promise<KeyObject | undefined> {
  return writeKeyFileOnce(file, generateKeyPairSync('ed25519').privateKey);
}

/**
 * Writes `privateKey` to `file` unless it exists (a private 0600 temp file in a 0700 directory,
 * fsynced, then linked to the name: the link is the commit). Returns the key when this call created
 * the file, undefined when the file was already there (left as it is).
 */
export async function writeKeyFileOnce(file: string, privateKey: KeyObject): Promise<KeyObject | undefined> {
  const dir = path.dirname(file);
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' });
  const tmp = path.join(dir, `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  const fh = await fs.open(tmp, 'wx', 0o600);
  try {
    // The mode given at creation is masked by the umask (which can only remove bits): make it exactly 0600.
    await fh.chmod(0o600);
    await fh.writeFile(pem, 'utf8');
    await fh.sync();
    await fh.close();
    try {
      await fs.link(tmp, file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return undefined;
      throw e;
    }
    await fsyncDir(dir);
    return privateKey;
  } finally {
    await fh.close().catch(() => {});
    await fs.rm(tmp, { force: true });
  }
}

/**
 * Where a rotation of the key in `file` keeps the next key until the rotation is recorded: beside it,
 * `pending/<hex of the new key's fingerprint>.ed25519.pem` (so the next open can find the key the
 * history names as current, and finish a rotation a crash interrupted).
 */
export function pendingKeyFile(file: string, fingerprintHex: string): string {
  return path.join(path.dirname(file), 'pending', `${fingerprintHex}.ed25519.pem`);
}

/**
 * Moves the pending key over `file` (rename: atomic; the old key is gone). False when `pending` is
 * not there (another process promoted it first, or it never was).
 */
export async function promotePendingKey(pending: string, file: string): Promise<boolean> {
  try {
    await fs.rename(pending, file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
  await fsyncDir(path.dirname(file));
  await fsyncDir(path.dirname(pending));
  return true;
}
