/**
 * Archive: for an artifact whose versions are all settled, copy every object it names (version
 * content, metadata snapshots, execution outputs) to archive/{yyyy}/{mm}/{id}/… (GLACIER where the
 * engine has classes) and move every version to ARCHIVED, at any size: CHUNKED, JOURNALED, RESUMABLE.
 *
 * - The plan (archive-plan.ts) is a pure function of the archive time and of the version and
 *   execution items; the journal item ART#{id} / ARCHIVE records the time, what was planned and the
 *   progress, so a re-run (`alp artifact archive` again, on any node) continues the same plan.
 * - Each chunk first copies its objects (create-only: the identical bytes already at a key are
 *   success, so a copy redone after a crash is harmless; engines verify each copy without reading it
 *   back: S3 by checksum or source, content-store.ts), then commits ONE audited transaction: the moves of
 *   its versions to ARCHIVED with their Transition entries, its executions' archive_objects, the journal
 *   update, the HEAD, the fence check, the retention publish checks of its copies and the telemetry
 *   records, sized to fit MAX_TRANSACT_OPS (AUDIT_RESERVED_OPS kept free, telemetry never dropped for size).
 * - The FIRST chunk also creates the journal (status ARCHIVING) and marks the HEAD `archived: { status:
 *   'ARCHIVING' }`, in the same transaction as the first moves: no version is ever ARCHIVED without the
 *   journal and the marker, and from that commit on reads and listings show ARCHIVING and new versions
 *   are refused (addVersion refuses any `archived` HEAD). Its build re-lists the versions, so a version
 *   added before it commits fails the archive (retry: it is not settled), as before chunking.
 * - The LAST chunk sets status ARCHIVED on the journal and the HEAD. A crash anywhere leaves either
 *   nothing recorded (before the first commit: only orphan copies, which retention may reclaim) or a
 *   journal saying ARCHIVING with whole chunks committed; the next call resumes from the first
 *   version not yet ARCHIVED. Every version moves exactly once (its update is conditioned on the state
 *   and row_version it was read in).
 * Originals stay: only the retention protocol may remove them.
 */
import { AUDIT_RESERVED_OPS, type AuditPlan, type Heads, readHead, runAudited } from '../audit/chain.ts';
import { Conflict } from '../core/errors.ts';
import { archiveJournalKey } from '../core/keys.ts';
import { forEachLimited } from '../core/limit.ts';
import { cond, type Item, MAX_TRANSACT_OPS, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertNotFenced } from '../system/fence.ts';
import { assertActor } from './access.ts';
import { type ArchiveUnit, packChunks, pendingUnits } from './archive-plan.ts';
import { type ExecutionItem, listExecutions } from './executions.ts';
import type { ArchivedObject, HeadItem, Principal, VersionItem } from './model.ts';
import { merge, type Planned, planMove } from './moves.ts';
import { COUNTER_SUBSHARDS } from './state-counts.ts';
import { SETTLED_STATES } from './state-machine.ts';
import { listVersions } from './versions.ts';

/** Copies in flight per chunk. */
const COPY_CONCURRENCY = 8;
/** A HEAD lists its archived objects up to this many; larger archives list them on the versions and runs. */
export const HEAD_OBJECTS_MAX = 64;
/**
 * Operations of a chunk beyond its units: the journal write and the state-counter updates its moves
 * fold into, at most one per counter item of the artifact's index shard (AUDIT_RESERVED_OPS covers
 * HEAD, fence, sink).
 */
const CHUNK_OVERHEAD_OPS = 1 + COUNTER_SUBSHARDS;

export interface ArchiveJournal extends Item {
  type: 'archive_journal';
  artifact_id: string;
  status: 'ARCHIVING' | 'ARCHIVED';
  /** The archive time: the target keys' archive/{yyyy}/{mm}/ and HEAD archived.at. */
  at: string;
  started_by: string;
  /** What was planned when the first chunk committed. */
  planned_versions: number;
  planned_runs: number;
  planned_objects: number;
  chunks_committed: number;
  versions_archived: number;
  updated_at: string;
}

const journalKey = archiveJournalKey;

export async function readArchiveJournal(ctx: ServiceContext, artifactId: string): Promise<ArchiveJournal | undefined> {
  return (await ctx.items.get(journalKey(artifactId), { consistent: true })) as ArchiveJournal | undefined;
}

type ArchiveMark = { at: string; status?: 'ARCHIVING' | 'ARCHIVED'; objects: ArchivedObject[]; object_count?: number };

export async function archiveArtifact(ctx: ServiceContext, actor: Principal, artifactId: string): Promise<{ archived: ArchivedObject[] }> {
  assertActor('archive', actor);
  await assertNotFenced(ctx, { kind: 'artifacts', ids: [artifactId] });
  const head = await readHead(ctx, artifactId);
  const journal = await readArchiveJournal(ctx, artifactId);
  if (journal?.status === 'ARCHIVED' || (!journal && head.archived)) {
    // Archiving twice is refused, never a silent second pass: the archive was made once, at this time.
    const at = journal?.at ?? head.archived?.at;
    throw new Conflict(`artifact ${artifactId} is already archived${at ? ` (since ${at})` : ''}`, {
      reason: 'ALREADY_ARCHIVED',
      ...(at ? { archived_at: at } : {}),
    });
  }
  const versions = await listVersions(ctx.items, artifactId);
  if (!journal) assertAllSettled(artifactId, versions);
  const executions = await listExecutions(ctx, artifactId);
  const at = journal ? new Date(journal.at) : ctx.clock.now();
  const units = pendingUnits(at, artifactId, versions, executions);
  const budget = MAX_TRANSACT_OPS - AUDIT_RESERVED_OPS - CHUNK_OVERHEAD_OPS;
  let chunks: ArchiveUnit[][];
  try {
    chunks = packChunks(units, budget, Boolean(head.compensates));
  } catch (e) {
    throw new Conflict(`artifact ${artifactId} cannot be archived: ${(e as Error).message}`);
  }
  if (chunks.length === 0) chunks = [[]];
  // Every object of the archive: those recorded by committed chunks, then this call's (whose sizes
  // the copies fill in before their chunk commits).
  const done = [...versions, ...executions].flatMap((i) => (i.archive_objects as ArchivedObject[] | undefined) ?? []);
  const total = [...done, ...units.flatMap((u) => u.objects)];
  const state = { first: journal === undefined };
  for (const [i, chunk] of chunks.entries()) {
    await copyChunk(ctx, chunk);
    const last = i === chunks.length - 1;
    await runAudited(ctx, [artifactId], (heads) =>
      chunkPlan(ctx, heads, { artifactId, actor, at, chunk, first: state.first, last, versions, executions, total }),
    );
    state.first = false;
  }
  return { archived: total };
}

function assertAllSettled(artifactId: string, versions: VersionItem[]): void {
  const unsettled = versions.filter((v) => !SETTLED_STATES.includes(v.state));
  if (unsettled.length) {
    throw new Conflict(
      `artifact ${artifactId} has versions that are not settled: ${unsettled.map((v) => `v${v.version} ${v.state}`).join(', ')}`,
    );
  }
}

async function copyChunk(ctx: ServiceContext, chunk: ArchiveUnit[]): Promise<void> {
  const objects = chunk.flatMap((u) => u.objects);
  await forEachLimited(objects, COPY_CONCURRENCY, async (o) => {
    const written = await ctx.content.copy(o.original_key, o.archive_key, { expectedDigest: o.digest, storageClass: 'GLACIER' });
    o.size = written.size;
  });
}

interface ChunkInput {
  artifactId: string;
  actor: Principal;
  at: Date;
  chunk: ArchiveUnit[];
  first: boolean;
  last: boolean;
  versions: VersionItem[];
  executions: ExecutionItem[];
  total: ArchivedObject[];
}

async function chunkPlan(ctx: ServiceContext, heads: Heads, c: ChunkInput): Promise<AuditPlan> {
  const head = heads[c.artifactId] as HeadItem;
  const mark = head.archived as ArchiveMark | undefined;
  const at = c.at.toISOString();
  if (c.first) {
    if (mark)
      throw new Conflict(
        `artifact ${c.artifactId} is already ${mark.status === 'ARCHIVING' ? 'being archived: run archive again to resume' : 'archived'}`,
      );
    const current = await listVersions(ctx.items, c.artifactId);
    if (current.length !== c.versions.length) throw new Conflict(`artifact ${c.artifactId} gained a version while archiving; retry`);
    assertAllSettled(c.artifactId, current);
  } else if (mark?.status !== 'ARCHIVING' || mark.at !== at) {
    throw new Conflict(`artifact ${c.artifactId} is not being archived from ${at}; run archive again`);
  }
  const stamp = ctx.clock.now().toISOString();
  const parts: Planned[] = [];
  const ops: TransactOp[] = [];
  for (const u of c.chunk) {
    const archive_objects = u.objects.map((o) => ({ ...o }));
    if (u.kind === 'version') {
      const contentCopy = archive_objects.find((a) => a.original_key === u.item.content_key);
      const set = { archive_objects, ...(contentCopy ? { archive_key: contentCopy.archive_key } : {}) };
      parts.push(planMove(head, u.item, 'ARCHIVED', 'archive', c.actor, stamp, { reason: 'archived', set }));
    } else {
      ops.push({
        op: 'update',
        key: { PK: u.item.PK, SK: u.item.SK },
        update: { set: { archive_objects } },
        condition: cond.and(cond.exists(), cond.attrNotExists('archive_objects')),
      });
    }
  }
  const merged = merge(...parts);
  const versionsNow = c.chunk.filter((u) => u.kind === 'version').length;
  return {
    chains: [{ artifactId: c.artifactId, entries: merged.entries, ...headSet(c, at) }],
    ops: [...merged.ops, ...ops, journalOp(c, at, stamp, versionsNow)],
    published: c.chunk.flatMap((u) => u.objects.map((o) => o.archive_key)),
  };
}

function headSet(c: ChunkInput, at: string): { headSet?: Record<string, unknown> } {
  if (c.last) {
    const small = c.total.length <= HEAD_OBJECTS_MAX;
    const archived: ArchiveMark = { at, status: 'ARCHIVED', objects: small ? c.total : [], object_count: c.total.length };
    return { headSet: { archived } };
  }
  if (c.first) return { headSet: { archived: { at, status: 'ARCHIVING', objects: [] } satisfies ArchiveMark } };
  return {};
}

function journalOp(c: ChunkInput, at: string, stamp: string, versionsNow: number): TransactOp {
  const key = journalKey(c.artifactId);
  const status = c.last ? 'ARCHIVED' : 'ARCHIVING';
  if (c.first) {
    const item: ArchiveJournal = {
      ...key,
      type: 'archive_journal',
      artifact_id: c.artifactId,
      status,
      at,
      started_by: c.actor.id,
      planned_versions: c.versions.length,
      planned_runs: c.executions.length,
      planned_objects: c.total.length,
      chunks_committed: 1,
      versions_archived: versionsNow,
      updated_at: stamp,
    };
    return { op: 'put', item, condition: cond.notExists() };
  }
  return {
    op: 'update',
    key,
    update: { set: { status, updated_at: stamp }, add: { chunks_committed: 1, versions_archived: versionsNow } },
    condition: cond.eq('status', 'ARCHIVING'),
  };
}
