import { createHash, type Hash } from 'node:crypto';
import { InvalidInput } from './errors.ts';

/** `sha256:` followed by 64 lowercase hex digits: the only digest form ALP stores or accepts. */
export type Digest = `sha256:${string}`;

export const DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;
/** Finds digests inside arbitrary text (content scans); global, so reset lastIndex between uses. */
export const DIGEST_SCAN_PATTERN = /sha256:[0-9a-f]{64}/g;

export function isDigest(value: unknown): value is Digest {
  return typeof value === 'string' && DIGEST_PATTERN.test(value);
}

export function parseDigest(value: string): Digest {
  if (!isDigest(value)) throw new InvalidInput(`not a sha256 digest: ${JSON.stringify(value.slice(0, 80))}`);
  return value;
}

export function formatDigest(hex: string): Digest {
  return parseDigest(`sha256:${hex.toLowerCase()}`);
}

export function digestHex(d: Digest): string {
  return d.slice('sha256:'.length);
}

export function sha256(data: string | Uint8Array): Digest {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/** Incremental digest and byte count, fed chunk by chunk while streaming. */
export class DigestAccumulator {
  private readonly hash: Hash = createHash('sha256');
  size = 0;

  update(chunk: Uint8Array): void {
    this.hash.update(chunk);
    this.size += chunk.byteLength;
  }

  digest(): Digest {
    return `sha256:${this.hash.digest('hex')}`;
  }
}

/** RFC 9530 `sha-256=:base64:` form of a digest, for Repr-Digest / Content-Digest headers. */
export function toStructuredDigest(d: Digest): string {
  return `sha-256=:${Buffer.from(digestHex(d), 'hex').toString('base64')}:`;
}

/** Reads the sha-256 member of an RFC 9530 Repr-Digest / Content-Digest header, if any. */
export function fromStructuredDigest(header: string): Digest | undefined {
  for (const member of header.split(',')) {
    const m = /^\s*sha-256\s*=\s*:([A-Za-z0-9+/=]+):\s*$/.exec(member);
    if (m?.[1]) {
      const bytes = Buffer.from(m[1], 'base64');
      if (bytes.length !== 32) throw new InvalidInput('Repr-Digest sha-256 value must be 32 bytes');
      return `sha256:${bytes.toString('hex')}`;
    }
  }
  return undefined;
}
