/**
 * The installation record (SYS#installation / INSTALLATION): the installation id, when it was
 * created, the schema version it was written with (checked by system/schema.ts), and whether the
 * bootstrap tokens were shown.
 */
import { ConditionFailed, Conflict } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { INSTALLATION_SK, SYS_PK } from '../core/keys.ts';
import { cond, type Item, type ItemKey, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from './context.ts';
import { type Layout, layoutOf, sameLayout } from './layout.ts';
import { CURRENT_SCHEMA } from './schema.ts';

/** The schema version this code writes (one number per component: system/schema.ts). */
export const SCHEMA_VERSION = CURRENT_SCHEMA.installation;

export interface Installation {
  installation_id: string;
  created_at: string;
  schema_version: number;
  /** Shard counts (system/layout.ts); UNSHARDED for a record written before layouts. */
  layout: Layout;
}

const installationKey = { PK: SYS_PK, SK: INSTALLATION_SK };

/**
 * `state_counts` of a record whose per-state counters (lifecycle/state-counts.ts) count every
 * version: set at creation (no version exists yet) or by the counters' backfill under the fence.
 */
export const STATE_COUNTS_EXACT = 'exact';

/** The installation record's key, for a reader that fetches it with other items in one batchGet. */
export const INSTALLATION_KEY: Readonly<ItemKey> = installationKey;

/** Whether an installation record says its per-state counters count every version. */
export function stateCountsExact(record: Item | undefined): boolean {
  return record?.state_counts === STATE_COUNTS_EXACT;
}

/** The write that records, in the transaction of a backfill's last step, that the counters are exact. */
export function markStateCountsExactOp(): TransactOp {
  return { op: 'update', key: installationKey, update: { set: { state_counts: STATE_COUNTS_EXACT } }, condition: cond.exists() };
}

/** The installation record's row, as findings name it. */
export const INSTALLATION_ROW = `${SYS_PK} ${INSTALLATION_SK}`;

/** A transaction check that holds only while the installation record names `installationId`. */
export function installationIsCheck(installationId: string): TransactOp {
  return { op: 'check', key: installationKey, condition: cond.eq('installation_id', installationId) };
}

/** A transaction check that holds only while there is no installation record (a restore's target). */
export function noInstallationCheck(): TransactOp {
  return { op: 'check', key: installationKey, condition: cond.notExists() };
}

export async function readInstallation(ctx: ServiceContext): Promise<Installation | undefined> {
  const item = await ctx.items.get(installationKey, { consistent: true });
  return item ? toInstallation(item) : undefined;
}

export interface InitResult {
  installation: Installation;
  created: boolean;
  /**
   * The installation was created by an entry point that shows bootstrap tokens (`alp start`) and they
   * have not been shown yet: created now, or by a first start that died before it printed them.
   */
  bootstrapPending: boolean;
}

/**
 * Creates the installation record once; later calls (and racing ones) return the existing record.
 * With `bootstrapTokens`, a new record is marked `bootstrap_tokens: pending` in the same write, until
 * `markBootstrapShown` records that the tokens were printed.
 */
export async function initInstallation(ctx: ServiceContext, opts: { bootstrapTokens?: boolean } = {}): Promise<InitResult> {
  const existing = await ctx.items.get(installationKey, { consistent: true });
  if (existing) return existingInstallation(ctx, existing);
  const installation: Installation = {
    installation_id: newId(ctx.clock),
    created_at: ctx.clock.now().toISOString(),
    schema_version: SCHEMA_VERSION,
    layout: { ...ctx.layout },
  };
  try {
    await ctx.items.put(
      {
        ...installationKey,
        type: 'installation',
        ...installation,
        state_counts: STATE_COUNTS_EXACT,
        ...(opts.bootstrapTokens ? { bootstrap_tokens: 'pending' } : {}),
      },
      { condition: cond.notExists() },
    );
    return { installation, created: true, bootstrapPending: opts.bootstrapTokens === true };
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    const raced = (await ctx.items.get(installationKey, { consistent: true })) as Item;
    return existingInstallation(ctx, raced);
  }
}

/** An existing record, refused when its layout is not the one this context writes with. */
function existingInstallation(ctx: ServiceContext, item: Item): InitResult {
  const installation = toInstallation(item);
  if (!sameLayout(installation.layout, ctx.layout))
    throw new Conflict('the installation was created with another shard layout than this node uses', {
      reason: 'layout_mismatch',
      stored: installation.layout,
      this_node: ctx.layout,
    });
  return { installation, created: false, bootstrapPending: item.bootstrap_tokens === 'pending' };
}

/** The layout the installation record states: UNSHARDED when it predates layouts, undefined with no record. */
export async function readLayout(items: ServiceContext['items']): Promise<Layout | undefined> {
  const item = await items.get(installationKey, { consistent: true });
  return item ? layoutOf(item) : undefined;
}

/** Records that the bootstrap tokens were shown: later starts issue none. */
export async function markBootstrapShown(ctx: ServiceContext): Promise<void> {
  await ctx.items
    .update(
      installationKey,
      { set: { bootstrap_tokens: 'shown', bootstrap_tokens_shown_at: ctx.clock.now().toISOString() } },
      { condition: cond.eq('bootstrap_tokens', 'pending') },
    )
    .catch((e: unknown) => {
      if (!(e instanceof ConditionFailed)) throw e;
    });
}

function toInstallation(item: Item): Installation {
  return {
    installation_id: item.installation_id as string,
    created_at: item.created_at as string,
    schema_version: item.schema_version as number,
    layout: layoutOf(item),
  };
}
