/**
 * Principals and bearer tokens. A token is shown once; only its sha256 is stored (TOKEN#{hash}; the
 * token's items and lifetimes: token-records.ts; list, revoke, rotate: tokens.ts). A principal's kind
 * (human, agent, service) is fixed when it is first created.
 */
import os from 'node:os';
import { commitTokenChange } from '../audit/token-log.ts';
import { type Clock, systemClock } from '../core/clock.ts';
import { ConditionFailed, Conflict, InternalError, InvalidInput, Unauthenticated } from '../core/errors.ts';
import { randomToken } from '../core/ids.ts';
import { PRINCIPAL_NAME_SK, PRINCIPAL_SK, principalNamePk, principalPk } from '../core/keys.ts';
import { cond, type Item, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { fenceCheck } from '../system/fence.ts';
import { assertActor } from './access.ts';
import { PRINCIPAL_KINDS, type Principal, type PrincipalKind } from './model.ts';
import { principalKey } from './principal-key.ts';
import { type TokenAnswer, tokenCacheOf } from './token-cache.ts';
import { expiresAtMs, LAST_USED_EVERY_MS, lifetimeFor, TOKEN_PREFIX, tokenHash, tokenItems, tokenKeyOf } from './token-records.ts';
import { type RevokeResult, revokeTokenRef } from './tokens.ts';

export function validatePrincipalId(id: unknown): string {
  if (typeof id !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127}$/.test(id)) {
    throw new InvalidInput('principal id must be 1–128 characters of A-Z a-z 0-9 . _ @ : + -');
  }
  return id;
}

export function validatePrincipalKind(kind: unknown): PrincipalKind {
  if (typeof kind !== 'string' || !(PRINCIPAL_KINDS as readonly string[]).includes(kind)) {
    throw new InvalidInput(`principal kind must be one of ${PRINCIPAL_KINDS.join(', ')}`);
  }
  return kind as PrincipalKind;
}

export interface CreateTokenInput {
  principal: string;
  kind: string;
  label?: string | undefined;
  /** Lifetime in ms; null: no expiry; absent: the kind's default (agents: ALP_AGENT_TOKEN_EXPIRES_IN, 90 d). */
  expiresInMs?: number | null | undefined;
}

export interface CreatedToken {
  /** The secret, shown once. */
  token: string;
  token_id: string;
  principal: Principal;
  expires_at?: string;
}

/** The principal's name claim and item: created with the first token, checked by every later one. */
async function principalOps(ctx: ServiceContext, principal: Principal, now: string): Promise<TransactOp[]> {
  const pKey = { PK: principalPk(principal.id), SK: PRINCIPAL_SK };
  const existing = await ctx.items.get(pKey, { consistent: true });
  if (existing && existing.kind !== principal.kind) {
    throw new Conflict(`principal ${principal.id} exists with kind ${String(existing.kind)}`);
  }
  // One principal per normalised id: a second spelling (`Ops-Lead` beside `ops-lead`) is refused.
  const nameKey = { PK: principalNamePk(principalKey(principal.id)), SK: PRINCIPAL_NAME_SK };
  const claim = await ctx.items.get(nameKey, { consistent: true });
  if (claim && claim.principal_id !== principal.id) {
    throw new Conflict(
      `principal ${principal.id} looks like the existing principal ${String(claim.principal_id)} (ids differ only by case or form)`,
    );
  }
  return [
    claim
      ? { op: 'check', key: nameKey, condition: cond.eq('principal_id', principal.id) }
      : {
          op: 'put',
          item: { ...nameKey, type: 'principal_name', principal_id: principal.id, created_at: now },
          condition: cond.notExists(),
        },
    existing
      ? { op: 'check', key: pKey, condition: cond.eq('kind', principal.kind) }
      : {
          op: 'put',
          item: { ...pKey, type: 'principal', principal_id: principal.id, kind: principal.kind, created_at: now },
          condition: cond.notExists(),
        },
  ];
}

/**
 * Creates (or reuses) the principal and a new token for it, with its index entry and its token log
 * entry (audited), in one transaction; returns the token, which is never stored.
 */
export async function createToken(ctx: ServiceContext, input: CreateTokenInput, createdBy: Principal): Promise<CreatedToken> {
  assertActor('createToken', createdBy);
  const principal: Principal = { id: validatePrincipalId(input.principal), kind: validatePrincipalKind(input.kind) };
  const nowMs = ctx.clock.now().getTime();
  const now = new Date(nowMs).toISOString();
  const lifetime = lifetimeFor(principal.kind, input.expiresInMs);
  const expiresAt = lifetime === null ? undefined : new Date(nowMs + lifetime).toISOString();
  const ops = await principalOps(ctx, principal, now);
  const token = `${TOKEN_PREFIX}${randomToken(32)}`;
  const hash = tokenHash(token);
  const items = tokenItems(hash, principal, { createdAt: now, createdBy, label: input.label, expiresAt });
  const tokenId = items.token.token_id as string;
  ops.push({ op: 'put', item: items.token, condition: cond.notExists() }, { op: 'put', item: items.entry, condition: cond.notExists() });
  try {
    await commitTokenChange(
      ctx,
      ops,
      [
        {
          action: 'created',
          token_id: tokenId,
          principal_id: principal.id,
          kind: principal.kind,
          by: { id: createdBy.id, kind: createdBy.kind },
          label: input.label || undefined,
          expires_at: expiresAt,
        },
      ],
      principal.id,
    );
  } catch (e) {
    if (e instanceof ConditionFailed) throw new Conflict(`principal ${principal.id} changed concurrently; retry`);
    throw e;
  }
  tokenCacheOf(ctx.items).set(hash, principal, nowMs, undefined, expiresAt === undefined ? undefined : Date.parse(expiresAt));
  return { token, token_id: tokenId, principal, ...(expiresAt ? { expires_at: expiresAt } : {}) };
}

export interface ResolveOptions {
  /** Answer from this node's token cache (the HTTP server). */
  cached?: boolean;
  /** The clock expiry is judged on (default ctx.clock; see resolveToken). */
  clock?: Clock;
}

/**
 * The principal a bearer token stands for; UNAUTHENTICATED when unknown, revoked or expired (at or
 * after its `expires_at`). With `cached` (the HTTP server, whose clock is the system's) positive
 * answers are cached on this node for a bounded time, never past the token's expiry (token-cache.ts: a
 * revocation on another node is honoured within ALP_TOKEN_CACHE_MS, default 5 s); negative answers are
 * not cached. Without it (the CLI: one process per command) every lookup is a strong read. Expiry is
 * judged on `opts.clock`, else the context's clock — except the CLI's, which is chosen only once the
 * caller is authorised (reading it earlier is an InternalError): then on the system clock, so ALP_NOW
 * cannot revive an expired token.
 */
export async function resolveToken(ctx: ServiceContext, token: string, opts: ResolveOptions = {}): Promise<Principal> {
  if (typeof token !== 'string' || !token.startsWith(TOKEN_PREFIX) || token.length > 200) throw new Unauthenticated('unknown token');
  const hash = tokenHash(token);
  if (!opts.cached) return (await readToken(ctx, hash, expiryClock(ctx, opts))).principal;
  const clock = opts.clock ?? ctx.clock;
  const answer = await tokenCacheOf(ctx.items).lookup(hash, clock, () => readToken(ctx, hash, clock));
  // A shared read may have been issued before the token expired: judged again at this lookup's time.
  if (answer.expiresAtMs !== undefined && clock.now().getTime() >= answer.expiresAtMs) throw new Unauthenticated('token expired');
  return answer.principal;
}

function expiryClock(ctx: ServiceContext, opts: ResolveOptions): Clock {
  if (opts.clock) return opts.clock;
  try {
    ctx.clock.now();
    return ctx.clock;
  } catch (e) {
    if (e instanceof InternalError) return systemClock;
    throw e;
  }
}

async function readToken(ctx: ServiceContext, hash: string, clock: Clock): Promise<TokenAnswer> {
  const item = await ctx.items.get(tokenKeyOf(hash), { consistent: true });
  if (!item || item.revoked_at !== undefined) throw new Unauthenticated('unknown token');
  const nowMs = clock.now().getTime();
  const exp = expiresAtMs(item);
  if (exp !== undefined && !(nowMs < exp)) throw new Unauthenticated('token expired');
  await noteUse(ctx, item, nowMs);
  return { principal: { id: item.principal_id as string, kind: item.kind as PrincipalKind }, expiresAtMs: exp };
}

/**
 * Records `last_used_at` when the stored one is missing or at least LAST_USED_EVERY_MS (1 h) old: only
 * on a read of the token item (the cache answers the rest), so at most one write per token per hour
 * (a conditional write; a node that lost the race writes nothing). Bookkeeping: never fails a lookup;
 * skipped while maintenance holds the fence.
 */
async function noteUse(ctx: ServiceContext, item: Item, nowMs: number): Promise<void> {
  const last = typeof item.last_used_at === 'string' ? Date.parse(item.last_used_at) : undefined;
  if (last !== undefined && nowMs >= last && nowMs - last < LAST_USED_EVERY_MS) return;
  if (last !== undefined && nowMs < last) return;
  try {
    await ctx.items.transactWrite([
      {
        op: 'update',
        key: { PK: item.PK, SK: item.SK },
        update: { set: { last_used_at: new Date(nowMs).toISOString() } },
        condition: cond.and(
          cond.attrExists('principal_id'),
          cond.attrNotExists('revoked_at'),
          last === undefined ? cond.attrNotExists('last_used_at') : cond.eq('last_used_at', item.last_used_at as string),
        ),
      },
      fenceCheck(ctx, { kind: 'installation', key: item.principal_id as string }),
    ]);
  } catch {
    // Bookkeeping only: a lost race, a held fence or a failed write leaves the older value.
  }
}

/**
 * Revokes a token, named by its secret or its id (tokens.ts revokeTokenRef): refused at once on this
 * node, on every other node within the cache bound. `by` defaults to the local operator.
 */
export async function revokeToken(ctx: ServiceContext, token: string, by: Principal = localOperator()): Promise<RevokeResult> {
  return revokeTokenRef(ctx, token, by);
}

/** The CLI's identity when no token is given: the local operator, a human. */
export function localOperator(): Principal {
  let name = 'unknown';
  try {
    name = os.userInfo().username || name;
  } catch {
    name = process.env.USER ?? name;
  }
  return { id: `os:${name.replace(/[^A-Za-z0-9._@+-]/g, '_')}`, kind: 'human' };
}
