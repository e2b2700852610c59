/**
 * The DynamoDB engine's retry policy (the rules are in the header of dynamodb-item-store.ts): which
 * failures are retried, how long to wait, and when to give up. Classification lives in errors.ts; the
 * engine's `call` runs the loop and counts every attempt.
 */
import type { Classified } from './errors.ts';

export interface RetryPolicy {
  /** Attempts per request, including the first. */
  readonly maxAttempts: number;
  /** Backoff base and cap in ms for full-jitter exponential backoff. */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

export function retryPolicy(opts: { maxAttempts?: number; baseDelayMs?: number; maxDelayMs?: number }): RetryPolicy {
  return { maxAttempts: Math.max(1, opts.maxAttempts ?? 8), baseDelayMs: opts.baseDelayMs ?? 50, maxDelayMs: opts.maxDelayMs ?? 5000 };
}

/**
 * Throttling and conflicts did not apply the request: always retried. An ambiguous failure may have:
 * retried only for idempotent requests. Nothing is retried past the policy's attempts.
 */
export function mayRetry(policy: RetryPolicy, kind: Classified, idempotent: boolean, attempt: number): boolean {
  const retryable = kind === 'throttle' || kind === 'conflict' || (kind === 'ambiguous' && idempotent);
  return retryable && attempt < policy.maxAttempts;
}

/** Full jitter: a random wait below min(cap, base * 2^(attempt-1)). */
export function backoffDelay(policy: RetryPolicy, attempt: number): number {
  const cap = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return Math.random() * cap;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
