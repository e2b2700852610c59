/**
 * Reading versions, and the two building blocks of every state change: the conditional update of the
 * version item and the Transition audit entry.
 */

import type { AuditDraft } from '../audit/chain.ts';
import { isoDate } from '../core/clock.ts';
import { NotFound } from '../core/errors.ts';
import {
  artifactPk,
  eventGsiSk,
  stateGsiPk,
  transitionGsiPk,
  transitionSk,
  VERSION_SK_PREFIX,
  versionIndexShard,
  versionSk,
} from '../core/keys.ts';
import { cond, type Item, type ItemStore, queryAll, type TransactOp } from '../store/item-store.ts';
import type { Principal, VersionItem } from './model.ts';
import type { VersionState } from './state-machine.ts';

export async function readVersion(items: ItemStore, artifactId: string, version: number): Promise<VersionItem> {
  const item = await items.get({ PK: artifactPk(artifactId), SK: versionSk(version) }, { consistent: true });
  if (!item) throw new NotFound(`artifact ${artifactId} has no version ${version}`);
  return item as VersionItem;
}

/** All versions of an artifact, oldest first (base table, consistent). */
export async function listVersions(items: ItemStore, artifactId: string): Promise<VersionItem[]> {
  return (await queryAll(items, { pk: artifactPk(artifactId), sk: { beginsWith: VERSION_SK_PREFIX }, consistent: true })) as VersionItem[];
}

export async function latestVersion(items: ItemStore, artifactId: string): Promise<VersionItem> {
  const page = await items.query({
    pk: artifactPk(artifactId),
    sk: { beginsWith: VERSION_SK_PREFIX },
    descending: true,
    limit: 1,
    consistent: true,
  });
  const v = page.items[0];
  if (!v) throw new NotFound(`artifact ${artifactId} has no versions`);
  return v as VersionItem;
}

/**
 * The conditional update moving a version from the state it was read in to `to`. The version stays in
 * its index shard (the suffix its STATE# key was created with, keys.ts versionIndexShard).
 */
export function stateChangeOp(
  v: VersionItem,
  to: VersionState,
  at: string,
  extra: Record<string, unknown> = {},
  remove: string[] = [],
): TransactOp {
  return {
    op: 'update',
    key: { PK: v.PK, SK: v.SK },
    update: {
      set: { state: to, GSI1PK: stateGsiPk(to, versionIndexShard(v)), state_changed_at: at, ...extra },
      add: { row_version: 1 },
      ...(remove.length ? { remove } : {}),
    },
    condition: cond.and(cond.eq('state', v.state), cond.eq('row_version', v.row_version)),
  };
}

export interface TransitionFields {
  version: number;
  from: VersionState | null;
  to: VersionState;
  actor: Principal;
  reason?: string | undefined;
  [extra: string]: unknown;
}

/** A Transition entry; `shard` is the artifact's index shard suffix (keys.ts indexShard, '' unsharded). */
export function transitionDraft(artifactId: string, fields: TransitionFields, shard = ''): AuditDraft {
  const { reason, ...rest } = fields;
  return {
    type: 'transition',
    keys: (seq, ts) => ({
      SK: transitionSk(ts, seq),
      GSI1PK: transitionGsiPk(isoDate(new Date(ts)), shard),
      GSI1SK: eventGsiSk(ts, artifactId),
    }),
    fields: { ...rest, ...(reason === undefined ? {} : { reason }) },
  };
}

/** The public view of a version (what the CLI and API print). */
export function versionView(v: VersionItem): Record<string, unknown> {
  return {
    artifact_id: v.artifact_id,
    version: v.version,
    name: v.name,
    kind: v.kind,
    state: v.state,
    filename: v.filename,
    content_hash: v.content_hash,
    size: v.size,
    content_key: v.content_key,
    metadata_key: v.metadata_key,
    metadata_hash: v.metadata_hash,
    created_at: v.created_at,
    created_by: v.created_by,
    state_changed_at: v.state_changed_at,
    ...(v.compensating_from ? { compensating_from: v.compensating_from } : {}),
    ...(v.archive_key ? { archive_key: v.archive_key } : {}),
  };
}

export function isVersion(item: Item): item is VersionItem {
  return item.type === 'version';
}
