/**
 * What a bearer token is in the table (issue 19 B8; docs/data-model.md "Tokens"). The secret
 * (`alp_…`, 32 random bytes) is shown once and never stored; its sha256 names the token item
 * `TOKEN#{hash}` / `TOKEN` (principal, kind, label, created_at/by, expires_at?, last_used_at?,
 * revoked_at/by?, replaced_by?). The token id `tok_{first 16 hex of the hash}` names it to people
 * (list, revoke, rotate, the token log): it cannot be used to authenticate. The index entry
 * `TOKENS` / `ID#{token_id}` (written with the token) is what a listing reads instead of scanning.
 *
 * Lifetimes: an agent token expires after `ALP_AGENT_TOKEN_EXPIRES_IN` (default 90d; `never` for
 * none) unless its creator gives `--expires-in`; human and service tokens only when given.
 */
import { parseDuration } from '../core/clock.ts';
import { digestHex, sha256 } from '../core/digest.ts';
import { InvalidInput } from '../core/errors.ts';
import { TOKEN_SK, TOKENS_PK, tokenEntrySk, tokenPk } from '../core/keys.ts';
import type { Item } from '../store/item-store.ts';
import type { Principal, PrincipalKind } from './model.ts';

export const TOKEN_PREFIX = 'alp_';
export const TOKEN_ID_PREFIX = 'tok_';
const TOKEN_ID_HEX = 16;
const TOKEN_ID_PATTERN = new RegExp(`^${TOKEN_ID_PREFIX}[0-9a-f]{${TOKEN_ID_HEX}}$`);

export const DEFAULT_AGENT_TOKEN_LIFETIME = '90d';
/** "Last used" is written at most once per this long per token (never on every request). */
export const LAST_USED_EVERY_MS = 60 * 60 * 1000;
/** The longest lifetime `--expires-in` accepts (10 years): an expiry must stay a valid date. */
const MAX_LIFETIME_MS = 3650 * 24 * 60 * 60 * 1000;

export type TokenState = 'active' | 'expired' | 'revoked';

/** What `alp token list` shows of a token: never its secret nor its hash. */
export interface TokenInfo {
  token_id: string;
  principal: Principal;
  label?: string;
  created_at: string;
  created_by?: Principal;
  expires_at?: string;
  last_used_at?: string;
  revoked_at?: string;
  revoked_by?: Principal;
  /** The token a rotation replaced this one with. */
  replaced_by?: string;
  state: TokenState;
}

export function tokenHash(secret: string): string {
  return digestHex(sha256(secret));
}

export function tokenIdOf(hash: string): string {
  return `${TOKEN_ID_PREFIX}${hash.slice(0, TOKEN_ID_HEX)}`;
}

export function isTokenId(s: string): boolean {
  return TOKEN_ID_PATTERN.test(s);
}

export function looksLikeSecret(s: string): boolean {
  return s.startsWith(TOKEN_PREFIX) && s.length <= 200;
}

export const tokenKeyOf = (hash: string) => ({ PK: tokenPk(hash), SK: TOKEN_SK });
export const tokenEntryKey = (tokenId: string) => ({ PK: TOKENS_PK, SK: tokenEntrySk(tokenId) });

/** A lifetime as `--expires-in` gives it: a duration (90d, 12h, 30m, 2w) or `never` (null). */
export function parseLifetime(text: string, name = '--expires-in'): number | null {
  if (text.trim() === 'never') return null;
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0 || ms > MAX_LIFETIME_MS)
    throw new InvalidInput(`${name} must be a duration such as 90d, 12h or 30m (at most 3650d), or never; got ${JSON.stringify(text)}`);
  return ms;
}

/** The default lifetime of an agent token (ALP_AGENT_TOKEN_EXPIRES_IN, default 90d), null for none. */
export function agentTokenLifetime(env: NodeJS.ProcessEnv = process.env): number | null {
  const raw = env.ALP_AGENT_TOKEN_EXPIRES_IN;
  return parseLifetime(raw === undefined || raw === '' ? DEFAULT_AGENT_TOKEN_LIFETIME : raw, 'ALP_AGENT_TOKEN_EXPIRES_IN');
}

/** The lifetime a new token gets: the one given (null: none), else the kind's default. */
export function lifetimeFor(kind: PrincipalKind, given: number | null | undefined, env: NodeJS.ProcessEnv = process.env): number | null {
  if (given !== undefined) return given;
  return kind === 'agent' ? agentTokenLifetime(env) : null;
}

export function expiresAtMs(item: Item): number | undefined {
  return typeof item.expires_at === 'string' ? Date.parse(item.expires_at) : undefined;
}

export function tokenStateAt(item: Item, nowMs: number): TokenState {
  if (item.revoked_at !== undefined) return 'revoked';
  const exp = expiresAtMs(item);
  return exp !== undefined && nowMs >= exp ? 'expired' : 'active';
}

/** The token item and its index entry for a new token of `principal`. */
export function tokenItems(
  hash: string,
  principal: Principal,
  fields: { createdAt: string; createdBy: Principal; label?: string | undefined; expiresAt?: string | undefined; replaces?: string },
): { token: Item; entry: Item } {
  const token_id = tokenIdOf(hash);
  const token: Item = {
    ...tokenKeyOf(hash),
    type: 'token',
    token_id,
    principal_id: principal.id,
    kind: principal.kind,
    created_at: fields.createdAt,
    created_by: fields.createdBy,
    ...(fields.label ? { label: fields.label } : {}),
    ...(fields.expiresAt ? { expires_at: fields.expiresAt } : {}),
    ...(fields.replaces ? { replaces: fields.replaces } : {}),
  };
  const entry: Item = {
    ...tokenEntryKey(token_id),
    type: 'token_entry',
    token_id,
    token_hash: hash,
    principal_id: principal.id,
    kind: principal.kind,
    created_at: fields.createdAt,
  };
  return { token, entry };
}

export function tokenInfo(item: Item, nowMs: number): TokenInfo {
  const hash = item.PK.slice(tokenPk('').length);
  const opt = <K extends keyof TokenInfo>(k: K, v: unknown) => (v === undefined ? {} : ({ [k]: v } as Pick<TokenInfo, K>));
  return {
    token_id: tokenIdOf(hash),
    principal: { id: item.principal_id as string, kind: item.kind as PrincipalKind },
    ...opt('label', item.label),
    created_at: item.created_at as string,
    ...opt('created_by', item.created_by),
    ...opt('expires_at', item.expires_at),
    ...opt('last_used_at', item.last_used_at),
    ...opt('revoked_at', item.revoked_at),
    ...opt('revoked_by', item.revoked_by),
    ...opt('replaced_by', item.replaced_by),
    state: tokenStateAt(item, nowMs),
  };
}
