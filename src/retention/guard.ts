/**
 * The publisher side of retention: a commit that makes an uploaded object referenced also checks that
 * retention has not decided about that object meanwhile (quarantined, prepared or purged it while the
 * upload was in flight). Together with the maintenance fence this closes the classic collector race
 * (upload written, collector runs, reference committed to reclaimed bytes): such a commit fails instead.
 */
import type { ContentStore } from '../content/content-store.ts';
import { cond, type TransactOp } from '../store/item-store.ts';
import type { Layout } from '../system/layout.ts';
import { contentRootId, observationKey } from './model.ts';

/** One check per published key, on its observation in the installation's observation shard of that key. */
export function publishChecks(content: ContentStore, keys: readonly string[], layout: Layout): TransactOp[] {
  if (keys.length === 0) return [];
  const root = contentRootId(content.location);
  return [...new Set(keys)].map((key) => ({
    op: 'check' as const,
    key: observationKey(root, key, layout.index_shards),
    condition: cond.or(cond.notExists(), cond.eq('state', 'GRACE')),
  }));
}
