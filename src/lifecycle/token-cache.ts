/**
 * Token lookups cached per node (issue 16 item 8). Every HTTP request names a bearer token; reading
 * its `TOKEN#` item strongly on every request makes the hottest read of the installation. A node keeps
 * what it read for a bounded time instead:
 *
 * - a found, unrevoked token is cached for `ttlMs` (default 5 s, `ALP_TOKEN_CACHE_MS`; 0 turns the
 *   cache off), measured on the injected clock from the moment the read was issued, so a token revoked
 *   on another node keeps working on this one for at most `ttlMs` after the revocation committed;
 * - negative answers (unknown, revoked) are never cached: a token minted on any node works at once on
 *   every node;
 * - the node that mints or revokes a token updates its own cache at once (revocation is immediate on
 *   the revoking node);
 * - the cache holds at most `maxEntries` tokens (default 10,000, `ALP_TOKEN_CACHE_MAX`), least recently
 *   used first out; entries are keyed by the token's sha256 (the token itself is not kept).
 *
 * A node is one ItemStore instance (a process opens one per installation): the cache lives beside it.
 */
import type { Clock } from '../core/clock.ts';
import type { ItemStore } from '../store/item-store.ts';
import type { Principal } from './model.ts';

export const DEFAULT_TOKEN_CACHE_MS = 5_000;
export const DEFAULT_TOKEN_CACHE_MAX = 10_000;

export interface TokenCacheOptions {
  ttlMs: number;
  maxEntries: number;
}

interface Entry {
  principal: Principal;
  readAtMs: number;
}

export class TokenCache {
  private readonly entries = new Map<string, Entry>();
  /** Advances on every invalidation: a read issued before one is not cached (it may predate a revocation). */
  private invalidations = 0;

  constructor(readonly options: TokenCacheOptions) {}

  /** The cached principal, if read less than ttlMs ago (a clock that went back counts as stale). */
  get(hash: string, clock: Clock): Principal | undefined {
    const e = this.entries.get(hash);
    if (!e) return undefined;
    const age = clock.now().getTime() - e.readAtMs;
    if (age < 0 || age >= this.options.ttlMs) {
      this.entries.delete(hash);
      return undefined;
    }
    this.entries.delete(hash);
    this.entries.set(hash, e);
    return e.principal;
  }

  /** What a reader notes before its read, to pass to set(). */
  generation(): number {
    return this.invalidations;
  }

  /** Remembers a positive answer of a read issued at readAtMs, unless an invalidation came since. */
  set(hash: string, principal: Principal, readAtMs: number, generation = this.invalidations): void {
    if (this.options.ttlMs <= 0 || this.options.maxEntries <= 0 || generation !== this.invalidations) return;
    this.entries.delete(hash);
    this.entries.set(hash, { principal, readAtMs });
    while (this.entries.size > this.options.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  invalidate(hash: string): void {
    this.invalidations += 1;
    this.entries.delete(hash);
  }

  get size(): number {
    return this.entries.size;
  }
}

function nonNegativeInt(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${name} must be a whole number ≥ 0, got ${raw}`);
  return n;
}

export function tokenCacheOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): TokenCacheOptions {
  return {
    ttlMs: nonNegativeInt('ALP_TOKEN_CACHE_MS', env.ALP_TOKEN_CACHE_MS, DEFAULT_TOKEN_CACHE_MS),
    maxEntries: nonNegativeInt('ALP_TOKEN_CACHE_MAX', env.ALP_TOKEN_CACHE_MAX, DEFAULT_TOKEN_CACHE_MAX),
  };
}

const caches = new WeakMap<ItemStore, TokenCache>();

/** The node's cache (one per ItemStore instance), created with the environment's options on first use. */
export function tokenCacheOf(items: ItemStore): TokenCache {
  let cache = caches.get(items);
  if (!cache) {
    cache = new TokenCache(tokenCacheOptionsFromEnv());
    caches.set(items, cache);
  }
  return cache;
}

/** Sets the node's cache options (a server's configuration, tests); drops what it held. */
export function configureTokenCache(items: ItemStore, options: Partial<TokenCacheOptions>): TokenCache {
  const cache = new TokenCache({ ...tokenCacheOptionsFromEnv(), ...options });
  caches.set(items, cache);
  return cache;
}
