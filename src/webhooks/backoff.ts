/**
 * Exponential back-off with "equal jitter": after the n-th failed lease of a record the next attempt
 * waits between half and all of min(max, base · 2^(n−1)), so retries of many events that failed
 * together (a receiver down) spread out instead of arriving at the receiver at the same instant.
 */
export function backoffDelay(failedAttempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const exponent = Math.min(Math.max(failedAttempt, 1) - 1, 40);
  const ceiling = Math.min(maxMs, baseMs * 2 ** exponent);
  const half = ceiling / 2;
  return Math.max(1, Math.round(half + random() * half));
}
