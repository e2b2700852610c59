/**
 * The approval policy in force, cached per node (issue 20 item 4 under issue 13's rule). Every
 * decision, execution start and reproposal evaluates the installation policy; reading its one item
 * strongly each time would make it the installation's hottest read (test/system/contention.test.ts
 * holds it to rule (c), like bearer tokens). A node keeps what it read for `ttlMs` instead:
 *
 * - an answer is kept for `ttlMs` (default 5 s, `ALP_POLICY_CACHE_MS`; 0 turns the cache off),
 *   measured on the injected clock from the moment its read was issued: a policy changed on another
 *   node is enforced on this one at most `ttlMs` after the change committed — the same window as a
 *   token revoked elsewhere (token-cache.ts);
 * - concurrent misses share one read (single flight), so a node reads the policy at most once per
 *   `ttlMs` of clock time however many requests are in flight;
 * - the node that changes the policy holds the new one at once (`remember`), and a read in flight
 *   then is not cached: it may have started before the change.
 *
 * A node is one ItemStore instance: the cache lives beside it.
 */
import type { Clock } from '../core/clock.ts';
import { wholeNumberFromEnv } from '../core/config.ts';
import type { ItemStore } from '../store/item-store.ts';

export const DEFAULT_POLICY_CACHE_MS = 5_000;

interface Held<T> {
  value: T;
  readAtMs: number;
}

interface Flight<T> {
  answer: Promise<T>;
  readAtMs: number;
}

export class PolicyCache<T> {
  private held: Held<T> | undefined;
  private flight: Flight<T> | undefined;
  private generation = 0;

  constructor(readonly ttlMs: number) {}

  async lookup(clock: Clock, read: () => Promise<T>): Promise<T> {
    const nowMs = clock.now().getTime();
    const fresh = (atMs: number) => nowMs - atMs >= 0 && nowMs - atMs < this.ttlMs;
    if (this.held && fresh(this.held.readAtMs)) return this.held.value;
    if (this.flight && fresh(this.flight.readAtMs)) {
      const shared = await this.flight.answer.catch(() => undefined);
      if (shared !== undefined) return shared;
    }
    return this.fly(nowMs, read);
  }

  private fly(readAtMs: number, read: () => Promise<T>): Promise<T> {
    const generation = this.generation;
    const answer = read().then((value) => {
      if (this.ttlMs > 0 && generation === this.generation) this.held = { value, readAtMs };
      return value;
    });
    const flight = { answer, readAtMs };
    this.flight = flight;
    const land = () => {
      if (this.flight === flight) this.flight = undefined;
    };
    answer.then(land, land);
    return answer;
  }

  /** This node changed the policy: it holds the new one from now, and no read begun before is kept. */
  remember(value: T, clock: Clock): void {
    this.generation += 1;
    this.flight = undefined;
    this.held = this.ttlMs > 0 ? { value, readAtMs: clock.now().getTime() } : undefined;
  }
}

const caches = new WeakMap<ItemStore, PolicyCache<unknown>>();

/**
 * ALP_POLICY_CACHE_MS: a whole number of ms ≥ 0 (default 5,000); INVALID otherwise — a server reads it
 * before it listens (a typo must not quietly mean the default).
 */
export function policyCacheMsFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  return wholeNumberFromEnv(env, 'ALP_POLICY_CACHE_MS', DEFAULT_POLICY_CACHE_MS, { unit: 'ms' });
}

/** The node's policy cache (one per ItemStore instance), created with the environment's TTL on first use. */
export function policyCacheOf<T>(items: ItemStore): PolicyCache<T> {
  let cache = caches.get(items);
  if (!cache) {
    cache = new PolicyCache<unknown>(policyCacheMsFromEnv());
    caches.set(items, cache);
  }
  return cache as PolicyCache<T>;
}
