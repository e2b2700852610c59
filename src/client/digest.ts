/**
 * Digests on the client, browser-safe: the `sha256:{hex}` form ALP records, the RFC 9530
 * `sha-256=:{base64}:` form of `Repr-Digest` (the server's reading of it is api/transfer.ts
 * `clientDigest`, core/digest.ts `fromStructuredDigest`), and hashing whole inputs.
 */
import type { Digest } from '../core/digest.ts';
import type { Sha256Factory } from './sha256.ts';

export type { Digest };

const DIGEST = /^sha256:[0-9a-f]{64}$/;

export function isDigest(v: unknown): v is Digest {
  return typeof v === 'string' && DIGEST.test(v);
}

export function hexOf(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** `sha-256=:…:` for a `sha256:{hex}` digest. */
export function toReprDigest(d: Digest): string {
  const hex = d.slice('sha256:'.length);
  let binary = '';
  for (let i = 0; i < hex.length; i += 2) binary += String.fromCharCode(Number.parseInt(hex.slice(i, i + 2), 16));
  return `sha-256=:${btoa(binary)}:`;
}

/** The sha-256 member of a `Repr-Digest` header as `sha256:{hex}`, or undefined when there is none or it is malformed. */
export function fromReprDigest(header: string | null): Digest | undefined {
  if (!header) return undefined;
  for (const member of header.split(',')) {
    const m = /^\s*sha-256\s*=\s*:([A-Za-z0-9+/=]+):\s*$/.exec(member);
    if (!m?.[1]) continue;
    let binary: string;
    try {
      binary = atob(m[1]);
    } catch {
      return undefined;
    }
    if (binary.length !== 32) return undefined;
    return `sha256:${hexOf(Uint8Array.from(binary, (c) => c.charCodeAt(0)))}`;
  }
  return undefined;
}

export function digestOfBytes(bytes: Uint8Array, hasher: Sha256Factory): Digest {
  const h = hasher();
  h.update(bytes);
  return `sha256:${h.hex()}`;
}
