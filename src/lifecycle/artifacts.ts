/**
 * Artifacts and versions: creation (content, then metadata snapshot, then one transaction holding the
 * version item, the HEAD, the creation transition and both objects' reference-index entries), verified
 * reads, listings.
 */
import type { Readable } from 'node:stream';
import { aliasesOf } from '../audit/alias-chain.ts';
import { commitAudited, readHead, runAudited } from '../audit/chain.ts';
import { type Policy, policyOf } from '../audit/policy.ts';
import { ConditionFailed, Conflict, InvalidInput, MaintenanceInProgress, NotFound } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import {
  artifactNamePk,
  artifactPk,
  createdGsiSk,
  HEAD_SK,
  indexPartitions,
  NAME_SK,
  nameGsiPk,
  stateGsiPk,
  versionIndexShard,
} from '../core/keys.ts';
import { contentKey, validateFilename } from '../core/object-keys.ts';
import { searchEntryItem } from '../core/search-entry.ts';
import { cond, type Item, type TransactOp } from '../store/item-store.ts';
import { getListed, queryMerged } from '../store/merge-query.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertNotFenced, assertReadable, fenceCheck } from '../system/fence.ts';
import { assertActor } from './access.ts';
import { resolveVersionRef } from './aliases.ts';
import { getOriginalOrArchived } from './archived-read.ts';
import type { HeadItem, Principal, VersionItem } from './model.ts';
import { versionCreationOps } from './state-counts.ts';
import { isVersionState, VERSION_STATES, type VersionState } from './state-machine.ts';
import { validateKind, validateLabels, validateName, validateQuorum } from './validation.ts';
import { type ContentInput, storeVersionContent } from './version-content.ts';
import { latestVersion, listVersions, readVersion, transitionDraft, versionView } from './versions.ts';

export type { ContentInput } from './version-content.ts';

export interface CreateArtifactInput extends ContentInput {
  name: string;
  kind?: string | undefined;
  labels?: Record<string, string> | undefined;
  quorum?: number | undefined;
}

/** Internal: where version 1's content goes and what the HEAD records (compensation artifacts differ). */
export interface CreateOptions {
  contentKeyFor?: (artifactId: string) => string;
  headExtra?: Partial<HeadItem>;
  /** Writes of the creation's own transaction (an idempotency record: lifecycle/idempotency.ts). */
  extraOps?: (version: VersionItem) => TransactOp[];
}

export async function createArtifact(
  ctx: ServiceContext,
  actor: Principal,
  input: CreateArtifactInput,
  opts: CreateOptions = {},
): Promise<{ head: HeadItem; version: VersionItem }> {
  assertActor('createArtifact', actor);
  const { head, version, creation, indexOps } = await prepareNewArtifact(ctx, actor, input, opts);
  await commitAudited(
    ctx,
    {},
    {
      chains: [{ artifactId: head.artifact_id, newHead: head, entries: [creation] }],
      ops: [...versionCreationOps(version), ...nameEntryOps(ctx, head), ...(opts.extraOps?.(version) ?? []), ...indexOps],
      published: [version.content_key, version.metadata_key],
    },
  );
  return { head, version };
}

/**
 * Stores version 1's content and metadata; the caller commits the returned items and `indexOps` (the
 * objects' reference-index entries) in one transaction (compensation).
 */
export async function prepareNewArtifact(
  ctx: ServiceContext,
  actor: Principal,
  input: CreateArtifactInput,
  opts: CreateOptions = {},
): Promise<{ head: HeadItem; version: VersionItem; creation: ReturnType<typeof creationTransition>; indexOps: TransactOp[] }> {
  const name = validateName(input.name);
  const kind = validateKind(input.kind ?? 'file');
  const labels = validateLabels(input.labels ?? {});
  const quorum = validateQuorum(input.quorum ?? 1);
  const filename = validateFilename(input.filename);
  const artifactId = newId(ctx.clock);
  await assertNotFenced(ctx, { kind: 'artifacts', ids: [artifactId] });
  const createdAt = ctx.clock.now().toISOString();
  const key = opts.contentKeyFor ? opts.contentKeyFor(artifactId) : contentKey(artifactId, 1, filename);
  const { version, indexOps } = await storeVersionContent(ctx, actor, {
    artifactId,
    version: 1,
    name,
    kind,
    labels,
    filename,
    key,
    keyIsFresh: opts.contentKeyFor === undefined,
    createdAt,
    input,
  });
  const head = newHeadItem({ artifactId, name, kind, labels, quorum, createdAt, actor, extra: opts.headExtra });
  return { head, version, creation: creationTransition(version, actor, policyOf(head)), indexOps };
}

function newHeadItem(a: {
  artifactId: string;
  name: string;
  kind: string;
  labels: Record<string, string>;
  quorum: number;
  createdAt: string;
  actor: Principal;
  extra: Partial<HeadItem> | undefined;
}): HeadItem {
  const { artifactId, name, kind, labels, quorum, createdAt, actor } = a;
  return {
    PK: artifactPk(artifactId),
    SK: HEAD_SK,
    // No GSI1 keys: the NAME item carries the artifact's name entry (every audit write rewrites the HEAD).
    type: 'head',
    artifact_id: artifactId,
    name,
    kind,
    labels,
    quorum,
    latest_version: 1,
    audit_seq: 0,
    audit_head_hash: null,
    created_at: createdAt,
    created_by: actor,
    ...a.extra,
  };
}

export async function addVersion(
  ctx: ServiceContext,
  actor: Principal,
  artifactId: string,
  input: ContentInput,
  opts: Pick<CreateOptions, 'extraOps'> = {},
): Promise<VersionItem> {
  assertActor('addVersion', actor);
  const filename = validateFilename(input.filename);
  await assertNotFenced(ctx, { kind: 'artifacts', ids: [artifactId] });
  const head = await readHead(ctx, artifactId);
  if (head.archived) throw new Conflict(`artifact ${artifactId} is archived`);
  if (head.compensates) throw new Conflict(`artifact ${artifactId} is a compensation artifact; it has one version`);
  const number = await reserveVersionNumber(ctx, artifactId);
  const createdAt = ctx.clock.now().toISOString();
  const key = contentKey(artifactId, number, filename);
  const { version, indexOps } = await storeVersionContent(ctx, actor, {
    artifactId,
    version: number,
    name: head.name,
    kind: head.kind,
    labels: head.labels,
    filename,
    key,
    keyIsFresh: true,
    createdAt,
    input,
  });
  await runAudited(ctx, [artifactId], (heads) => {
    if (heads[artifactId]?.archived) throw new Conflict(`artifact ${artifactId} was archived meanwhile`);
    return {
      // The policy as the HEAD stands now is chained with every version (audit/policy.ts).
      chains: [{ artifactId, entries: [creationTransition(version, actor, policyOf(heads[artifactId] as HeadItem))] }],
      ops: [...versionCreationOps(version), ...(opts.extraOps?.(version) ?? []), ...indexOps],
      published: [version.content_key, version.metadata_key],
    };
  });
  return version;
}

/**
 * Takes the next version number before any bytes are written, so two concurrent uploads can never
 * write the same object key. A crash after this leaves a gap in the numbering, never a clash.
 */
async function reserveVersionNumber(ctx: ServiceContext, artifactId: string): Promise<number> {
  for (let attempt = 0; attempt < 16; attempt++) {
    const head = await readHead(ctx, artifactId);
    try {
      const next = head.latest_version + 1;
      await ctx.items.transactWrite([
        {
          op: 'update',
          key: { PK: head.PK, SK: HEAD_SK },
          // When: retention counts uncommitted numbers as uploads in flight only for a while (an
          // upload that died never commits, and its bytes must become reclaimable).
          update: { set: { latest_version: next, version_reserved_at: ctx.clock.now().toISOString() } },
          condition: cond.eq('latest_version', head.latest_version),
        },
        // The reservation is a database write too: never while the maintenance fence is held.
        fenceCheck(ctx, { kind: 'artifacts', ids: [artifactId] }),
      ]);
      return next;
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
      if (e.failedIndex === 1) throw new MaintenanceInProgress();
    }
  }
  throw new Conflict(`artifact ${artifactId} is busy: too many concurrent new versions, retry`);
}

/**
 * The artifact's index entries, written once in its creating transaction: its NAME#{name} entry and
 * its search entry (NAMES{s}, lifecycle/search.ts).
 */
export function nameEntryOps(ctx: Pick<ServiceContext, 'layout'>, head: HeadItem): TransactOp[] {
  return [
    { op: 'put', item: nameItem(head), condition: cond.notExists() },
    { op: 'put', item: searchEntryItem(head, ctx.layout.index_shards), condition: cond.notExists() },
  ];
}

/**
 * The artifact's entry in NAME#{name} (GSI1), written once with the artifact: ARTNAME#{id} / NAME. Not
 * on the HEAD, which every audit transaction rewrites (a GSI write each time, projection ALL).
 */
export function nameItem(head: HeadItem): Item {
  return {
    PK: artifactNamePk(head.artifact_id),
    SK: NAME_SK,
    GSI1PK: nameGsiPk(head.name),
    GSI1SK: createdGsiSk(head.created_at, head.artifact_id),
    type: 'name_entry',
    artifact_id: head.artifact_id,
  };
}

function creationTransition(v: VersionItem, actor: Principal, policy: Policy) {
  const fields = {
    policy,
    version: v.version,
    from: null,
    to: 'DRAFT' as const,
    actor,
    reason: 'created',
    filename: v.filename,
    content_key: v.content_key,
    content_hash: v.content_hash,
    size: v.size,
    metadata_key: v.metadata_key,
    metadata_hash: v.metadata_hash,
  };
  return transitionDraft(v.artifact_id, fields, versionIndexShard(v));
}

/** The version `version` names (a number or `@alias`: aliases.ts resolveVersionRef), else the latest. */
export async function resolveVersion(ctx: ServiceContext, artifactId: string, version?: number | string): Promise<VersionItem> {
  if (version === undefined) {
    await readHead(ctx, artifactId);
    return latestVersion(ctx.items, artifactId);
  }
  return readVersion(ctx.items, artifactId, await resolveVersionRef(ctx, artifactId, version));
}

/**
 * A verified stream of a version's content; the stream fails with IntegrityError on a mismatch. Refused
 * with MAINTENANCE while a maintenance that fences readers holds the fence (system/fence.ts assertReadable).
 */
export async function openVersionContent(
  ctx: ServiceContext,
  artifactId: string,
  version?: number | string,
  range?: { start?: number; end?: number },
): Promise<{ version: VersionItem; stream: Readable }> {
  await assertReadable(ctx, { kind: 'artifacts', ids: [artifactId] });
  const v = await resolveVersion(ctx, artifactId, version);
  const keys = { original: v.content_key, archive: v.archive_key as string | undefined };
  const stream = await getOriginalOrArchived(ctx.content, keys, v.content_hash, { expectedSize: v.size, ...range });
  return { version: v, stream };
}

export async function showArtifact(ctx: ServiceContext, artifactId: string): Promise<{ head: HeadItem; versions: VersionItem[] }> {
  const head = await readHead(ctx, artifactId);
  return { head, versions: await listVersions(ctx.items, artifactId) };
}

export function headView(h: HeadItem): Record<string, unknown> {
  return {
    artifact_id: h.artifact_id,
    name: h.name,
    kind: h.kind,
    labels: h.labels,
    quorum: h.quorum,
    latest_version: h.latest_version,
    created_at: h.created_at,
    created_by: h.created_by,
    audit_seq: h.audit_seq,
    audit_head_hash: h.audit_head_hash,
    ...(h.compensates ? { compensates: h.compensates } : {}),
    ...(h.archived ? { archived: h.archived } : {}),
    ...(Object.keys(aliasesOf(h)).length > 0 ? { aliases: aliasesOf(h) } : {}),
  };
}

export interface ListInput {
  state?: string | undefined;
  name?: string | undefined;
  limit?: number | undefined;
  cursor?: string | undefined;
}

/**
 * Versions by state (GSI1 STATE#), newest first; artifacts by exact name (GSI1 NAME#); with neither,
 * every version grouped by state, one state partition after the other, behind one opaque cursor.
 */
export async function listArtifacts(ctx: ServiceContext, input: ListInput): Promise<{ items: Record<string, unknown>[]; cursor?: string }> {
  const limit = input.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidInput('limit must be 1–1000');
  if (input.name !== undefined) return listByName(ctx, validateName(input.name), limit, input.cursor);
  const states: readonly VersionState[] = input.state === undefined ? VERSION_STATES : [parseState(input.state)];
  let { index, inner } = decodeListCursor(input.cursor, states.length);
  const items: Record<string, unknown>[] = [];
  while (index < states.length && items.length < limit) {
    const page = await queryMerged(ctx.items, {
      index: 'GSI1',
      pks: indexPartitions(stateGsiPk(states[index] as VersionState), ctx.layout.index_shards),
      descending: true,
      limit: limit - items.length,
      ...(inner ? { cursor: inner } : {}),
    });
    items.push(...page.items.map((v) => versionView(v as VersionItem)));
    if (page.cursor) inner = page.cursor;
    else {
      index++;
      inner = undefined;
    }
  }
  const more = index < states.length;
  return { items, ...(more ? { cursor: encodeListCursor(index, inner) } : {}) };
}

/**
 * Artifacts named `name`, newest first (GSI1 NAME#{name}): NAME items, whose HEADs are read by key, and
 * the HEADs written before issue 16, which carry the entry themselves. Same order and pages either way.
 */
async function listByName(ctx: ServiceContext, name: string, limit: number, cursor: string | undefined) {
  const page = await ctx.items.query({ index: 'GSI1', pk: nameGsiPk(name), descending: true, limit, ...(cursor ? { cursor } : {}) });
  const named = page.items.filter((i) => i.type !== 'head').map((i) => ({ PK: artifactPk(i.artifact_id as string), SK: HEAD_SK }));
  const heads = new Map((await getListed(ctx.items, named)).flatMap((h) => (h ? [[h.PK, h as HeadItem] as const] : [])));
  const items = page.items.flatMap((i) => {
    const head = i.type === 'head' ? (i as HeadItem) : heads.get(artifactPk(i.artifact_id as string));
    return head ? [headView(head)] : [];
  });
  return { items, ...(page.cursor ? { cursor: page.cursor } : {}) };
}

export function parseState(s: string): VersionState {
  const up = s.toUpperCase();
  if (!isVersionState(up)) throw new InvalidInput(`unknown state ${JSON.stringify(s)}; one of ${VERSION_STATES.join(', ')}`);
  return up;
}

function encodeListCursor(index: number, inner: string | undefined): string {
  return Buffer.from(JSON.stringify({ i: index, c: inner ?? null })).toString('base64url');
}

function decodeListCursor(cursor: string | undefined, count: number): { index: number; inner: string | undefined } {
  if (!cursor) return { index: 0, inner: undefined };
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { i: unknown; c: unknown };
    if (typeof v.i !== 'number' || !Number.isInteger(v.i) || v.i < 0 || v.i >= count) throw new Error('index');
    if (v.c !== null && typeof v.c !== 'string') throw new Error('inner');
    return { index: v.i, inner: v.c ?? undefined };
  } catch {
    throw new InvalidInput('invalid cursor');
  }
}

/** Every HEAD item, by scanning the base table: for offline operations (verify --all, backup, retention). */
export { allHeads } from '../audit/chain.ts';

export function requireItem<T extends Item>(item: T | undefined, what: string): T {
  if (!item) throw new NotFound(`no ${what}`);
  return item;
}
