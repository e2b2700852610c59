/**
 * Bounded waiting for a tool (wait_for_decision): read the store, and while the answer is not there,
 * sleep one poll interval and read again — never a busy loop, never past the timeout. The time waited
 * is counted in the sleeps themselves, not read from the service clock, so a wait ends on time under
 * any clock (a fixed ALP_NOW, a test's ManualClock), and a cancelled request (its signal) ends it at once.
 */

/** Sleeps `ms`, or less when `signal` aborts. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

export const timerSleep: Sleep = (ms, signal) =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });

export interface PollOptions {
  timeoutMs: number;
  pollMs: number;
  sleep: Sleep;
  signal?: AbortSignal | undefined;
}

export interface Polled<T> {
  value: T;
  /** Whether `done` held for the last value read (false: the timeout or the cancellation came first). */
  done: boolean;
  waitedMs: number;
}

/** Reads until `done(value)`, sleeping `pollMs` between reads, for at most `timeoutMs` of sleeping. */
export async function pollUntil<T>(read: () => Promise<T>, done: (value: T) => boolean, o: PollOptions): Promise<Polled<T>> {
  let waitedMs = 0;
  for (;;) {
    const value = await read();
    if (done(value)) return { value, done: true, waitedMs };
    if (waitedMs >= o.timeoutMs || o.signal?.aborted) return { value, done: false, waitedMs };
    const step = Math.min(o.pollMs, o.timeoutMs - waitedMs);
    await o.sleep(step, o.signal);
    waitedMs += step;
  }
}
