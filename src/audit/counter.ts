/**
 * Tail truncation evidence (issue 14 item 12). Two records independent of the chains themselves:
 *
 * - the installation-wide audit append counter: `audit_appended` on each telemetry shard's STATE item
 *   (TELQ#outbox / STATE when the outbox has one shard; src/telemetry/shards.ts), summed by readers.
 *   Every audit transaction already updates the STATE of its artifact's shard (the sink admits or
 *   drops one record per entry), so the counter adds no new hot item. `audit_baseline`, on the root
 *   TELQ#outbox / STATE, is the sum of every chain's length when counting began (0 for a new
 *   installation; `alp init` / `alp start` record it for an older one). Invariant: sum of every
 *   HEAD's audit_seq = baseline + appended (the sum over the shards).
 *   Deleting the last entries of a chain and setting its HEAD back lowers the sum.
 * - checkpoints (`alp audit checkpoint`): every chain's (audit_seq, head hash) and the counter, in a
 *   file the operator keeps elsewhere; `alp audit verify --checkpoint FILE` proves every chain still
 *   extends it (the entry at that seq has that hash, and the chain is not shorter).
 */
import { Conflict, InvalidInput } from '../core/errors.ts';
import { cond } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { readInstallation } from '../system/installation.ts';
import { readQueueStates, stateKey } from '../telemetry/shards.ts';
import { allHeads } from './chain.ts';
import { loadChain } from './history.ts';

export interface CounterState {
  appended: number;
  baseline: number | undefined;
}

interface ShardedCounter extends CounterState {
  shards: number;
}

/** The counter summed over the outbox's shards (one consistent read each), the baseline from the root. */
async function readCounter(ctx: ServiceContext): Promise<ShardedCounter | undefined> {
  const q = await readQueueStates(ctx.items);
  if (!q) return undefined;
  return {
    appended: q.states.reduce((n, s) => n + (typeof s.audit_appended === 'number' ? s.audit_appended : 0), 0),
    baseline: typeof q.root.audit_baseline === 'number' ? q.root.audit_baseline : undefined,
    shards: q.shards,
  };
}

async function sumOfChains(ctx: ServiceContext): Promise<number> {
  let sum = 0;
  for await (const h of allHeads(ctx)) sum += h.audit_seq;
  return sum;
}

/**
 * The sum of every chain's length read while the counter did not move (a scan is not a snapshot):
 * undefined if writers kept appending through `attempts` scans.
 */
async function stableSum(ctx: ServiceContext, attempts = 3): Promise<{ sum: number; counter: ShardedCounter } | undefined> {
  for (let i = 0; i < attempts; i++) {
    const before = await readCounter(ctx);
    if (!before) return undefined;
    const sum = await sumOfChains(ctx);
    const after = await readCounter(ctx);
    if (after && after.appended === before.appended) return { sum, counter: after };
  }
  return undefined;
}

/**
 * Records the baseline once (`alp init` / `alp start`), after the telemetry queue exists: the sum of
 * the chains minus what the counter already holds, conditioned on the counter not having moved.
 * Returns the baseline in force, or undefined when it could not be recorded now (writers active).
 */
export async function establishAuditBaseline(ctx: ServiceContext): Promise<number | undefined> {
  const current = await readCounter(ctx);
  if (!current) return undefined;
  if (current.baseline !== undefined) return current.baseline;
  const read = await stableSum(ctx);
  if (!read) return undefined;
  const baseline = read.sum - read.counter.appended;
  try {
    await ctx.items.update(
      stateKey,
      { set: { audit_baseline: baseline } },
      {
        // With shards the appended counts live on other items: the stable read (every shard's count
        // only grows, so an equal sum means no append in between) already made sum and count one instant.
        condition:
          read.counter.shards > 1
            ? cond.attrNotExists('audit_baseline')
            : cond.and(
                cond.attrNotExists('audit_baseline'),
                read.counter.appended === 0 ? cond.attrNotExists('audit_appended') : cond.eq('audit_appended', read.counter.appended),
              ),
      },
    );
    return baseline;
  } catch {
    return (await readCounter(ctx))?.baseline;
  }
}

export interface CounterCheck {
  /** `checked`: the invariant was evaluated; `not_established`: no baseline yet; `busy`: writers kept appending. */
  status: 'checked' | 'not_established' | 'busy';
  ok: boolean;
  sum?: number;
  baseline?: number;
  appended?: number;
  detail: string;
}

export async function checkAuditCounter(ctx: ServiceContext): Promise<CounterCheck> {
  const counter = await readCounter(ctx);
  if (counter?.baseline === undefined)
    return { status: 'not_established', ok: true, detail: 'no audit append counter baseline yet (alp init or alp start records it)' };
  const read = await stableSum(ctx);
  if (!read) return { status: 'busy', ok: true, detail: 'writers kept appending during the check; run it again when quieter' };
  const baseline = read.counter.baseline as number;
  const expected = baseline + read.counter.appended;
  const ok = read.sum === expected;
  return {
    status: 'checked',
    ok,
    sum: read.sum,
    baseline,
    appended: read.counter.appended,
    detail: ok
      ? `the chains hold ${read.sum} entries, as the counter says`
      : `the chains hold ${read.sum} entries but ${expected} were appended (baseline ${baseline} + ${read.counter.appended}): ${read.sum < expected ? 'entries were removed (tail truncation)' : 'entries were added outside ALP'}`,
  };
}

export const CHECKPOINT_FORMAT = 'alp-audit-checkpoint/1';

export interface Checkpoint {
  format: typeof CHECKPOINT_FORMAT;
  installation_id: string | null;
  taken_at: string;
  counter: { appended: number; baseline: number | null } | null;
  artifacts: Record<string, { audit_seq: number; audit_head_hash: string | null }>;
}

export async function takeCheckpoint(ctx: ServiceContext): Promise<Checkpoint> {
  const counter = await readCounter(ctx);
  const artifacts: Checkpoint['artifacts'] = {};
  for await (const h of allHeads(ctx)) artifacts[h.artifact_id] = { audit_seq: h.audit_seq, audit_head_hash: h.audit_head_hash };
  return {
    format: CHECKPOINT_FORMAT,
    installation_id: (await readInstallation(ctx))?.installation_id ?? null,
    taken_at: ctx.clock.now().toISOString(),
    counter: counter ? { appended: counter.appended, baseline: counter.baseline ?? null } : null,
    artifacts,
  };
}

export function parseCheckpoint(text: string): Checkpoint {
  let cp: Checkpoint;
  try {
    cp = JSON.parse(text) as Checkpoint;
  } catch (e) {
    throw new InvalidInput(`the checkpoint is not JSON: ${(e as Error).message}`);
  }
  if (cp?.format !== CHECKPOINT_FORMAT || typeof cp.artifacts !== 'object' || cp.artifacts === null)
    throw new InvalidInput(`not an ALP audit checkpoint (format ${CHECKPOINT_FORMAT})`);
  return cp;
}

export interface CheckpointFinding {
  artifact_id: string;
  problem: string;
}

/** Every way the chains no longer extend the checkpoint. */
export async function verifyCheckpoint(ctx: ServiceContext, cp: Checkpoint): Promise<CheckpointFinding[]> {
  const installation = (await readInstallation(ctx))?.installation_id ?? null;
  if (cp.installation_id !== null && installation !== cp.installation_id)
    throw new Conflict(`the checkpoint is of installation ${cp.installation_id}, this is ${String(installation)}`);
  const findings: CheckpointFinding[] = [];
  for (const [id, at] of Object.entries(cp.artifacts)) {
    const { head, entries } = await loadChain(ctx, id, { tolerant: true });
    if (!head) {
      findings.push({ artifact_id: id, problem: `the artifact is gone (the checkpoint has ${at.audit_seq} entries)` });
      continue;
    }
    if (head.audit_seq < at.audit_seq) {
      findings.push({
        artifact_id: id,
        problem: `the chain has ${head.audit_seq} entries, fewer than the checkpoint's ${at.audit_seq} (truncated)`,
      });
      continue;
    }
    const entry = at.audit_seq === 0 ? undefined : entries.find((e) => e.seq === at.audit_seq);
    const hash = entry ? (entry.hash as string) : null;
    if (hash !== at.audit_head_hash)
      findings.push({ artifact_id: id, problem: `entry ${at.audit_seq} is not the one the checkpoint records (history was rewritten)` });
  }
  const counter = await readCounter(ctx);
  if (cp.counter && counter && counter.appended < cp.counter.appended)
    findings.push({ artifact_id: '*', problem: `the audit append counter went back from ${cp.counter.appended} to ${counter.appended}` });
  return findings;
}
