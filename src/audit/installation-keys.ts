/**
 * The installation key as others see it (`alp keys show`, `GET /v1/keys`), and in-toto statements
 * signed with it as DSSE envelopes (issue 20 items 2–3).
 *
 * A public key is given three ways, each enough to verify: the C2SP verifier key string
 * `<name>+<key hash>+<base64(0x01 || key)>` (checkpoints, Go's sumdb/note), the raw 32-byte Ed25519
 * key in base64 (DSSE envelopes: any Ed25519 library), and its fingerprint `sha256:<hex of SHA-256 of
 * the raw key>`, which is also the envelopes' `keyid` — a hint for choosing a key, never trusted.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from '../core/canonical-json.ts';
import type { ServiceContext } from '../system/context.ts';
import { installationSigner } from '../system/installation-key.ts';
import type { Signer } from '../system/signing-key.ts';
import { type DsseEnvelope, IN_TOTO_PAYLOAD_TYPE, signEnvelope } from './dsse.ts';
import { verifierKey } from './tlog/note.ts';

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

export function keyFingerprint(publicKey: Uint8Array): string {
  return `sha256:${createHash('sha256').update(publicKey).digest('hex')}`;
}

export function publicKeyView(signer: Pick<Signer, 'name' | 'publicKey'>): PublicKeyView {
  return {
    name: signer.name,
    algorithm: 'ed25519',
    verifier_key: verifierKey(signer.name, signer.publicKey),
    public_key: Buffer.from(signer.publicKey).toString('base64'),
    fingerprint: keyFingerprint(signer.publicKey),
  };
}

/** The installation's public keys (one today; a list so that a rotation can show the old beside the new). */
export async function installationKeys(ctx: ServiceContext): Promise<{ keys: PublicKeyView[] }> {
  return { keys: [publicKeyView(await installationSigner(ctx))] };
}

/**
 * An in-toto statement as a DSSE envelope signed by the installation key. The payload is the
 * statement's canonical JSON, so the same statement always gives the same envelope (Ed25519 is
 * deterministic).
 */
export async function signStatement(ctx: ServiceContext, statement: Record<string, unknown>): Promise<DsseEnvelope> {
  const signer = await installationSigner(ctx);
  return signEnvelope(IN_TOTO_PAYLOAD_TYPE, Buffer.from(canonicalJson(statement), 'utf8'), signer, keyFingerprint(signer.publicKey));
}
