/**
 * A version's objects: its content and its metadata.json snapshot, staged and published together, and
 * the version item that records them. The caller commits that item in one audit transaction with the
 * objects' reference-index entries (system/indexed-content.ts claimRefIndexOps), so the entries exist
 * exactly when the version does (lifecycle/artifacts.ts: createArtifact, addVersion, compensation).
 */
import type { Body, StagedObject } from '../content/content-store.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import type { Digest } from '../core/digest.ts';
import { artifactPk, createdGsiSk, indexShard, stateGsiPk, versionSk } from '../core/keys.ts';
import { metadataKey } from '../core/object-keys.ts';
import type { TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { claimRefIndexOps } from '../system/indexed-content.ts';
import type { Principal, VersionItem } from './model.ts';

export interface ContentInput {
  filename: string;
  body: Body;
  expectedDigest?: Digest | undefined;
  maxBytes?: number | undefined;
  /** The body's declared size, when known (a file, a Content-Length): the S3 engine sizes its parts by it. */
  size?: number | undefined;
}

export interface StoreVersionArgs {
  artifactId: string;
  version: number;
  name: string;
  kind: string;
  labels: Record<string, string>;
  filename: string;
  key: string;
  /**
   * Whether `key` is under this version's own fresh prefix (artifacts/{new id}/v1/ or a reserved
   * v{n}/), which no retry ever writes again — not a compensation's rollback key, which a retry after
   * a crash writes again (content-store.ts PutOptions.fresh).
   */
  keyIsFresh: boolean;
  createdAt: string;
  input: ContentInput;
}

/**
 * Writes the content, then the metadata snapshot; returns the version item to commit and the objects'
 * reference-index entries to commit with it (system/indexed-content.ts claimRefIndexOps: one commit
 * for the version and its entries, and no entry when that commit fails).
 */
export async function storeVersionContent(
  ctx: ServiceContext,
  actor: Principal,
  a: StoreVersionArgs,
): Promise<{ version: VersionItem; indexOps: TransactOp[] }> {
  // Content and its metadata snapshot are staged, then made durable together (their fsyncs overlap).
  const put = await ctx.content.stage(a.key, a.input.body, {
    ...(a.input.expectedDigest ? { expectedDigest: a.input.expectedDigest } : {}),
    ...(a.input.maxBytes !== undefined ? { maxBytes: a.input.maxBytes } : {}),
    ...(a.input.size !== undefined ? { sizeHint: a.input.size } : {}),
    fresh: a.keyIsFresh,
  });
  const metaKey = metadataKey(a.artifactId, a.version);
  const snapshot = {
    artifact_id: a.artifactId,
    version: a.version,
    name: a.name,
    kind: a.kind,
    labels: a.labels,
    filename: a.filename,
    content_key: a.key,
    content_hash: put.digest,
    size: put.size,
    created_at: a.createdAt,
    created_by: actor,
  };
  let meta: StagedObject | undefined;
  let indexOps: Promise<TransactOp[]>;
  try {
    // metadata.json's key is the version's own (a new id's v1, or a number just reserved): always fresh.
    meta = await ctx.content.stage(metaKey, [Buffer.from(`${canonicalJson(snapshot)}\n`)], { fresh: true });
    indexOps = claimRefIndexOps(ctx.content, [put, meta]);
    await ctx.content.publish([put, meta]);
  } catch (e) {
    await ctx.content.discard(meta ? [put, meta] : [put]).catch(() => {});
    throw e;
  }
  return { version: versionItem(ctx, actor, a, put, meta), indexOps: await indexOps };
}

function versionItem(ctx: ServiceContext, actor: Principal, a: StoreVersionArgs, put: StagedObject, meta: StagedObject): VersionItem {
  return {
    PK: artifactPk(a.artifactId),
    SK: versionSk(a.version),
    GSI1PK: stateGsiPk('DRAFT', indexShard(a.artifactId, ctx.layout.index_shards)),
    GSI1SK: createdGsiSk(a.createdAt, a.artifactId),
    type: 'version',
    artifact_id: a.artifactId,
    version: a.version,
    state: 'DRAFT',
    name: a.name,
    kind: a.kind,
    filename: a.filename,
    content_key: a.key,
    content_hash: put.digest,
    size: put.size,
    metadata_key: metadataKey(a.artifactId, a.version),
    metadata_hash: meta.digest,
    created_at: a.createdAt,
    created_by: actor,
    state_changed_at: a.createdAt,
    row_version: 1,
    proposal_round: 0,
  };
}
