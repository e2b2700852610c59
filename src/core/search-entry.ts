/**
 * The artifact's entry in the search index (issue 20 item 6; docs/design.md "Aliases and search"):
 * `ARTNAME#{id} / SEARCH`, GSI1 `NAMES{s}` / `#{name}#{created_at}#{id}`. Written in the artifact's
 * creating transaction (lifecycle/artifacts.ts `nameEntryOps`) and, for artifacts created before
 * search existed, by the backfill (system/migrations/search-entries.ts): the one shape both write.
 */
import { artifactNamePk, indexShard, SEARCH_SK, searchGsiPk, searchGsiSk } from './keys.ts';
import type { HeadItem } from './model.ts';

export function searchEntryItem(head: HeadItem, indexShards: number): Record<string, unknown> & { PK: string; SK: string } {
  return {
    PK: artifactNamePk(head.artifact_id),
    SK: SEARCH_SK,
    GSI1PK: searchGsiPk(indexShard(head.artifact_id, indexShards)),
    GSI1SK: searchGsiSk(head.name, head.created_at, head.artifact_id),
    type: 'search_entry',
    artifact_id: head.artifact_id,
    name: head.name,
    kind: head.kind,
    labels: head.labels,
    created_at: head.created_at,
  };
}
