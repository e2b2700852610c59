/**
 * The tamper-evident audit chain (docs/audit-format.md, docs/design.md §5). Every audit item carries `seq`, `prev_hash` and `hash`
 * (sha256 of its canonical JSON without `hash` and without its declared view fields); the HEAD item
 * holds the artifact's `audit_seq` and `audit_head_hash`. Every audit write goes through
 * `commitAudited`: one transaction holding the domain writes, the audit items of one or more artifact
 * chains, each HEAD update (conditioned on the sequence it read), the registered publish checks
 * (ctx.publishChecks: the retention guard), the maintenance-fence check (system/fence.ts) and the
 * registered audit sinks' operations (ctx.auditSinks: telemetry), and each chain's transparency-log
 * record: its entries' hashes queued on its HEAD, flagged pending, or moved with the queue into a pending
 * marker when it is full (tlog/markers.ts).
 */
import { isoTimestamp } from '../core/clock.ts';
import type { Digest } from '../core/digest.ts';
import { ConditionFailed, Conflict, MaintenanceInProgress, NotFound } from '../core/errors.ts';
import { artifactPk, HEAD_SK } from '../core/keys.ts';
import type { HeadItem } from '../core/model.ts';
import { cond, type Item, MAX_TRANSACT_OPS, type TransactOp, type UpdateSpec } from '../store/item-store.ts';
import { applyUpdate } from '../store/semantics.ts';
import type { AuditEvent, ServiceContext } from '../system/context.ts';
import { fenceCheck } from '../system/fence.ts';
import { type AuditType, auditHash } from './hash.ts';
import { assertPolicyBound } from './policy.ts';
import { commitWithSinks, sinkOpsFor } from './sink-commit.ts';
import { queueAppend } from './tlog/markers.ts';

export { AUDIT_TYPES, type AuditType, auditHash, hashedPart, isAuditType, RESERVATION_PREFIX, VIEW_FIELDS } from './hash.ts';

export interface AuditDraft {
  type: AuditType;
  /** Builds the sort key and GSI1 keys once the sequence number and timestamp are known. */
  keys(seq: number, timestamp: string): { SK: string; GSI1PK?: string; GSI1SK?: string };
  fields: Record<string, unknown>;
  /** Initial values of view fields (not hashed). */
  view?: Record<string, unknown>;
}

export interface ChainPlan {
  artifactId: string;
  entries: AuditDraft[];
  /** Extra attributes to set on the HEAD in the same update. */
  headSet?: Record<string, unknown>;
  /** For a new artifact: the HEAD to create (audit_seq 0). */
  newHead?: HeadItem;
}

export interface AuditPlan {
  chains: ChainPlan[];
  /** Domain writes of the same transaction (version updates, run pointers, ...). */
  ops?: TransactOp[];
  /** Object keys this commit makes referenced (uploads): retention must not have reclaimed them. */
  published?: string[];
}

export interface CommitResult {
  items: Item[];
  timestamp: string;
}

const MAX_HEAD_RETRIES = 10;

/**
 * Operations every audit transaction adds beyond the plan's ops and entries: the HEAD update, the
 * transparency log's pending marker of that chain when its HEAD queue is full (tlog/markers.ts), the maintenance-fence check and
 * one audit-sink fallback (the telemetry drop counter). Plans must fit in
 * MAX_TRANSACT_OPS - AUDIT_RESERVED_OPS; a plan that extends a second chain counts that chain's HEAD
 * and marker itself.
 */
export const AUDIT_RESERVED_OPS = 4;

/**
 * The result of a change that committed: read fresh when the store answers, else the state the commit
 * wrote. A committed change is never reported as failed because reading it back failed (a caller
 * would retry a change that already happened).
 */
export async function readBackOr<T>(read: () => Promise<T>, committed: () => T): Promise<T> {
  try {
    return await read();
  } catch {
    return committed();
  }
}

/** The state `current` has after a commit's operations on it (puts replace it, updates apply). */
export function afterOps<T extends Item>(current: T, ops: readonly TransactOp[]): T {
  let out: Item = current;
  for (const op of ops) {
    if (op.op === 'put' && op.item.PK === current.PK && op.item.SK === current.SK) out = op.item;
    if (op.op === 'update' && op.key.PK === current.PK && op.key.SK === current.SK) out = applyUpdate(op.key, out, op.update);
  }
  return out as T;
}

export async function readHead(ctx: ServiceContext, artifactId: string): Promise<HeadItem> {
  const head = await ctx.items.get({ PK: artifactPk(artifactId), SK: HEAD_SK }, { consistent: true });
  if (head?.type !== 'head') throw new NotFound(`no artifact ${artifactId}`);
  return head as HeadItem;
}

/** Every artifact's HEAD (a base-table scan: GSI1 is eventually consistent on DynamoDB). */
export async function* allHeads(ctx: Pick<ServiceContext, 'items'>): AsyncIterable<HeadItem> {
  let cursor: string | undefined;
  do {
    const page = await ctx.items.scan(cursor ? { cursor } : {});
    for (const item of page.items) if (item.SK === HEAD_SK && item.type === 'head') yield item as HeadItem;
    cursor = page.cursor;
  } while (cursor);
}

export type Heads = Record<string, HeadItem>;

/**
 * Reads the HEADs, asks `build` for the plan and commits it; when only a HEAD moved underneath (an
 * unrelated audit write won the race) it reads again and rebuilds, so `build` always decides on fresh
 * state. Domain conditions that fail become CONFLICT: somebody else changed what this operation read.
 */
export async function runAudited(
  ctx: ServiceContext,
  artifactIds: string[],
  build: (heads: Heads) => Promise<AuditPlan> | AuditPlan,
): Promise<CommitResult> {
  for (let attempt = 0; ; attempt++) {
    const heads: Heads = {};
    for (const id of artifactIds) heads[id] = await readHead(ctx, id);
    const plan = await build(heads);
    try {
      return await commitAudited(ctx, heads, plan);
    } catch (e) {
      if (e instanceof HeadMoved && attempt < MAX_HEAD_RETRIES) continue;
      if (e instanceof HeadMoved) throw new Conflict(`artifact ${artifactIds.join(', ')} is busy: too many concurrent writers, retry`);
      throw e;
    }
  }
}

class HeadMoved extends Error {}

/** States whose entry is decided by the artifact's policy (quorum counting, execution start). */
const POLICY_DECIDED_STATES: readonly unknown[] = ['APPROVED', 'EXECUTING'];

/** A move the policy decides is only committed on a HEAD whose policy is the chained one (policy.ts). */
async function assertDecisionsOnBoundPolicy(ctx: ServiceContext, heads: Heads, plan: AuditPlan): Promise<void> {
  for (const chain of plan.chains) {
    const head = heads[chain.artifactId];
    if (chain.newHead || !head) continue;
    if (chain.entries.some((e) => e.type === 'transition' && POLICY_DECIDED_STATES.includes(e.fields.to)))
      await assertPolicyBound(ctx, head);
  }
}

export async function commitAudited(ctx: ServiceContext, heads: Heads, plan: AuditPlan): Promise<CommitResult> {
  await assertDecisionsOnBoundPolicy(ctx, heads, plan);
  const timestamp = isoTimestamp(ctx.clock.now());
  const items: Item[] = [];
  // The transparency log's record of each chain: its HEAD's queue and pending flag, and a pending marker
  // when the queue is full (tlog/markers.ts queueAppend); the markers go last, so the indexes below keep their meaning.
  const markers: TransactOp[] = [];
  const logged = (base: HeadItem, firstSeq: number, entries: Item[]): Record<string, unknown> => {
    if (ctx.tlogMarkers === false || entries.length === 0) return {};
    const hashes = entries.map((e) => e.hash as string);
    const q = queueAppend(base.artifact_id, base, firstSeq, hashes, timestamp, ctx.layout.telemetry_shards);
    for (const item of q.markers) markers.push({ op: 'put', item });
    return q.set;
  };
  const headOps: TransactOp[] = [];
  const newHeadIds: string[] = [];
  for (const chain of plan.chains) {
    const base = chain.newHead ?? heads[chain.artifactId];
    if (!base) throw new NotFound(`no artifact ${chain.artifactId}`);
    let seq = base.audit_seq;
    let prev: Digest | null = base.audit_head_hash;
    const firstItem = items.length;
    for (const draft of chain.entries) {
      seq += 1;
      const item: Item = {
        PK: artifactPk(chain.artifactId),
        ...draft.keys(seq, timestamp),
        type: draft.type,
        artifact_id: chain.artifactId,
        seq,
        timestamp,
        ...draft.fields,
        prev_hash: prev,
      };
      item.hash = auditHash(item);
      if (draft.view) Object.assign(item, draft.view);
      prev = item.hash as Digest;
      items.push(item);
    }
    const log = logged(base, base.audit_seq + 1, items.slice(firstItem));
    if (chain.newHead) {
      newHeadIds.push(chain.artifactId);
      headOps.push({
        op: 'put',
        item: { ...chain.newHead, ...chain.headSet, audit_seq: seq, audit_head_hash: prev, ...log },
        condition: cond.notExists(),
      });
    } else {
      const update: UpdateSpec = { set: { ...chain.headSet, audit_seq: seq, audit_head_hash: prev, ...log } };
      headOps.push({ op: 'update', key: { PK: base.PK, SK: HEAD_SK }, update, condition: cond.eq('audit_seq', base.audit_seq) });
    }
  }
  const domainOps = plan.ops ?? [];
  const auditOps: TransactOp[] = items.map((item) => ({ op: 'put', item, condition: cond.notExists() }));
  const events: AuditEvent[] = items.map((i) => ({
    event_id: `${i.artifact_id as string}:${i.seq as number}`,
    type: i.type as string,
    aggregate_id: i.artifact_id as string,
    timestamp,
    seq: i.seq as number,
    hash: i.hash as string,
  }));
  const published = plan.published ?? [];
  const guards = published.length === 0 ? [] : ctx.publishChecks.flatMap((check) => check(ctx.content, published, ctx.layout));
  const core = [
    ...domainOps,
    ...auditOps,
    ...headOps,
    ...guards,
    fenceCheck(ctx, { kind: 'artifacts', ids: plan.chains.map((c) => c.artifactId) }),
    ...markers,
  ];
  const firstHead = domainOps.length + auditOps.length;
  const firstGuard = firstHead + headOps.length;
  const fenceIndex = firstGuard + guards.length;
  // The sinks get what the transaction has left; the lifecycle leaves room for one fallback op
  // (a counted drop, AUDIT_RESERVED_OPS). A sink never blocks the audit write (sink-commit.ts).
  const sinkParts = await sinkOpsFor(ctx.auditSinks, events, MAX_TRANSACT_OPS - core.length);
  try {
    await commitWithSinks((sinkOps) => ctx.items.transactWrite([...core, ...sinkOps]), sinkParts, core.length);
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    const i = e.failedIndex;
    if (i === fenceIndex) throw new MaintenanceInProgress();
    if (i !== undefined && i >= firstGuard && i < fenceIndex) {
      throw new Conflict('retention reclaimed an object this upload wrote before it was committed; nothing was written, retry the upload');
    }
    if (i !== undefined && i >= firstHead && i < firstGuard) {
      const chain = plan.chains[i - firstHead];
      if (chain?.newHead) throw new Conflict(`artifact ${chain.artifactId} already exists`);
      throw new HeadMoved();
    }
    // An audit entry's key is derived from the HEAD it read: a collision means the HEAD moved.
    if (i !== undefined && i >= domainOps.length && i < firstHead) throw new HeadMoved();
    throw new Conflict('the artifact changed concurrently; nothing was written', { failedIndex: i });
  }
  for (const observe of [...ctx.auditSinks.map((s) => s.committed?.bind(s)), ...(ctx.commitObservers ?? [])]) {
    try {
      observe?.(items);
    } catch {
      // an observer never fails a committed write
    }
  }
  return { items, timestamp };
}
