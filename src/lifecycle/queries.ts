/**
 * The GSI1 access patterns of RFC-012 §9.1, paginated: transitions by day, approvals by approver,
 * runs by day, provenance by day, compensations by state (versions by state: artifacts.listArtifacts).
 * GSI1 is a listing index: eventually consistent on DynamoDB, never used for rules.
 */

import { entryView } from '../audit/history.ts';
import { InvalidInput } from '../core/errors.ts';
import {
  approverGsiPk,
  artifactPk,
  compStateGsiPk,
  executionSk,
  indexPartitions,
  provenanceGsiPk,
  runGsiPk,
  transitionGsiPk,
} from '../core/keys.ts';
import type { Item } from '../store/item-store.ts';
import { getListed, queryMerged } from '../store/merge-query.ts';
import type { ServiceContext } from '../system/context.ts';
import { listArtifacts, parseState } from './artifacts.ts';
import { validatePrincipalId } from './principals.ts';
import { readStateCounts } from './state-counts.ts';
import { VERSION_STATES } from './states.ts';

export type IndexQuery = 'transitions' | 'approvals' | 'runs' | 'provenance' | 'compensations';

function validateDate(date: string): string {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date) || Number.isNaN(new Date(`${date}T00:00:00Z`).getTime()))
    throw new InvalidInput('date must be YYYY-MM-DD');
  return date;
}

/** The RFC-012 §9.1 partition of a listing (unsharded; indexPartitions gives its shards). */
export function indexPartition(kind: IndexQuery, key: string): string {
  switch (kind) {
    case 'transitions':
      return transitionGsiPk(validateDate(key));
    case 'approvals':
      return approverGsiPk(validatePrincipalId(key));
    case 'runs':
      return runGsiPk(validateDate(key));
    case 'provenance':
      return provenanceGsiPk(validateDate(key));
    case 'compensations':
      return compStateGsiPk(parseState(key));
  }
}

/**
 * A page of one GSI1 listing, in the RFC's order (GSI1SK ascending), merged over the installation's
 * index shards (store/merge-query.ts) behind one opaque cursor.
 */
export async function queryIndex(
  ctx: ServiceContext,
  kind: IndexQuery,
  key: string,
  page: { limit?: number | undefined; cursor?: string | undefined } = {},
): Promise<{ items: Record<string, unknown>[]; cursor?: string }> {
  const limit = page.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidInput('limit must be 1–1000');
  const result = await queryMerged(ctx.items, {
    index: 'GSI1',
    pks: indexPartitions(indexPartition(kind, key), ctx.layout.index_shards),
    limit,
    cursor: page.cursor,
  });
  const entries = kind === 'runs' ? await runsOf(ctx, result.items) : result.items;
  return {
    items: entries.map((i) => ({ artifact_id: i.artifact_id, ...entryView(i) })),
    ...(result.cursor ? { cursor: result.cursor } : {}),
  };
}

/**
 * The execution items a runs-by-day page names: RUN#{date} is on each run's POINTER item (written once),
 * or, for runs started before issue 16, on the execution item itself. A pointer whose execution is not
 * there (it cannot be: both are written in one transaction) is left out.
 */
async function runsOf(ctx: ServiceContext, page: Item[]): Promise<Item[]> {
  const keyOf = (p: Item) => ({ PK: artifactPk(p.artifact_id as string), SK: executionSk(p.run_id as string) });
  const pointers = page.filter((i) => i.type === 'run_pointer');
  const found = await getListed(ctx.items, pointers.map(keyOf));
  const byPointer = new Map(pointers.map((p, i) => [p, found[i]]));
  return page.flatMap((i) => {
    if (i.type !== 'run_pointer') return [i];
    const exec = byPointer.get(i);
    return exec ? [exec] : [];
  });
}

/** Versions counted per state at most by the index fallback (pages of 1000); past it `exact: false`. */
export const MAX_COUNTED_PER_STATE = 100_000;

export interface VersionCounts {
  states: Record<string, number>;
  total: number;
  exact: boolean;
  /** `counters`: the per-state counters (state-counts.ts); `index`: paged from the state index. */
  source: 'counters' | 'index';
}

/**
 * How many versions are in each state: from the per-state counters kept with every state change
 * (exact; one batchGet of the counter shards), or, on an installation whose counters were never
 * backfilled, by paging the state index (countByIndex).
 */
export async function countVersionsByState(ctx: ServiceContext): Promise<VersionCounts> {
  const counted = await readStateCounts(ctx);
  if (counted.exact) return { states: counted.states, total: counted.total, exact: true, source: 'counters' };
  return { ...(await countByIndex(ctx)), source: 'index' };
}

/**
 * The count before counters (and the bench's reference): every page of the state index (eventually
 * consistent on DynamoDB), at most MAX_COUNTED_PER_STATE per state.
 */
export async function countByIndex(ctx: ServiceContext): Promise<{ states: Record<string, number>; total: number; exact: boolean }> {
  const states: Record<string, number> = {};
  let exact = true;
  for (const state of VERSION_STATES) {
    let count = 0;
    let cursor: string | undefined;
    do {
      const page = await listArtifacts(ctx, { state, limit: 1000, cursor });
      count += page.items.length;
      cursor = page.cursor;
    } while (cursor && count < MAX_COUNTED_PER_STATE);
    states[state] = count;
    exact &&= cursor === undefined;
  }
  return { states, total: Object.values(states).reduce((a, b) => a + b, 0), exact };
}
