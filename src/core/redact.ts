/**
 * Secret redaction for every line ALP writes about a request or a command (server logs, CLI error
 * lines). A bearer token is recognised by its shape, on the text as written AND on its percent-decoded
 * forms: a client can spell `alp_…` as `alp%5F…`, encode every byte (`%61%6C%70%5F…`) or encode twice
 * (`%2561…`), and the server, which decodes before it resolves, would still see the token.
 */

/** A bearer token's shape (`alp_` + 32 random bytes in base64url), or anything long enough to be one. */
export const TOKEN_LIKE = /alp_[A-Za-z0-9_-]{20,}/g;
const HAS_TOKEN = /alp_[A-Za-z0-9_-]{20,}/;

const REDACTED = 'alp_[redacted]';

/**
 * A run of characters that can spell (part of) a token once decoded: the token alphabet plus
 * percent-escapes, containing at least one escape. Decoded runs that look like a token are replaced.
 */
const ENCODED_RUN = /[A-Za-z0-9._~%-]*%[0-9A-Fa-f]{2}[A-Za-z0-9._~%-]*/g;

/** Encoding layers undone before giving up (a client may encode an encoded token again). */
const MAX_DECODE_ROUNDS = 4;

/**
 * One round of percent-decoding, byte by byte into code units: enough to reveal an ASCII token, and
 * never throws on a malformed sequence (`%zz`, a lone `%`, invalid UTF-8 are kept as they are).
 */
function percentDecodeOnce(s: string): string {
  return s.replace(/%([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

function decodesToToken(run: string): boolean {
  let current = run;
  for (let round = 0; round < MAX_DECODE_ROUNDS; round++) {
    const next = percentDecodeOnce(current);
    if (next === current) return false;
    if (HAS_TOKEN.test(next)) return true;
    current = next;
  }
  return false;
}

/**
 * Replaces every token-shaped string, written plainly or percent-encoded: log lines and error lines
 * never carry a bearer token, even one a client or user put where it does not belong (a path, a query
 * string, a request id, a JSON field).
 */
export function redactTokens(s: string): string {
  const decodedChecked = s.includes('%') ? s.replace(ENCODED_RUN, (run) => (decodesToToken(run) ? REDACTED : run)) : s;
  return decodedChecked.includes('alp_') ? decodedChecked.replace(TOKEN_LIKE, REDACTED) : decodedChecked;
}
