/**
 * Token lookups cached per node (issue 16 item 8). Every HTTP request names a bearer token; reading
 * its `TOKEN#` item strongly on every request makes the hottest read of the installation. A node keeps
 * what it read for a bounded time instead:
 *
 * - a found, unrevoked, unexpired token is cached for `ttlMs` (default 5 s, `ALP_TOKEN_CACHE_MS`; 0
 *   turns the cache off), measured on the injected clock from the moment the read was issued, so a
 *   token revoked on another node keeps working on this one for at most `ttlMs` after the revocation
 *   committed; an entry never outlives the token's own expiry (issue 19 B8): at `expires_at` it is gone;
 * - concurrent misses for one token share one read (single flight): a lookup that finds a read of the
 *   same token in flight, issued less than `ttlMs` ago, waits for its answer instead of reading again.
 *   So one node reads a token at most once per `ttlMs` of clock time, however many requests are in
 *   flight (reads of a token ≤ clock span ÷ ttlMs + 1: the bound test/system/contention.test.ts holds);
 * - negative answers (unknown, revoked, expired) are never cached nor shared: a lookup whose shared
 *   read failed reads again itself, so a token minted on any node works at once on every node;
 * - the node that mints or revokes a token updates its own cache at once (revocation is immediate on
 *   the revoking node; a read in flight then is neither cached nor joined);
 * - the cache holds at most `maxEntries` tokens (default 10,000, `ALP_TOKEN_CACHE_MAX`), least recently
 *   used first out; entries are keyed by the token's sha256 (the token itself is not kept).
 *
 * A node is one ItemStore instance (a process opens one per installation): the cache lives beside it.
 */
import type { Clock } from '../core/clock.ts';
import { wholeNumberFromEnv } from '../core/config.ts';
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
  /** The token's own expiry (ms), if it has one. */
  expiresAtMs: number | undefined;
}

/** What a read of a token item answers: its principal and its expiry (ms), if any. */
export interface TokenAnswer {
  principal: Principal;
  expiresAtMs?: number | undefined;
}

interface Flight {
  answer: Promise<TokenAnswer>;
  readAtMs: number;
}

export class TokenCache {
  private readonly entries = new Map<string, Entry>();
  private readonly flights = new Map<string, Flight>();
  /** Advances on every invalidation: a read issued before one is not cached (it may predate a revocation). */
  private invalidations = 0;

  constructor(readonly options: TokenCacheOptions) {}

  /**
   * The cached principal, if read less than ttlMs ago and the token has not expired (a clock that went
   * back counts as stale).
   */
  get(hash: string, clock: Clock): Principal | undefined {
    return this.answer(hash, clock.now().getTime())?.principal;
  }

  private answer(hash: string, nowMs: number): TokenAnswer | undefined {
    const e = this.entries.get(hash);
    if (!e) return undefined;
    const age = nowMs - e.readAtMs;
    if (age < 0 || age >= this.options.ttlMs || (e.expiresAtMs !== undefined && nowMs >= e.expiresAtMs)) {
      this.entries.delete(hash);
      return undefined;
    }
    this.entries.delete(hash);
    this.entries.set(hash, e);
    return { principal: e.principal, expiresAtMs: e.expiresAtMs };
  }

  /**
   * The cached answer, else that of a read of the same token in flight (issued less than ttlMs ago),
   * else `read()`'s, cached. A shared read that failed is not an answer: this lookup reads itself.
   */
  async lookup(hash: string, clock: Clock, read: () => Promise<TokenAnswer>): Promise<TokenAnswer> {
    const nowMs = clock.now().getTime();
    const hit = this.answer(hash, nowMs);
    if (hit) return hit;
    const flight = this.flights.get(hash);
    if (flight && nowMs - flight.readAtMs >= 0 && nowMs - flight.readAtMs < this.options.ttlMs) {
      const shared = await flight.answer.catch(() => undefined);
      if (shared) return shared;
    }
    return this.fly(hash, clock.now().getTime(), read);
  }

  private fly(hash: string, readAtMs: number, read: () => Promise<TokenAnswer>): Promise<TokenAnswer> {
    // The entry's age counts from before the read: what it says was true no earlier than this moment.
    const generation = this.invalidations;
    const answer = read().then((a) => {
      this.set(hash, a.principal, readAtMs, generation, a.expiresAtMs);
      return a;
    });
    const flight = { answer, readAtMs };
    this.flights.set(hash, flight);
    const land = () => {
      if (this.flights.get(hash) === flight) this.flights.delete(hash);
    };
    answer.then(land, land);
    return answer;
  }

  /** What a reader notes before its read, to pass to set(). */
  generation(): number {
    return this.invalidations;
  }

  /**
   * Remembers a positive answer of a read issued at readAtMs, unless an invalidation came since; it is
   * answered until readAtMs + ttlMs or the token's expiry (`expiresAtMs`), whichever comes first.
   */
  set(hash: string, principal: Principal, readAtMs: number, generation = this.invalidations, expiresAtMs?: number): void {
    if (this.options.ttlMs <= 0 || this.options.maxEntries <= 0 || generation !== this.invalidations) return;
    this.entries.delete(hash);
    this.entries.set(hash, { principal, readAtMs, expiresAtMs });
    while (this.entries.size > this.options.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  invalidate(hash: string): void {
    this.invalidations += 1;
    this.entries.delete(hash);
    this.flights.delete(hash);
  }

  get size(): number {
    return this.entries.size;
  }
}

/** ALP_TOKEN_CACHE_MS and ALP_TOKEN_CACHE_MAX: whole numbers ≥ 0; INVALID otherwise (a server reads them before it listens). */
export function tokenCacheOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): TokenCacheOptions {
  return {
    ttlMs: wholeNumberFromEnv(env, 'ALP_TOKEN_CACHE_MS', DEFAULT_TOKEN_CACHE_MS, { unit: 'ms' }),
    maxEntries: wholeNumberFromEnv(env, 'ALP_TOKEN_CACHE_MAX', DEFAULT_TOKEN_CACHE_MAX),
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
