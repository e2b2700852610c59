/**
 * One audit entry of an artifact's chain by its sequence number, for a reader that knows the entry's
 * type and time (the telemetry outbox's record of it: the webhook dispatcher). Transitions, approvals
 * and alias moves are keyed by time and seq: one get. The other types are keyed by what they name (a
 * run, a step, a compensation): a query of that type's prefix, which holds a handful of items. An entry
 * already packed into a history segment (compaction.ts) is found through loadChain.
 */
import { aliasSk, approvalSk, artifactPk, transitionSk } from '../core/keys.ts';
import type { Item } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { loadChain } from './history.ts';

const KEYED_BY_TIME: Record<string, (timestamp: string, seq: number) => string> = {
  transition: transitionSk,
  approval: approvalSk,
  alias: aliasSk,
};

const PREFIX_OF: Record<string, string> = {
  execution: 'EXEC#',
  execution_output: 'OUTPUT#',
  execution_finish: 'FINISH#',
  provenance: 'PROV#',
  compensation: 'COMP#',
};

async function findByPrefix(ctx: ServiceContext, pk: string, prefix: string, seq: number): Promise<Item | undefined> {
  let cursor: string | undefined;
  do {
    const page = await ctx.items.query({ pk, sk: { beginsWith: prefix }, consistent: true, limit: 200, ...(cursor ? { cursor } : {}) });
    const found = page.items.find((i) => i.seq === seq);
    if (found) return found;
    cursor = page.cursor;
  } while (cursor);
  return undefined;
}

export async function readAuditEntry(
  ctx: ServiceContext,
  artifactId: string,
  seq: number,
  type: string,
  timestamp: string,
): Promise<Item | undefined> {
  const pk = artifactPk(artifactId);
  const keyed = KEYED_BY_TIME[type];
  const prefix = PREFIX_OF[type];
  const hot = keyed
    ? await ctx.items.get({ PK: pk, SK: keyed(timestamp, seq) }, { consistent: true })
    : prefix
      ? await findByPrefix(ctx, pk, prefix, seq)
      : undefined;
  if (hot?.seq === seq) return hot;
  const chain = await loadChain(ctx, artifactId, { tolerant: true });
  return chain.entries.find((e) => e.seq === seq);
}
