/**
 * An ItemStore opened on first use (store/open.ts): what a constructor that takes a database path (the
 * seed's `new TelemetryQueue(database)`) holds, since opening is asynchronous (engines load lazily) and
 * a constructor is not. Every method waits for the open and forwards; `engine` and `location` answer
 * from the configuration; `close()` closes the store if it was ever opened (idempotent).
 */
import type { MetadataConfig } from '../core/config.ts';
import type { ItemStore } from './item-store.ts';
import { openItemStore } from './open.ts';

export function lazyItemStore(config: MetadataConfig): ItemStore {
  let opened: Promise<ItemStore> | undefined;
  const open = () => {
    opened ??= openItemStore(config);
    return opened;
  };
  const fixed: Record<string, unknown> = {
    engine: config.engine,
    // The parallelism worth using (ItemStore.scanSegments): known without opening the store.
    scanSegments: config.engine === 'dynamodb' ? 8 : 1,
    location: config.engine === 'sqlite' ? config.path : `dynamodb://${config.table}`,
    close: async () => {
      if (opened) await (await opened).close();
    },
  };
  return new Proxy({} as ItemStore, {
    get(_target, name) {
      if (typeof name !== 'string' || name === 'then') return undefined;
      if (name in fixed) return fixed[name];
      return async (...args: unknown[]) => {
        const store = (await open()) as unknown as Record<string, (...a: unknown[]) => unknown>;
        const method = store[name];
        if (typeof method !== 'function') throw new TypeError(`ItemStore has no method ${name}`);
        return method.apply(store, args);
      };
    },
  });
}
