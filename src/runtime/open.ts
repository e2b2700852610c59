/**
 * Opens an installation's services from storage URLs: the two engines, the clock, and the hooks other
 * services plug into the audit transaction. Every entry point (CLI, HTTP server) opens through here,
 * so they all write the same way.
 */

import { openContentStore } from '../content/open.ts';
import type { Clock } from '../core/clock.ts';
import type { StorageConfig } from '../core/config.ts';
import { createContext, type ServiceContext } from '../lifecycle/context.ts';
import { openItemStore } from '../store/open.ts';
import { attachAuditSinks } from './sinks.ts';

export interface OpenInstallation {
  ctx: ServiceContext;
  close(): Promise<void>;
}

export async function openInstallation(config: StorageConfig, clock: Clock): Promise<OpenInstallation> {
  const items = await openItemStore(config.metadata);
  let content: Awaited<ReturnType<typeof openContentStore>>;
  try {
    content = await openContentStore(config.content);
  } catch (e) {
    await items.close();
    throw e;
  }
  const ctx = createContext({ items, content, clock });
  await attachAuditSinks(ctx);
  return {
    ctx,
    close: async () => {
      await content.close();
      await items.close();
    },
  };
}
