import { randomBytes } from 'node:crypto';
import { monotonicFactory } from 'ulidx';
import type { Clock } from './clock.ts';

const ULID_RE = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const nextUlid = monotonicFactory();

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
