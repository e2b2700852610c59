import { randomBytes } from 'node:crypto';
import { monotonicFactory } from 'ulidx';
import type { Clock } from './clock.ts';

const ULID_RE = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/**
 * Uniform floats in [0, 1) from the same CSPRNG ulidx uses by default, drawn 4 KiB at a time: ulidx
 * asks for one value per character (16 for each new millisecond), and one getRandomValues call each
 * cost ~60 µs of main thread per creation (issue 18's profile).
 */
const randomPool = { bytes: Buffer.alloc(0), at: 0 };
function pooledRandom(): number {
  if (randomPool.at + 4 > randomPool.bytes.length) {
    randomPool.bytes = randomBytes(4096);
    randomPool.at = 0;
  }
  const value = randomPool.bytes.readUInt32BE(randomPool.at);
  randomPool.at += 4;
  return value / 0x1_0000_0000;
}

const nextUlid = monotonicFactory(pooledRandom);

/** A ULID whose time part comes from the injected clock, monotonic within this process. */
export function newId(clock: Clock): string {
  return nextUlid(clock.now().getTime());
}

export function isUlid(value: string): boolean {
  return ULID_RE.test(value);
}

/** An unguessable token (lease tokens, bearer tokens): 32 random bytes, base64url. */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

// The redaction of token-shaped strings (plain and percent-encoded) lives in redact.ts.
export { redactTokens, TOKEN_LIKE } from './redact.ts';
