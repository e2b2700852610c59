/**
 * Bounded concurrency for independent tasks. One implementation for every caller (engines, backup,
 * restore, reconcile): at most `limit` calls of `fn` run at once, and after the first failure no new
 * call starts; the calls already running finish, then the first failure is thrown.
 */
export async function forEachLimited<T>(list: readonly T[], limit: number, fn: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  let failure: unknown;
  const workers = Array.from({ length: Math.max(1, Math.min(limit, list.length)) }, async () => {
    while (!failed && next < list.length) {
      const x = list[next++] as T;
      try {
        await fn(x);
      } catch (e) {
        if (!failed) {
          failed = true;
          failure = e;
        }
      }
    }
  });
  await Promise.all(workers);
  if (failed) throw failure;
}
