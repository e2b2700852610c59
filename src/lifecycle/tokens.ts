/**
 * Token administration (issue 19 B8): list, revoke, rotate. Human-only like minting (the access
 * table's `createToken`: the local operator or a human; no HTTP route). Every change is one
 * transaction with its token log entry, the fence check and the log head (audit/token-log.ts), and
 * updates this node's token cache at once (token-cache.ts); other nodes follow within the cache bound.
 * A listing reads the token index partition (`TOKENS`), never the whole table; tokens minted before the
 * index get their entries from one scan, the first time the index is needed (ensureTokenIndex).
 */
import { commitTokenChange, type TokenEventDraft } from '../audit/token-log.ts';
import { ConditionFailed, Conflict, MaintenanceInProgress, NotFound } from '../core/errors.ts';
import { randomToken } from '../core/ids.ts';
import { TOKEN_ENTRY_SK_PREFIX, TOKEN_INDEX_MARK_SK, TOKEN_SK, TOKENS_PK, tokenPk } from '../core/keys.ts';
import { cond, type Item, MAX_TRANSACT_OPS, queryAll, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { fenceCheck } from '../system/fence.ts';
import { assertActor } from './access.ts';
import type { Principal, PrincipalKind } from './model.ts';
import { tokenCacheOf } from './token-cache.ts';
import {
  isTokenId,
  looksLikeSecret,
  TOKEN_PREFIX,
  type TokenInfo,
  tokenEntryKey,
  tokenHash,
  tokenIdOf,
  tokenInfo,
  tokenItems,
  tokenKeyOf,
} from './token-records.ts';

const MARK_KEY = { PK: TOKENS_PK, SK: TOKEN_INDEX_MARK_SK };

export interface ListTokensOptions {
  principal?: string | undefined;
  /** Only tokens that still authenticate (not revoked, not expired). */
  activeOnly?: boolean | undefined;
}

/** Every token (oldest first), from the token index: principal, kind, label, dates, state — no secret. */
export async function listTokens(ctx: ServiceContext, by: Principal, opts: ListTokensOptions = {}): Promise<TokenInfo[]> {
  assertActor('createToken', by);
  await ensureTokenIndex(ctx);
  const entries = await queryAll(ctx.items, { pk: TOKENS_PK, sk: { beginsWith: TOKEN_ENTRY_SK_PREFIX }, consistent: true });
  const wanted = entries.filter((e) => opts.principal === undefined || e.principal_id === opts.principal);
  const items = wanted.length === 0 ? [] : await ctx.items.batchGet(wanted.map((e) => tokenKeyOf(e.token_hash as string)));
  const nowMs = ctx.clock.now().getTime();
  return items
    .map((it) => tokenInfo(it, nowMs))
    .filter((t) => !opts.activeOnly || t.state === 'active')
    .sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.token_id < b.token_id ? -1 : 1));
}

/** The token a reference names: a token id (`tok_…`) or the secret itself (`alp_…`). NOT_FOUND else. */
async function findToken(ctx: ServiceContext, ref: string): Promise<{ hash: string; item: Item; id: string }> {
  let hash: string | undefined;
  if (looksLikeSecret(ref)) hash = tokenHash(ref);
  else if (isTokenId(ref)) {
    await ensureTokenIndex(ctx);
    const entry = await ctx.items.get(tokenEntryKey(ref), { consistent: true });
    hash = entry?.token_hash as string | undefined;
  }
  const item = hash === undefined ? undefined : await ctx.items.get(tokenKeyOf(hash), { consistent: true });
  if (!item || hash === undefined) {
    const shown = looksLikeSecret(ref) ? `${TOKEN_PREFIX}…` : JSON.stringify(ref);
    throw new NotFound(`no token ${shown} (name a token by the id \`alp token list\` shows, tok_…)`);
  }
  return { hash, item, id: tokenIdOf(hash) };
}

function principalOfItem(item: Item): Principal {
  return { id: item.principal_id as string, kind: item.kind as PrincipalKind };
}

function revocation(item: Item, by: Principal, at: string, extra: Record<string, unknown> = {}): TransactOp {
  return {
    op: 'update',
    key: { PK: item.PK, SK: item.SK },
    update: { set: { revoked_at: at, revoked_by: { id: by.id, kind: by.kind }, ...extra } },
    condition: cond.and(cond.attrExists('principal_id'), cond.attrNotExists('revoked_at')),
  };
}

export interface RevokeResult {
  token_id: string;
  principal: Principal;
  revoked_at: string;
  /** It was revoked before this call (nothing written). */
  already_revoked: boolean;
}

/**
 * Revokes a token (by id or secret): refused at once on this node, on every other node within the
 * cache bound. Revoking a revoked token changes nothing and says so.
 */
export async function revokeTokenRef(ctx: ServiceContext, ref: string, by: Principal, reason?: string): Promise<RevokeResult> {
  assertActor('createToken', by);
  const { hash, item, id } = await findToken(ctx, ref);
  const principal = principalOfItem(item);
  if (item.revoked_at !== undefined) return { token_id: id, principal, revoked_at: item.revoked_at as string, already_revoked: true };
  // Dropped before and after the write; a lookup that read before the revocation does not cache it.
  const cache = tokenCacheOf(ctx.items);
  cache.invalidate(hash);
  const at = ctx.clock.now().toISOString();
  const event: TokenEventDraft = { action: 'revoked', token_id: id, principal_id: principal.id, kind: principal.kind, by, reason };
  try {
    await commitTokenChange(ctx, [revocation(item, by, at)], [event], principal.id);
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 0) throw new Conflict(`token ${id} was revoked concurrently`);
    throw e;
  } finally {
    cache.invalidate(hash);
  }
  return { token_id: id, principal, revoked_at: at, already_revoked: false };
}

export interface RotateResult {
  /** The new secret, shown once. */
  token: string;
  token_id: string;
  replaces: string;
  principal: Principal;
  expires_at?: string;
}

/**
 * A new secret for the same principal, kind and label; the old token is revoked in the same
 * transaction. The new token lives as long as the old one was given (its expires_at − created_at; no
 * expiry if it had none), or `expiresInMs` when given (null: no expiry).
 */
export async function rotateToken(
  ctx: ServiceContext,
  ref: string,
  by: Principal,
  opts: { expiresInMs?: number | null } = {},
): Promise<RotateResult> {
  assertActor('createToken', by);
  const { hash, item, id } = await findToken(ctx, ref);
  if (item.revoked_at !== undefined) throw new Conflict(`token ${id} is revoked; create a new one with \`alp token create\``);
  const principal = principalOfItem(item);
  const nowMs = ctx.clock.now().getTime();
  const at = new Date(nowMs).toISOString();
  const oldLifetime = typeof item.expires_at === 'string' ? Date.parse(item.expires_at) - Date.parse(item.created_at as string) : undefined;
  const lifetime = opts.expiresInMs !== undefined ? opts.expiresInMs : (oldLifetime ?? null);
  const expiresAt = lifetime === null ? undefined : new Date(nowMs + lifetime).toISOString();
  const secret = `${TOKEN_PREFIX}${randomToken(32)}`;
  const newHash = tokenHash(secret);
  const label = typeof item.label === 'string' ? item.label : undefined;
  const fresh = tokenItems(newHash, principal, { createdAt: at, createdBy: by, label, expiresAt, replaces: id });
  const newId = fresh.token.token_id as string;
  const ops: TransactOp[] = [
    revocation(item, by, at, { replaced_by: newId }),
    { op: 'put', item: fresh.token, condition: cond.notExists() },
    { op: 'put', item: fresh.entry, condition: cond.notExists() },
  ];
  const event: TokenEventDraft = {
    action: 'rotated',
    token_id: newId,
    replaces: id,
    principal_id: principal.id,
    kind: principal.kind,
    by,
    label,
    expires_at: expiresAt,
  };
  const cache = tokenCacheOf(ctx.items);
  cache.invalidate(hash);
  try {
    await commitTokenChange(ctx, ops, [event], principal.id);
  } catch (e) {
    if (e instanceof ConditionFailed) throw new Conflict(`token ${id} changed concurrently; retry`);
    throw e;
  } finally {
    cache.invalidate(hash);
  }
  tokenCacheOf(ctx.items).set(newHash, principal, nowMs, undefined, expiresAt === undefined ? undefined : Date.parse(expiresAt));
  return { token: secret, token_id: newId, replaces: id, principal, ...(expiresAt ? { expires_at: expiresAt } : {}) };
}

/**
 * Gives every token minted before the token index (issue 19) its index entry: once per installation,
 * one scan of the table, then the mark `TOKENS` / `INDEXED`. Entries are derived from their token
 * items, so a repeated or concurrent backfill writes the same thing. Each batch checks the fence.
 */
export async function ensureTokenIndex(ctx: ServiceContext): Promise<void> {
  if (await ctx.items.get(MARK_KEY, { consistent: true })) return;
  const write = (ops: TransactOp[]) =>
    ctx.items.transactWrite([...ops, fenceCheck(ctx)]).catch((e) => {
      if (e instanceof ConditionFailed && e.failedIndex === ops.length) throw new MaintenanceInProgress();
      throw e;
    });
  const pending: Item[] = [];
  const flush = async () => {
    if (pending.length > 0) await write(pending.splice(0).map((item): TransactOp => ({ op: 'put', item })));
  };
  let cursor: string | undefined;
  let indexed = 0;
  do {
    const page = await ctx.items.scan(cursor ? { cursor } : {});
    for (const item of page.items) {
      if (item.type !== 'token' || item.SK !== TOKEN_SK) continue;
      const hash = item.PK.slice(tokenPk('').length);
      pending.push(legacyEntry(item, hash));
      indexed += 1;
      if (pending.length >= MAX_TRANSACT_OPS - 1) await flush();
    }
    cursor = page.cursor;
  } while (cursor);
  await flush();
  await write([{ op: 'put', item: { ...MARK_KEY, type: 'token_index_mark', indexed_at: ctx.clock.now().toISOString(), tokens: indexed } }]);
}

function legacyEntry(item: Item, hash: string): Item {
  return tokenItems(hash, principalOfItem(item), {
    createdAt: item.created_at as string,
    createdBy: item.created_by as Principal,
  }).entry;
}
