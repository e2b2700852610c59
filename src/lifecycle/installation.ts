import { ConditionFailed } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { INSTALLATION_SK, SYS_PK } from '../core/keys.ts';
import { cond } from '../store/item-store.ts';
import type { ServiceContext } from './context.ts';

export const SCHEMA_VERSION = 1;

export interface Installation {
  installation_id: string;
  created_at: string;
  schema_version: number;
}

const installationKey = { PK: SYS_PK, SK: INSTALLATION_SK };

export async function readInstallation(ctx: ServiceContext): Promise<Installation | undefined> {
  const item = await ctx.items.get(installationKey, { consistent: true });
  if (!item) return undefined;
  return {
    installation_id: item.installation_id as string,
    created_at: item.created_at as string,
    schema_version: item.schema_version as number,
  };
}

/** Creates the installation record once; later calls (and racing ones) return the existing record. */
export async function initInstallation(ctx: ServiceContext): Promise<{ installation: Installation; created: boolean }> {
  const existing = await readInstallation(ctx);
  if (existing) return { installation: existing, created: false };
  const installation: Installation = {
    installation_id: newId(ctx.clock),
    created_at: ctx.clock.now().toISOString(),
    schema_version: SCHEMA_VERSION,
  };
  try {
    await ctx.items.put({ ...installationKey, type: 'installation', ...installation }, { condition: cond.notExists() });
    return { installation, created: true };
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    return { installation: (await readInstallation(ctx)) as Installation, created: false };
  }
}
