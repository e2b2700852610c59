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

/** A bearer token's shape (`alp_` + 32 random bytes in base64url), or anything long enough to be one. */
export const TOKEN_LIKE = /alp_[A-Za-z0-9_-]{20,}/g;

/**
 * Replaces every token-shaped string: log lines and error lines never carry a bearer token, even one a
 * client or user put where it does not belong (a path, a query string, a request id, a JSON field).
 */
export function redactTokens(s: string): string {
  return s.includes('alp_') ? s.replace(TOKEN_LIKE, 'alp_[redacted]') : s;
}
