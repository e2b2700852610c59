/**
 * Principals and bearer tokens. A token is shown once; only its sha256 is stored (TOKEN#{hash}). A
 * principal's kind (human, agent, service) is fixed when it is first created.
 */
import os from 'node:os';
import { digestHex, sha256 } from '../core/digest.ts';
import { ConditionFailed, Conflict, InvalidInput, MaintenanceInProgress, Unauthenticated } from '../core/errors.ts';
import { randomToken } from '../core/ids.ts';
import { PRINCIPAL_NAME_SK, PRINCIPAL_SK, principalNamePk, principalPk, TOKEN_SK, tokenPk } from '../core/keys.ts';
import { cond } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { fenceCheck } from '../system/fence.ts';
import { assertActor } from './access.ts';
import { PRINCIPAL_KINDS, type Principal, type PrincipalKind } from './model.ts';
import { principalKey } from './principal-key.ts';
import { tokenCacheOf } from './token-cache.ts';

const TOKEN_PREFIX = 'alp_';

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

function tokenHash(token: string): string {
  return digestHex(sha256(token));
}

function tokenKey(token: string) {
  return { PK: tokenPk(tokenHash(token)), SK: TOKEN_SK };
}

/** Creates (or reuses) the principal and a new token for it; returns the token, which is never stored. */
export async function createToken(
  ctx: ServiceContext,
  input: { principal: string; kind: string; label?: string },
  createdBy: Principal,
): Promise<{ token: string; principal: Principal }> {
  assertActor('createToken', createdBy);
  const principal: Principal = { id: validatePrincipalId(input.principal), kind: validatePrincipalKind(input.kind) };
  const now = ctx.clock.now().toISOString();
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
  const token = `${TOKEN_PREFIX}${randomToken(32)}`;
  try {
    await ctx.items.transactWrite([
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
      {
        op: 'put',
        item: {
          ...tokenKey(token),
          type: 'token',
          principal_id: principal.id,
          kind: principal.kind,
          created_at: now,
          created_by: createdBy,
          ...(input.label ? { label: input.label } : {}),
        },
        condition: cond.notExists(),
      },
      // A database writer like any publisher: refused while the maintenance fence is held.
      fenceCheck(ctx, { kind: 'installation', key: principal.id }),
    ]);
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 3) throw new MaintenanceInProgress();
    if (e instanceof ConditionFailed) throw new Conflict(`principal ${principal.id} changed concurrently; retry`);
    throw e;
  }
  tokenCacheOf(ctx.items).set(tokenHash(token), principal, ctx.clock.now().getTime());
  return { token, principal };
}

/**
 * The principal a bearer token stands for; UNAUTHENTICATED when unknown or revoked. With `cached` (the
 * HTTP server, whose clock is the system's) positive answers are cached on this node for a bounded
 * time (token-cache.ts: a revocation on another node is honoured within ALP_TOKEN_CACHE_MS, default
 * 5 s); negative answers are not cached. Without it (the CLI: one process per command, whose clock is
 * chosen only once the caller is authorised) every lookup is a strong read and the clock is not read.
 */
export async function resolveToken(ctx: ServiceContext, token: string, opts: { cached?: boolean } = {}): Promise<Principal> {
  if (typeof token !== 'string' || !token.startsWith(TOKEN_PREFIX) || token.length > 200) throw new Unauthenticated('unknown token');
  if (!opts.cached) return readToken(ctx, token);
  const cache = tokenCacheOf(ctx.items);
  const hash = tokenHash(token);
  const cached = cache.get(hash, ctx.clock);
  if (cached) return cached;
  // The entry's age counts from before the read: what it says was true no earlier than this moment.
  const readAtMs = ctx.clock.now().getTime();
  const generation = cache.generation();
  const principal = await readToken(ctx, token);
  cache.set(hash, principal, readAtMs, generation);
  return principal;
}

async function readToken(ctx: ServiceContext, token: string): Promise<Principal> {
  const item = await ctx.items.get(tokenKey(token), { consistent: true });
  if (!item || item.revoked_at !== undefined) throw new Unauthenticated('unknown token');
  return { id: item.principal_id as string, kind: item.kind as PrincipalKind };
}

/** Revokes a token: refused at once on this node, on every other node within the cache bound. */
export async function revokeToken(ctx: ServiceContext, token: string): Promise<void> {
  // Dropped before and after the write; a lookup that read before the revocation does not cache it.
  const cache = tokenCacheOf(ctx.items);
  cache.invalidate(tokenHash(token));
  await ctx.items
    .transactWrite([
      { op: 'update', key: tokenKey(token), update: { set: { revoked_at: ctx.clock.now().toISOString() } }, condition: cond.exists() },
      fenceCheck(ctx),
    ])
    .catch((e) => {
      if (e instanceof ConditionFailed && e.failedIndex === 1) throw new MaintenanceInProgress();
      if (e instanceof ConditionFailed) throw new InvalidInput('unknown token');
      throw e;
    })
    .finally(() => cache.invalidate(tokenHash(token)));
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
