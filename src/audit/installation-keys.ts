/**
 * The installation key as others see it (`alp keys show`, `GET /v1/keys`), and in-toto statements
 * signed with it as DSSE envelopes (issue 20 items 2–3).
 *
 * A public key is given three ways, each enough to verify: the C2SP verifier key string
 * `<name>+<key hash>+<base64(0x01 || key)>` (checkpoints, Go's sumdb/note), the raw 32-byte Ed25519
 * key in base64 (DSSE envelopes: any Ed25519 library), and its fingerprint `sha256:<hex of SHA-256 of
 * the raw key>`, which is also the envelopes' `keyid` — a hint for choosing a key, never trusted.
 * After a rotation (key-rotation.ts, key-history.ts) the retired keys are listed beside the current
 * one, from the key log (key-log.ts), so what they signed stays verifiable.
 */
import { canonicalJson } from '../core/canonical-json.ts';
import type { ServiceContext } from '../system/context.ts';
import { installationSigner } from '../system/installation-key.ts';
import type { Signer } from '../system/signing-key.ts';
import { type DsseEnvelope, IN_TOTO_PAYLOAD_TYPE, signEnvelope } from './dsse.ts';
import { type KeyEvent, keyFingerprint, readKeyLog } from './key-log.ts';
import { verifierKey } from './tlog/note.ts';

export { keyFingerprint };

export interface PublicKeyView {
  /** The key name: the log origin `alp.local/<installation id>`. */
  name: string;
  algorithm: 'ed25519';
  /** The C2SP signed-note verifier key. */
  verifier_key: string;
  /** The raw 32-byte Ed25519 public key, base64. */
  public_key: string;
  /** `sha256:` and the hex SHA-256 of the raw public key; the `keyid` of every envelope it signs. */
  fingerprint: string;
}

/** A key as `GET /v1/keys` lists it: current or retired, with when the key log says so. */
export interface InstallationKeyView extends PublicKeyView {
  status: 'current' | 'retired';
  /** The timestamp of the entry that recorded the key (absent: not recorded, a context without the key log). */
  activated_at?: string;
  /** The timestamp of the entry that recorded its successor. */
  retired_at?: string;
  /** The entry that recorded it: its seq, action and whether the previous key cross-signed it. */
  recorded_by?: { seq: number; action: KeyEvent['action']; cross_signed: boolean };
}

/** A key log entry as `GET /v1/keys` gives it (the stored entry without its item keys). */
export type KeyHistoryEntry = KeyEvent;

export function publicKeyView(signer: Pick<Signer, 'name' | 'publicKey'>): PublicKeyView {
  return {
    name: signer.name,
    algorithm: 'ed25519',
    verifier_key: verifierKey(signer.name, signer.publicKey),
    public_key: Buffer.from(signer.publicKey).toString('base64'),
    fingerprint: keyFingerprint(signer.publicKey),
  };
}

function recordedView(e: KeyEvent, successor: KeyEvent | undefined): InstallationKeyView {
  return {
    name: e.key_name,
    algorithm: 'ed25519',
    verifier_key: e.verifier_key,
    public_key: e.public_key,
    fingerprint: e.fingerprint,
    status: successor ? 'retired' : 'current',
    activated_at: e.timestamp,
    ...(successor ? { retired_at: successor.timestamp } : {}),
    recorded_by: { seq: e.seq, action: e.action, cross_signed: e.cross_signed },
  };
}

/**
 * The installation's public keys, the current one first, then the retired ones newest first (a
 * verifier of something signed before a rotation finds its key by the `keyid` fingerprint), and the
 * key log itself (`history`, oldest first: the statements and cross-signatures to follow the
 * rotations).
 */
export async function installationKeys(ctx: ServiceContext): Promise<{ keys: InstallationKeyView[]; history: KeyHistoryEntry[] }> {
  const signer = await installationSigner(ctx);
  const log = await readKeyLog(ctx);
  const recorded = log.map((e, i) => recordedView(e, log[i + 1])).reverse();
  const current = keyFingerprint(signer.publicKey);
  const keys: InstallationKeyView[] =
    recorded[0]?.fingerprint === current ? recorded : [{ ...publicKeyView(signer), status: 'current' }, ...recorded.map(retire)];
  const history = log.map((e) => {
    const { PK: _pk, SK: _sk, type: _type, ...entry } = e as KeyEvent & Record<string, unknown>;
    return entry as KeyHistoryEntry;
  });
  return { keys, history };
}

const retire = (k: InstallationKeyView): InstallationKeyView => ({ ...k, status: 'retired' });

/**
 * An in-toto statement as a DSSE envelope signed by the installation key. The payload is the
 * statement's canonical JSON, so the same statement always gives the same envelope (Ed25519 is
 * deterministic).
 */
export async function signStatement(ctx: ServiceContext, statement: Record<string, unknown>): Promise<DsseEnvelope> {
  const signer = await installationSigner(ctx);
  return signEnvelope(IN_TOTO_PAYLOAD_TYPE, Buffer.from(canonicalJson(statement), 'utf8'), signer, keyFingerprint(signer.publicKey));
}
