/**
 * C2SP signed notes with Ed25519 (issue 20 item 2), as Go's golang.org/x/mod/sumdb/note reads them.
 *
 *   <text, ending in \n>
 *   \n
 *   — <key name> <base64(key hash (4 bytes, big-endian) || Ed25519 signature of the text)>\n
 *
 * key hash = the first 4 bytes of SHA-256(key name || 0x0A || 0x01 || public key), 0x01 being the
 * Ed25519 algorithm byte; the verifier key, the public form an operator pins, is
 * `<name>+<8 hex digits of the key hash>+<base64(0x01 || public key)>`.
 */
import { createHash, verify } from 'node:crypto';
import { IntegrityError, InvalidInput } from '../../core/errors.ts';
import { ED25519_PUBLIC_KEY_SIZE, ED25519_SIGNATURE_SIZE, ed25519PublicKey, type Signer } from '../../system/signing-key.ts';

const ALG_ED25519 = 0x01;
const SIGNATURE_PREFIX = '\u2014 ';
/** Open refuses a note with more signature lines than this, as Go's note.Open does. */
const MAX_SIGNATURES = 100;

export interface NoteVerifier {
  name: string;
  keyHash: number;
  publicKey: Uint8Array;
}

/** No lone surrogate: the string has a UTF-8 encoding. */
function isWellFormed(s: string): boolean {
  return Buffer.from(s, 'utf8').toString('utf8') === s;
}

/** A key name: non-empty, no Unicode space, no '+'. */
export function isValidKeyName(name: string): boolean {
  return name.length > 0 && !/[\s\u0085+]/u.test(name) && isWellFormed(name);
}

/** The 32-bit key hash of an Ed25519 public key under `name`. */
export function keyHash(name: string, publicKey: Uint8Array): number {
  return createHash('sha256')
    .update(name, 'utf8')
    .update('\n')
    .update(Uint8Array.of(ALG_ED25519))
    .update(publicKey)
    .digest()
    .readUInt32BE(0);
}

/** The verifier key string: `<name>+<hex key hash>+<base64(0x01 || public key)>`. */
export function verifierKey(name: string, publicKey: Uint8Array): string {
  checkKey(name, publicKey);
  const hash = keyHash(name, publicKey).toString(16).padStart(8, '0');
  return `${name}+${hash}+${Buffer.concat([Uint8Array.of(ALG_ED25519), publicKey]).toString('base64')}`;
}

export function verifierOf(signer: Pick<Signer, 'name' | 'publicKey'>): NoteVerifier {
  checkKey(signer.name, signer.publicKey);
  return { name: signer.name, keyHash: keyHash(signer.name, signer.publicKey), publicKey: signer.publicKey };
}

/** Parses a verifier key string, checking its key hash and algorithm. */
export function parseVerifierKey(vkey: string): NoteVerifier {
  // Split at the first two '+' only: the base64 key may itself hold '+'.
  const [name = '', hash16 = ''] = vkey.split('+', 2);
  const key64 = vkey.slice(name.length + hash16.length + 2);
  const key = Buffer.from(key64, 'base64');
  if (!isValidKeyName(name) || !/^[0-9a-f]{8}$/i.test(hash16) || key.length === 0 || key.toString('base64') !== key64)
    throw new InvalidInput(`not a verifier key (<name>+<8 hex digits>+<base64 key>): ${vkey.slice(0, 120)}`);
  if (key[0] !== ALG_ED25519 || key.length !== 1 + ED25519_PUBLIC_KEY_SIZE)
    throw new InvalidInput('the verifier key is not an Ed25519 key (algorithm byte 0x01 and 32 bytes)');
  const publicKey = key.subarray(1);
  const expected = keyHash(name, publicKey);
  if (Number.parseInt(hash16, 16) !== expected) throw new InvalidInput('the verifier key hash does not match its name and key');
  return { name, keyHash: expected, publicKey };
}

function checkKey(name: string, publicKey: Uint8Array): void {
  if (!isValidKeyName(name)) throw new InvalidInput(`not a signed-note key name (non-empty, no spaces, no '+'): ${JSON.stringify(name)}`);
  if (publicKey.length !== ED25519_PUBLIC_KEY_SIZE) throw new InvalidInput(`an Ed25519 public key has 32 bytes, not ${publicKey.length}`);
}

/** Text a note may carry: valid UTF-8, no control character but newline, ending in a newline. */
function checkText(text: string): void {
  if (text.length === 0 || !text.endsWith('\n')) throw new InvalidInput('a note text must be non-empty and end with a newline');
  if (/[\u0000-\u0009\u000b-\u001f]/.test(text) || !isWellFormed(text))
    throw new InvalidInput('a note text may not hold control characters other than newline');
}

/** The signed note: `text`, a blank line, and `signer`'s signature line. */
export async function signNote(text: string, signer: Signer): Promise<string> {
  checkText(text);
  const { name, keyHash: hash } = verifierOf(signer);
  const signature = await signer.sign(Buffer.from(text, 'utf8'));
  if (signature.length !== ED25519_SIGNATURE_SIZE)
    throw new IntegrityError(`the signer returned ${signature.length} bytes, not an Ed25519 signature`);
  const prefix = Buffer.alloc(4);
  prefix.writeUInt32BE(hash, 0);
  return `${text}\n${SIGNATURE_PREFIX}${name} ${Buffer.concat([prefix, signature]).toString('base64')}\n`;
}

export interface SignatureLine {
  name: string;
  keyHash: number;
  signature: Uint8Array;
}

/** Splits a signed note into its text and signature lines (INVALID when it is not shaped as one). */
export function splitNote(note: string): { text: string; signatures: SignatureLine[] } {
  const split = note.lastIndexOf('\n\n');
  if (split < 0 || !note.endsWith('\n')) throw new InvalidInput('not a signed note: no blank line before the signatures');
  const text = note.slice(0, split + 1);
  checkText(text);
  const lines = note.slice(split + 2, -1).split('\n');
  if (lines.length > MAX_SIGNATURES) throw new InvalidInput(`a signed note with ${lines.length} signatures (at most ${MAX_SIGNATURES})`);
  const signatures = lines.map((line) => {
    const [name = '', b64 = '', ...rest] = line.startsWith(SIGNATURE_PREFIX) ? line.slice(SIGNATURE_PREFIX.length).split(' ') : [];
    const raw = Buffer.from(b64, 'base64');
    if (rest.length > 0 || !isValidKeyName(name) || raw.length < 5 || raw.toString('base64') !== b64)
      throw new InvalidInput(`not a signature line: ${JSON.stringify(line.slice(0, 120))}`);
    return { name, keyHash: raw.readUInt32BE(0), signature: raw.subarray(4) };
  });
  return { text, signatures };
}

/**
 * The text of `note` when `verifier`'s key signed it. Signatures by other keys are ignored (a
 * witness's cosignature, say); a signature that names the key but does not verify is INTEGRITY, as is
 * a note the key did not sign.
 */
export function openNote(note: string, verifier: NoteVerifier): string {
  const { text, signatures } = splitNote(note);
  const mine = signatures.filter((s) => s.name === verifier.name && s.keyHash === verifier.keyHash);
  if (mine.length === 0)
    throw new IntegrityError(`the note is not signed by ${verifier.name} (key ${verifier.keyHash.toString(16).padStart(8, '0')})`);
  const key = ed25519PublicKey(verifier.publicKey);
  const message = Buffer.from(text, 'utf8');
  for (const s of mine)
    if (s.signature.length !== ED25519_SIGNATURE_SIZE || !verify(null, message, key, s.signature))
      throw new IntegrityError(`the signature by ${verifier.name} does not verify: the note was altered or signed by another key`);
  return text;
}
