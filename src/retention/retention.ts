/**
 * ArtifactRetention (seed 004): reference scanning, a 7-day grace from first observation, approved
 * logical quarantine for 30 days, then a separately approved, journaled purge — all inside the
 * trusted host's maintenance fence, in the current epoch, never while a restore is held.
 *
 *   const retention = new ArtifactRetention(items, content);
 *   try { await retention.run(epoch, 'QUARANTINE', trustedHost, { maxArtifacts: 100 }); }
 *   finally { await retention.close(); }
 *
 * Not reachable over HTTP: an administrative API for trusted hosts (the CLI is one).
 */
import type { ContentStore } from '../content/content-store.ts';
import { type Clock, systemClock } from '../core/clock.ts';
import type { Digest } from '../core/digest.ts';
import { ConditionFailed, IntegrityError, InvalidInput, NotFound, RestoreHeld } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { OBSERVATION_SK_PREFIX, observationPartitions, retentionPk, retentionRunSk } from '../core/keys.ts';
import { cond, type ItemStore, type TransactOp } from '../store/item-store.ts';
import { queryAllMerged } from '../store/merge-query.ts';
import { createContext, type ServiceContext } from '../system/context.ts';
import { readInstallation, readLayout } from '../system/installation.ts';
import { type Layout, UNSHARDED } from '../system/layout.ts';
import { assertEpochAndNoHold, isRestoreHeld } from '../system/state.ts';
import {
  contentRootId,
  DEFAULT_MAX_ARTIFACTS,
  GRACE_MS,
  keyOfObservation,
  MAX_ARTIFACTS,
  type Observation,
  observationKey,
  type PlanCandidate,
  QUARANTINE_MS,
  type RetentionAction,
  type RetentionApproval,
  type RetentionPlan,
  retentionMaterialDigest,
  type TrustedHost,
} from './model.ts';
import { normalisePins, recordedPins, storedDigest, unlinkUnpinned } from './purge.ts';
import { type ReferenceScan, scanReferences } from './references.ts';
import { verifyRestoreReference } from './restore-proof.ts';

export interface RetentionResult {
  status: 'DONE' | 'NOTHING_TO_DO' | 'REFUSED';
  action: RetentionAction;
  reason?: string;
  plan?: RetentionPlan;
  plan_digest?: Digest;
  /** Keys that changed state in this run. */
  quarantined: string[];
  purged: string[];
  /** Observations dropped because their object is referenced again (eligibility reset). */
  reset: string[];
  /** New first observations (grace started). */
  observed: string[];
  /** Candidates left alone, and why. */
  skipped: Array<{ key: string; reason: string }>;
  scan: ReferenceScan['stats'];
}

/** The writer a run commits through: every transaction also proves the fence and the epoch. */
export interface MaintenanceCommitter {
  commit(ops: TransactOp[]): Promise<void>;
}

export interface RetentionHost extends Omit<TrustedHost, 'withMaintenance'> {
  withMaintenance<T>(epoch: number, fn: (m: MaintenanceCommitter) => Promise<T>): Promise<T>;
}

const BATCH = 80;

export class ArtifactRetention {
  private readonly ctx: ServiceContext;
  private layoutKnown: boolean;

  /**
   * `layout`: the installation's (ctx.layout); without it the installation record's is read before the
   * first observation is (its observation keys depend on index_shards).
   */
  constructor(items: ItemStore, content: ContentStore, opts: { clock?: Clock; layout?: Layout } = {}) {
    this.ctx = createContext({ items, content, clock: opts.clock ?? systemClock, layout: { ...(opts.layout ?? UNSHARDED) } });
    this.layoutKnown = opts.layout !== undefined;
  }

  private async layout(): Promise<Layout> {
    if (!this.layoutKnown) {
      this.ctx.layout = (await readLayout(this.ctx.items)) ?? { ...UNSHARDED };
      this.layoutKnown = true;
    }
    return this.ctx.layout;
  }

  async run(epoch: number, action: RetentionAction, host: RetentionHost, opts: { maxArtifacts?: number } = {}): Promise<RetentionResult> {
    if (action !== 'QUARANTINE' && action !== 'PURGE') throw new InvalidInput('action must be QUARANTINE or PURGE');
    const max = opts.maxArtifacts ?? DEFAULT_MAX_ARTIFACTS;
    if (!Number.isInteger(max) || max < 1 || max > MAX_ARTIFACTS) throw new InvalidInput(`maxArtifacts must be 1–${MAX_ARTIFACTS}`);
    if (!Number.isInteger(epoch) || epoch < 1) throw new InvalidInput('epoch must be a positive integer');
    await assertEpochAndNoHold(this.ctx.items, epoch);
    return host.withMaintenance(epoch, async (m) => {
      // Re-checked under the fence: the hold and epoch checks also ride in every commit below.
      if (await isRestoreHeld(this.ctx.items)) throw new RestoreHeld();
      return this.underFence(epoch, action, host, m, max);
    });
  }

  async close(): Promise<void> {}

  /** Observations of the current content root, by object key. */
  async observations(): Promise<Map<string, Observation>> {
    // Every observation shard of the root (one partition, RET#{root}, when unsharded).
    const pks = observationPartitions(contentRootId(this.ctx.content.location), (await this.layout()).index_shards);
    const items = await queryAllMerged(this.ctx.items, { pks, sk: { beginsWith: OBSERVATION_SK_PREFIX }, consistent: true });
    return new Map((items as Observation[]).map((o) => [o.key, o]));
  }

  private async underFence(
    epoch: number,
    action: RetentionAction,
    host: RetentionHost,
    m: MaintenanceCommitter,
    max: number,
  ): Promise<RetentionResult> {
    const ctx = this.ctx;
    const now = ctx.clock.now();
    const at = now.toISOString();
    const installation = await readInstallation(ctx);
    if (!installation) throw new NotFound('no installation here: run alp init');
    const root = contentRootId(ctx.content.location);
    const observed = await this.observations();
    const knownDigests = new Map<string, string>();
    for (const o of observed.values()) if (o.state === 'GRACE' || o.state === 'QUARANTINED') knownDigests.set(o.key, o.digest);
    // The pins recorded by interrupted purges stay in force with the host's own (never fewer pins).
    const pins = normalisePins(await host.pins(), recordedPins([...observed.values()].filter((o) => o.state === 'PREPARED')));
    const scan = await scanReferences(ctx, { pins, knownDigests });
    const result: RetentionResult = {
      status: 'DONE',
      action,
      quarantined: [],
      purged: [],
      reset: [],
      observed: [],
      skipped: [],
      scan: scan.stats,
    };

    // 1. Bring observations up to date with what the scan found.
    const { ops, current } = updateObservations({ root, shards: ctx.layout.index_shards }, observed, scan, at, result);
    for (let i = 0; i < ops.length; i += BATCH) await m.commit(ops.slice(i, i + BATCH));

    // 2. The plan.
    const chosen = eligibleCandidates(current, scan, action, now).slice(0, max);
    if (chosen.length === 0)
      return { ...result, status: 'NOTHING_TO_DO', reason: 'no candidate has completed its grace or quarantine period' };
    const plan = planOf(action, installation.installation_id, ctx.content.location, epoch, chosen, pins, at);
    const digest = retentionMaterialDigest(plan);
    Object.assign(result, { plan, plan_digest: digest });

    // 3. The human decision, checked here, not taken on trust.
    const approval = await host.approve(plan, digest);
    const refusal = await this.checkApproval(approval, digest, installation.installation_id);
    if (refusal) {
      await this.journal(m, root, action, digest, epoch, approval, { status: 'REFUSED', reason: refusal });
      return { ...result, status: 'REFUSED', reason: refusal };
    }
    const approved = approval as RetentionApproval;

    // 4. Act.
    if (action === 'QUARANTINE') {
      await quarantine(m, chosen, { at, digest, approved });
      result.quarantined = chosen.map((o) => o.key);
    } else {
      for (const o of chosen) await this.purgeOne(m, o, digest, approved, pins, result);
    }
    await this.journal(m, root, action, digest, epoch, approved, {
      status: 'DONE',
      quarantined: result.quarantined.length,
      purged: result.purged.length,
      skipped: result.skipped.length,
    });
    return result;
  }

  /** PREPARED (with the pins in force) before touching bytes; verify the digest; delete durably; then PURGED. */
  private async purgeOne(
    m: MaintenanceCommitter,
    o: Observation,
    planDigest: string,
    approval: RetentionApproval,
    pins: string[],
    result: RetentionResult,
  ) {
    const key = keyOfObservation(o);
    const at = () => this.ctx.clock.now().toISOString();
    const actual = await storedDigest(this.ctx.content, o.key);
    if (actual === undefined && o.state !== 'PREPARED') {
      // A missing file is accepted only for a previously prepared purge.
      result.skipped.push({ key: o.key, reason: 'missing, but no purge of it was prepared: left for an operator to investigate' });
      return;
    }
    if (actual !== undefined && actual !== o.digest) {
      result.skipped.push({ key: o.key, reason: `its bytes changed (${actual}, observed ${o.digest}): not purged, observation reset` });
      await m.commit([{ op: 'delete', key, condition: cond.eq('state', o.state) }]);
      return;
    }
    // A retried PREPARED record keeps the pins of its first attempt and adds this run's.
    const inForce = normalisePins(o.pins, pins);
    await m.commit([
      o.state === 'PREPARED'
        ? { op: 'update', key, update: { set: { pins: inForce } }, condition: cond.eq('state', 'PREPARED') }
        : {
            op: 'update',
            key,
            update: {
              set: {
                state: 'PREPARED',
                prepared_at: at(),
                plan_digest: planDigest,
                approved_by: approval.principal,
                evidence_ref: approval.evidence_ref,
                pins: inForce,
              },
            },
            condition: cond.and(cond.eq('state', 'QUARANTINED'), cond.eq('digest', o.digest)),
          },
    ]);
    if (actual !== undefined) await unlinkUnpinned(this.ctx.content, o.key, o.digest, new Set(inForce));
    try {
      await m.commit([
        { op: 'update', key, update: { set: { state: 'PURGED', purged_at: at() } }, condition: cond.eq('state', 'PREPARED') },
      ]);
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
      result.skipped.push({ key: o.key, reason: 'its journal record changed during the purge' });
      return;
    }
    result.purged.push(o.key);
  }

  private async checkApproval(a: RetentionApproval | undefined, digest: string, installationId: string): Promise<string | undefined> {
    if (!a) return 'the host did not approve the plan';
    if (a.principal?.kind !== 'human' || typeof a.principal.id !== 'string') return 'the approval does not name a human principal';
    if (typeof a.evidence_ref !== 'string' || a.evidence_ref.trim() === '') return 'the approval carries no evidence reference';
    if (a.plan_digest !== digest) return `the approval binds ${String(a.plan_digest)}, not this plan (${digest})`;
    const expires = Date.parse(a.expires_at);
    if (!Number.isFinite(expires) || expires <= this.ctx.clock.now().getTime()) return 'the approval has expired';
    return verifyRestoreReference(a.restore, installationId, this.ctx.items);
  }

  private async journal(
    m: MaintenanceCommitter,
    root: string,
    action: RetentionAction,
    digest: string,
    epoch: number,
    approval: RetentionApproval | undefined,
    outcome: Record<string, unknown>,
  ) {
    const at = this.ctx.clock.now().toISOString();
    await m.commit([
      {
        op: 'put',
        item: {
          PK: retentionPk(root),
          SK: retentionRunSk(at, newId(this.ctx.clock)),
          type: 'retention_run',
          action,
          epoch,
          plan_digest: digest,
          at,
          ...(approval ? { approved_by: approval.principal, evidence_ref: approval.evidence_ref, restore: approval.restore } : {}),
          ...outcome,
        },
      },
    ]);
  }
}

/**
 * Brings the observations up to date with what the scan found: lapses the ones referenced again,
 * gone or changed, starts grace for new candidates. Returns the writes and the observations in force.
 * An interrupted or finished purge whose digest is referenced again fails closed (IntegrityError).
 */
function updateObservations(
  { root, shards }: { root: string; shards: number },
  observed: Map<string, Observation>,
  scan: ReferenceScan,
  at: string,
  result: RetentionResult,
): { ops: TransactOp[]; current: Map<string, Observation> } {
  const ops: TransactOp[] = [];
  const current = new Map<string, Observation>();
  for (const o of observed.values()) {
    const key = keyOfObservation(o);
    const present = scan.objects.get(o.key);
    // An interrupted purge's bytes may be gone: a reference to its digest counts as one to it.
    const why = scan.referenced.get(o.key) ?? (o.state === 'PREPARED' && !present ? scan.digests.get(o.digest) : undefined);
    if (o.state === 'PREPARED' || o.state === 'PURGED') {
      // A new reference to bytes an interrupted or finished purge removed: fail closed, name it.
      if (why && !present) {
        throw new IntegrityError(
          `${o.key} (${o.digest}) is referenced again (${why}) but its purge removed the bytes; restore them before anything else`,
          {
            key: o.key,
            digest: o.digest,
          },
        );
      }
      if (why && o.state === 'PREPARED') {
        ops.push({ op: 'delete', key, condition: cond.eq('state', 'PREPARED') });
        result.reset.push(o.key);
      } else current.set(o.key, o);
      continue;
    }
    if (!why && !present && o.state === 'QUARANTINED') {
      // A missing file is accepted only for a previously prepared purge: keep the record, report it.
      result.skipped.push({ key: o.key, reason: 'missing, but no purge of it was prepared: left for an operator to investigate' });
      continue;
    }
    if (why || !present || (present.digest !== undefined && present.digest !== o.digest)) {
      // Referenced again, gone, or changed: the observation and its eligibility lapse.
      ops.push({ op: 'delete', key, condition: cond.eq('state', o.state) });
      result.reset.push(o.key);
    } else current.set(o.key, o);
  }
  startGrace({ root, shards }, scan, at, ops, current, result);
  return { ops, current };
}

/** A first observation, or a digest republished after its purge: a new 7-day grace period. */
function startGrace(
  { root, shards }: { root: string; shards: number },
  scan: ReferenceScan,
  at: string,
  ops: TransactOp[],
  current: Map<string, Observation>,
  result: RetentionResult,
) {
  for (const c of scan.candidates) {
    const prior = current.get(c.key);
    if (!c.digest || (prior && prior.state !== 'PURGED')) continue;
    const item: Observation = {
      ...observationKey(root, c.key, shards),
      type: 'retention_observation',
      key: c.key,
      digest: c.digest,
      size: c.size,
      state: 'GRACE',
      first_observed_at: at,
    };
    const pending = ops.findIndex((o) => o.op === 'delete' && o.key.SK === item.SK);
    if (pending >= 0) ops.splice(pending, 1);
    ops.push({ op: 'put', item });
    current.set(c.key, item);
    result.observed.push(c.key);
  }
}

/**
 * The observations an action may take now, in plan order: interrupted purges first, then the oldest
 * observation; unreferenced, past grace (QUARANTINE) or past quarantine (PURGE).
 */
function eligibleCandidates(current: Map<string, Observation>, scan: ReferenceScan, action: RetentionAction, now: Date): Observation[] {
  const eligible: Observation[] = [];
  for (const o of current.values()) {
    if (scan.referenced.has(o.key)) continue;
    if (action === 'QUARANTINE' && o.state === 'GRACE' && now.getTime() - Date.parse(o.first_observed_at) >= GRACE_MS) eligible.push(o);
    if (action === 'PURGE' && o.state === 'PREPARED') eligible.push(o);
    if (action === 'PURGE' && o.state === 'QUARANTINED' && now.getTime() - Date.parse(o.quarantined_at as string) >= QUARANTINE_MS)
      eligible.push(o);
  }
  eligible.sort(
    (a, b) =>
      (a.state === 'PREPARED' ? -1 : 0) - (b.state === 'PREPARED' ? -1 : 0) ||
      a.first_observed_at.localeCompare(b.first_observed_at) ||
      (a.key < b.key ? -1 : 1),
  );
  return eligible;
}

function planOf(
  action: RetentionAction,
  installationId: string,
  contentRoot: string,
  epoch: number,
  chosen: Observation[],
  pins: string[],
  at: string,
): RetentionPlan {
  const candidates: PlanCandidate[] = chosen.map((o) => ({
    key: o.key,
    digest: o.digest,
    size: o.size,
    state: o.state,
    first_observed_at: o.first_observed_at,
    ...(o.quarantined_at ? { quarantined_at: o.quarantined_at } : {}),
  }));
  return {
    action,
    installation_id: installationId,
    content_root: contentRoot,
    epoch,
    candidates,
    pins,
    total_bytes: candidates.reduce((n, c) => n + c.size, 0),
    created_at: at,
  };
}

/** GRACE → QUARANTINED for every chosen observation, under the approval, in batches. */
async function quarantine(
  m: MaintenanceCommitter,
  chosen: Observation[],
  { at, digest, approved }: { at: string; digest: string; approved: RetentionApproval },
): Promise<void> {
  const q: TransactOp[] = chosen.map((o) => ({
    op: 'update',
    key: keyOfObservation(o),
    update: {
      set: {
        state: 'QUARANTINED',
        quarantined_at: at,
        plan_digest: digest,
        approved_by: approved.principal,
        evidence_ref: approved.evidence_ref,
      },
    },
    condition: cond.and(cond.eq('state', 'GRACE'), cond.eq('digest', o.digest)),
  }));
  for (let i = 0; i < q.length; i += BATCH) await m.commit(q.slice(i, i + BATCH));
}
