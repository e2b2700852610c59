/**
 * The tamper-evident audit chain (DESIGN §3). Every audit item carries `seq`, `prev_hash` and `hash`
 * (sha256 of its canonical JSON without `hash` and without its declared view fields); the HEAD item
 * holds the artifact's `audit_seq` and `audit_head_hash`. Every audit write goes through
 * `commitAudited`: one transaction holding the domain writes, the audit items, the HEAD update
 * (conditioned on the sequence it read), the maintenance-fence check and the audit sinks' operations.
 */
import { canonicalDigest } from '../core/canonical-json.ts';
import { isoTimestamp } from '../core/clock.ts';
import type { Digest } from '../core/digest.ts';
import { ConditionFailed, Conflict, MaintenanceInProgress, NotFound } from '../core/errors.ts';
import { artifactPk, FENCE_SK, HEAD_SK, SYS_PK } from '../core/keys.ts';
import type { AuditEvent, ServiceContext } from '../lifecycle/context.ts';
import type { HeadItem } from '../lifecycle/model.ts';
import { cond, type Item, type TransactOp, type UpdateSpec } from '../store/item-store.ts';

export const AUDIT_TYPES = [
  'transition',
  'approval',
  'execution',
  'execution_output',
  'execution_finish',
  'provenance',
  'compensation',
] as const;
export type AuditType = (typeof AUDIT_TYPES)[number];

/** Attributes an audit item may change after it was written (read views), excluded from its hash. */
export const VIEW_FIELDS: Record<AuditType, readonly string[]> = {
  transition: [],
  approval: [],
  execution: ['status', 'exit_code', 'finished_at', 'outputs', 'uploads'],
  execution_output: [],
  execution_finish: [],
  provenance: [],
  compensation: ['state', 'GSI1PK', 'GSI1SK', 'updated_at'],
};

export function isAuditType(t: unknown): t is AuditType {
  return typeof t === 'string' && (AUDIT_TYPES as readonly string[]).includes(t);
}

export function auditHash(item: Record<string, unknown>): Digest {
  const type = item.type;
  const copy: Record<string, unknown> = { ...item };
  delete copy.hash;
  if (isAuditType(type)) for (const f of VIEW_FIELDS[type]) delete copy[f];
  return canonicalDigest(copy);
}

export interface AuditDraft {
  type: AuditType;
  /** Builds the sort key and GSI1 keys once the sequence number and timestamp are known. */
  keys(seq: number, timestamp: string): { SK: string; GSI1PK?: string; GSI1SK?: string };
  fields: Record<string, unknown>;
  /** Initial values of view fields (not hashed). */
  view?: Record<string, unknown>;
}

export interface AuditPlan {
  entries: AuditDraft[];
  /** Domain writes of the same transaction (version updates, run pointers, ...). */
  ops?: TransactOp[];
  /** Extra attributes to set on the HEAD in the same update. */
  headSet?: Record<string, unknown>;
  /** For a new artifact: the HEAD to create (audit_seq 0). */
  newHead?: HeadItem;
}

export interface CommitResult {
  items: Item[];
  timestamp: string;
}

const MAX_HEAD_RETRIES = 8;

export const fenceKey = { PK: SYS_PK, SK: FENCE_SK };

/** The condition every publisher's transaction checks: no maintenance fence is held. */
export function fenceCheck(): TransactOp {
  return { op: 'check', key: fenceKey, condition: cond.attrNotExists('holder') };
}

/** Fails fast (before any bytes are written) when the maintenance fence is held. */
export async function assertNotFenced(ctx: ServiceContext): Promise<void> {
  const fence = await ctx.items.get(fenceKey, { consistent: true });
  if (fence?.holder !== undefined) throw new MaintenanceInProgress(undefined, { holder: fence.holder, epoch: fence.epoch });
}

export async function readHead(ctx: ServiceContext, artifactId: string): Promise<HeadItem> {
  const head = await ctx.items.get({ PK: artifactPk(artifactId), SK: HEAD_SK }, { consistent: true });
  if (!head) throw new NotFound(`no artifact ${artifactId}`);
  return head as HeadItem;
}

/**
 * Reads the HEAD, asks `build` for the plan and commits it; when only the HEAD moved underneath (an
 * unrelated audit write won the race), reads again and rebuilds. Domain conditions that fail become
 * CONFLICT: somebody else changed what this operation read.
 */
export async function runAudited(
  ctx: ServiceContext,
  artifactId: string,
  build: (head: HeadItem) => Promise<AuditPlan> | AuditPlan,
): Promise<CommitResult> {
  for (let attempt = 0; ; attempt++) {
    const head = await readHead(ctx, artifactId);
    const plan = await build(head);
    try {
      return await commitAudited(ctx, head, plan);
    } catch (e) {
      if (e instanceof HeadMoved && attempt < MAX_HEAD_RETRIES) continue;
      if (e instanceof HeadMoved) throw new Conflict(`artifact ${artifactId} is busy: too many concurrent writers, retry`);
      throw e;
    }
  }
}

class HeadMoved extends Error {}

export async function commitAudited(ctx: ServiceContext, head: HeadItem | undefined, plan: AuditPlan): Promise<CommitResult> {
  const base = plan.newHead ?? head;
  if (!base) throw new NotFound('no artifact head');
  const artifactId = base.artifact_id;
  const timestamp = isoTimestamp(ctx.clock.now());
  let seq = base.audit_seq;
  let prev: Digest | null = base.audit_head_hash;
  const items: Item[] = [];
  for (const draft of plan.entries) {
    seq += 1;
    const keys = draft.keys(seq, timestamp);
    const item: Item = {
      PK: artifactPk(artifactId),
      ...keys,
      type: draft.type,
      artifact_id: artifactId,
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
  const domainOps = plan.ops ?? [];
  const auditOps: TransactOp[] = items.map((item) => ({ op: 'put', item, condition: cond.notExists() }));
  let headOp: TransactOp;
  if (plan.newHead) {
    headOp = { op: 'put', item: { ...plan.newHead, ...plan.headSet, audit_seq: seq, audit_head_hash: prev }, condition: cond.notExists() };
  } else {
    const update: UpdateSpec = { set: { ...plan.headSet, audit_seq: seq, audit_head_hash: prev } };
    headOp = { op: 'update', key: { PK: base.PK, SK: HEAD_SK }, update, condition: cond.eq('audit_seq', base.audit_seq) };
  }
  const events: AuditEvent[] = items.map((i) => ({
    event_id: `${artifactId}:${i.seq as number}`,
    type: i.type as string,
    aggregate_id: artifactId,
    timestamp,
  }));
  const sinkParts = await Promise.all(ctx.auditSinks.map((s) => s.opsFor(events)));
  const core = [...domainOps, ...auditOps, headOp, fenceCheck()];
  const headIndex = domainOps.length + auditOps.length;
  const fenceIndex = headIndex + 1;
  const attempt = async (sinkOps: TransactOp[]) => {
    await ctx.items.transactWrite([...core, ...sinkOps]);
  };
  try {
    try {
      await attempt(sinkParts.flatMap((p) => p.ops));
    } catch (e) {
      if (e instanceof ConditionFailed && e.failedIndex !== undefined && e.failedIndex > fenceIndex) {
        await attempt(sinkParts.flatMap((p) => p.fallback));
      } else throw e;
    }
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    if (e.failedIndex === fenceIndex) throw new MaintenanceInProgress();
    if (e.failedIndex === headIndex) {
      if (plan.newHead) throw new Conflict(`artifact ${artifactId} already exists`);
      throw new HeadMoved();
    }
    throw new Conflict(`artifact ${artifactId} changed concurrently; nothing was written`, { failedIndex: e.failedIndex });
  }
  return { items, timestamp };
}
