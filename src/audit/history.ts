/**
 * The merged history of an artifact: every chain entry in sequence order, read from the base table.
 */
import { artifactPk, HEAD_SK } from '../core/keys.ts';
import type { ServiceContext } from '../lifecycle/context.ts';
import type { HeadItem } from '../lifecycle/model.ts';
import type { Item } from '../store/item-store.ts';
import { hashedPart, isAuditType } from './chain.ts';

export interface LoadedChain {
  head: HeadItem | undefined;
  /** Audit entries ordered by seq. */
  entries: Item[];
  /** Every other item of the partition (versions, ...). */
  live: Item[];
}

export async function loadChain(ctx: ServiceContext, artifactId: string): Promise<LoadedChain> {
  const all: Item[] = [];
  let cursor: string | undefined;
  do {
    const page = await ctx.items.query({ pk: artifactPk(artifactId), consistent: true, ...(cursor ? { cursor } : {}) });
    all.push(...page.items);
    cursor = page.cursor;
  } while (cursor);
  const head = all.find((i) => i.SK === HEAD_SK) as HeadItem | undefined;
  const entries = all.filter((i) => isAuditType(i.type)).sort((a, b) => (a.seq as number) - (b.seq as number));
  const live = all.filter((i) => i.SK !== HEAD_SK);
  return { head, entries, live };
}

/** A readable entry: its type, sequence, time, actor and the fields that say what happened. */
export function entryView(e: Item): Record<string, unknown> {
  const { PK: _p, SK: _s, GSI1PK: _g, GSI1SK: _h, artifact_id: _a, prev_hash: _prev, ...rest } = e;
  return rest;
}

/** The entry as it was recorded (without view fields that change later), plus its hash. */
export function recordedView(e: Item): Record<string, unknown> {
  return { ...entryView(hashedPart(e) as Item), hash: e.hash };
}

export async function history(ctx: ServiceContext, artifactId: string): Promise<Record<string, unknown>[]> {
  const { head, entries } = await loadChain(ctx, artifactId);
  if (!head) {
    const { NotFound } = await import('../core/errors.ts');
    throw new NotFound(`no artifact ${artifactId}`);
  }
  return entries.map(recordedView);
}
