/**
 * DSSE envelopes (Dead Simple Signing Envelope v1, github.com/secure-systems-lab/dsse), signed with
 * the installation key (issue 20 item 3):
 *
 *   PAE(type, body) = "DSSEv1" SP len(type) SP type SP len(body) SP body     (lengths in bytes, decimal)
 *   envelope        = {payload: base64(body), payloadType: type, signatures: [{keyid, sig: base64(Ed25519(PAE))}]}
 *
 * The signature covers the payload type and the exact payload bytes, never the JSON around them, so
 * a verifier decodes `payload`, recomputes PAE and checks the signature with the public key it pinned
 * (`GET /v1/keys`). `keyid` is only a hint (the key's SHA-256 fingerprint, keys.ts); ALP signs with
 * one key. Payloads are written as standard base64 with padding; `openEnvelope` accepts the URL-safe
 * alphabet too, as the protocol requires of verifiers.
 */
import { verify } from 'node:crypto';
import { IntegrityError, InvalidInput } from '../core/errors.ts';
import { ED25519_SIGNATURE_SIZE, ed25519PublicKey, type Signer } from '../system/signing-key.ts';

export const IN_TOTO_PAYLOAD_TYPE = 'application/vnd.in-toto+json';

export interface DsseSignature {
  keyid: string;
  sig: string;
}

export interface DsseEnvelope {
  payload: string;
  payloadType: string;
  signatures: DsseSignature[];
}

/** The pre-authentication encoding the signature covers. */
export function preAuthEncoding(payloadType: string, body: Uint8Array): Buffer {
  const type = Buffer.from(payloadType, 'utf8');
  return Buffer.concat([Buffer.from(`DSSEv1 ${type.length} `), type, Buffer.from(` ${body.length} `), body]);
}

/** An envelope of `body` signed by `signer`; `keyid` names its key (an unauthenticated hint). */
export async function signEnvelope(payloadType: string, body: Uint8Array, signer: Signer, keyid: string): Promise<DsseEnvelope> {
  const sig = await signer.sign(preAuthEncoding(payloadType, body));
  if (sig.length !== ED25519_SIGNATURE_SIZE) throw new IntegrityError(`the signer returned ${sig.length} bytes, not an Ed25519 signature`);
  return {
    payload: Buffer.from(body).toString('base64'),
    payloadType,
    signatures: [{ keyid, sig: Buffer.from(sig).toString('base64') }],
  };
}

/** Standard or URL-safe base64 (padding optional); INVALID for anything else. */
function decodeBase64(field: string, text: unknown): Buffer {
  if (typeof text !== 'string' || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(text) || text.replace(/=+$/, '').length % 4 === 1)
    throw new InvalidInput(`the envelope's ${field} is not base64`);
  return Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
}

/**
 * The payload of an envelope once a signature by `publicKey` (raw Ed25519) verifies over its PAE, and
 * its type is `payloadType`: INVALID when malformed, INTEGRITY when no signature verifies or the type
 * differs.
 */
export function openEnvelope(envelope: DsseEnvelope, publicKey: Uint8Array, payloadType: string): Buffer {
  if (typeof envelope?.payloadType !== 'string' || !Array.isArray(envelope.signatures))
    throw new InvalidInput('not a DSSE envelope: payload, payloadType and signatures are required');
  const body = decodeBase64('payload', envelope.payload);
  const pae = preAuthEncoding(envelope.payloadType, body);
  const key = ed25519PublicKey(publicKey);
  const verified = envelope.signatures.some((s) => {
    const sig = decodeBase64('signature', s?.sig);
    return sig.length === ED25519_SIGNATURE_SIZE && verify(null, pae, key, sig);
  });
  if (!verified) throw new IntegrityError('no signature of the envelope verifies with the key: it was altered or signed by another key');
  if (envelope.payloadType !== payloadType)
    throw new IntegrityError(`the envelope's payload type is ${JSON.stringify(envelope.payloadType)}, not ${payloadType}`);
  return body;
}
