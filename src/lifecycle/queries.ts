/**
 * The GSI1 access patterns of RFC-012 §9.1, paginated: transitions by day, approvals by approver,
 * runs by day, provenance by day, compensations by state (versions by state: artifacts.listArtifacts).
 * GSI1 is a listing index: eventually consistent on DynamoDB, never used for rules.
 */

import { entryView } from '../audit/history.ts';
import { InvalidInput } from '../core/errors.ts';
import { approverGsiPk, compStateGsiPk, provenanceGsiPk, runGsiPk, transitionGsiPk } from '../core/keys.ts';
import { parseState } from './artifacts.ts';
import type { ServiceContext } from './context.ts';
import { validatePrincipalId } from './principals.ts';

export type IndexQuery = 'transitions' | 'approvals' | 'runs' | 'provenance' | 'compensations';

function validateDate(date: string): string {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date) || Number.isNaN(new Date(`${date}T00:00:00Z`).getTime()))
    throw new InvalidInput('date must be YYYY-MM-DD');
  return date;
}

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

export async function queryIndex(
  ctx: ServiceContext,
  kind: IndexQuery,
  key: string,
  page: { limit?: number | undefined; cursor?: string | undefined } = {},
): Promise<{ items: Record<string, unknown>[]; cursor?: string }> {
  const limit = page.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidInput('limit must be 1–1000');
  const result = await ctx.items.query({
    index: 'GSI1',
    pk: indexPartition(kind, key),
    limit,
    ...(page.cursor ? { cursor: page.cursor } : {}),
  });
  return {
    items: result.items.map((i) => ({ artifact_id: i.artifact_id, ...entryView(i) })),
    ...(result.cursor ? { cursor: result.cursor } : {}),
  };
}
