/**
 * ArtifactRetention (seed 004): reference scanning, a 7-day grace from first observation, approved
 * logical quarantine for 30 days, then a separately approved, journaled purge — in the current epoch,
 * never while a restore is held. The plan is made outside the maintenance fence (read-only); under the
 * fence a run only re-validates the plan against every change since it was made, commits and acts
 * (docs/design.md §6 "short fence").
 *
 *   const retention = new ArtifactRetention(database, artifactRoot); // or (items, content, opts)
 *   try {
 *     const { plan_digest } = await retention.plan(epoch, 'QUARANTINE', { maxArtifacts: 100 });
 *     // …a human reviews the plan…
 *     await retention.run(epoch, 'QUARANTINE', trustedHost, { maxArtifacts: 100, planDigest: plan_digest });
 *   } finally { await retention.close(); }
 *
 * Unlike the seed's synchronous sketch every method is async (returns a Promise): the distributed
 * engines (DynamoDB, S3) answer over the network. `database` is a SQLite file path and `artifactRoot`
 * a content directory (the embedded profile; opened lazily, closed by close()); `(items, content)` is
 * the contract-based form for any engine. The host's `withMaintenance(epoch, fn)` may call `fn()` the
 * seed's way, with no argument: the run then takes ALP's own fence inside the host's callback.
 *
 * Not reachable over HTTP: an administrative API for trusted hosts (the CLI is one).
 */
import fs from 'node:fs';
import type { ContentStore } from '../content/content-store.ts';
import { openContentStore } from '../content/open.ts';
import { type Clock, systemClock } from '../core/clock.ts';
import type { Digest } from '../core/digest.ts';
import { InvalidInput, NotFound } from '../core/errors.ts';
import { OBSERVATION_SK_PREFIX, observationPartitions } from '../core/keys.ts';
import type { ItemStore } from '../store/item-store.ts';
import { queryAllMerged } from '../store/merge-query.ts';
import { openItemStore } from '../store/open.ts';
import { createContext, type ServiceContext } from '../system/context.ts';
import { withMaintenance } from '../system/fence.ts';
import { indexedContent } from '../system/indexed-content.ts';
import { readLayout } from '../system/installation.ts';
import { type Layout, UNSHARDED } from '../system/layout.ts';
import { contentRootId, type Observation, type RetentionAction, type RetentionApproval, type RetentionPlan } from './model.ts';
import { verifyRestoreReference } from './restore-proof.ts';
import {
  type ActOutcome,
  journal,
  type MaintenanceCommitter,
  ObservationsChanged,
  purgeOne,
  quarantine,
  revalidateAndObserve,
} from './run-act.ts';
import { observeBeforeFence } from './run-observe.ts';
import { openPlanSession, type PlanSession } from './run-plan.ts';
import { refreshBeforeFence } from './run-scan.ts';
import type { ScanStats } from './scan-result.ts';

export type { MaintenanceCommitter } from './run-act.ts';

export interface RetentionResult extends ActOutcome {
  status: 'DONE' | 'NOTHING_TO_DO' | 'REFUSED';
  action: RetentionAction;
  reason?: string;
  plan?: RetentionPlan;
  plan_digest?: Digest;
  scan: ScanStats;
  /** How long the maintenance fence was held (taking and releasing it included); 0 when it was not taken. */
  fence_ms: number;
  /** How long planning took, outside the fence. */
  plan_ms: number;
}

/** What plan() returns: the plan a human reviews, its digest, and what a run would observe. */
export interface RetentionPlanResult {
  plan: RetentionPlan;
  plan_digest: Digest;
  /** The observation writes a run would commit first: grace starts and lapsed observations. */
  observe: { starts: number; resets: number };
  skipped: Array<{ key: string; reason: string }>;
  scan: ScanStats;
  plan_ms: number;
}

export interface PlanOptions {
  maxArtifacts?: number;
  /** Digests to keep besides the persistent pins and those recorded with interrupted purges. */
  pins?: Iterable<string>;
  onProgress?: (phase: string, done: number, total?: number) => void;
}

export interface RunOptions {
  maxArtifacts?: number;
  /** The digest of the plan the operator reviewed (`alp retention plan`): a recomputed plan that differs is REFUSED. */
  planDigest?: string;
  onProgress?: (phase: string, done: number, total?: number) => void;
}

/**
 * The trusted host (seed 004): the fence, pins and the human approval. `withMaintenance` runs `fn`
 * under the host's exclusive maintenance; a host that passes ALP's fence handle (localTrustedHost)
 * lets the run commit through it, a host that calls `fn()` with no argument gets ALP's own fence taken
 * inside its callback. `run` tells the host what it is for (a host keeps the fence after a failed PURGE).
 */
export interface RetentionHost {
  withMaintenance<T>(epoch: number, fn: (m?: MaintenanceCommitter) => Promise<T>, run?: { action: RetentionAction }): Promise<T>;
  pins(): Promise<Iterable<string>> | Iterable<string>;
  approve(plan: RetentionPlan, digest: Digest): Promise<RetentionApproval | undefined>;
}

type Opened = { items: ItemStore; content: ContentStore; clock?: Clock; layout?: Layout; owned: boolean };

export class ArtifactRetention {
  private ctxP: Promise<ServiceContext> | undefined;
  private readonly open: () => Promise<Opened>;
  private opened: Opened | undefined;

  /**
   * `(database, artifactRoot)`: a SQLite file and a content directory of an existing installation,
   * opened on first use through the contracts (store/open.ts, content/open.ts), closed by close().
   * `(items, content, opts)`: stores the caller opened and closes. `layout`: the installation's
   * (ctx.layout); without it the installation record's is read first (observation keys depend on it).
   */
  constructor(database: string, artifactRoot: string, opts?: { clock?: Clock });
  constructor(items: ItemStore, content: ContentStore, opts?: { clock?: Clock; layout?: Layout });
  constructor(a: string | ItemStore, b: string | ContentStore, opts: { clock?: Clock; layout?: Layout } = {}) {
    if (typeof a === 'string' || typeof b === 'string') {
      if (typeof a !== 'string' || typeof b !== 'string')
        throw new InvalidInput('pass a database path and an artifact root, or two stores');
      this.open = async () => {
        if (!fs.existsSync(a)) throw new NotFound(`no database at ${a}`);
        const items = await openItemStore({ engine: 'sqlite', path: a });
        const content = await openContentStore({ engine: 'fs', root: b }).catch(async (e: unknown) => {
          await items.close();
          throw e;
        });
        return { items, content, ...(opts.clock ? { clock: opts.clock } : {}), owned: true };
      };
    } else {
      const opened: Opened = { items: a, content: b, ...opts, owned: false };
      this.open = async () => opened;
    }
  }

  private context(): Promise<ServiceContext> {
    this.ctxP ??= (async () => {
      const o = await this.open();
      this.opened = o;
      const layout = { ...(o.layout ?? (await readLayout(o.items)) ?? UNSHARDED) };
      const clock = o.clock ?? systemClock;
      // Stores opened here get what runtime/context.ts gives an installation's: the reference index kept
      // at write and delete time (a purge deletes the object's entry too).
      const content = o.owned ? indexedContent(o.content, o.items, () => layout, clock) : o.content;
      return createContext({ items: o.items, content, clock, layout });
    })();
    return this.ctxP;
  }

  /** Read-only, no fence, no writes: the plan a run of `action` would carry out now, and its digest. */
  async plan(epoch: number, action: RetentionAction, opts: PlanOptions = {}): Promise<RetentionPlanResult> {
    const ctx = await this.context();
    const started = Date.now();
    const s = await this.session(ctx, epoch, action, opts.maxArtifacts, opts.pins ?? [], opts.onProgress);
    try {
      return {
        plan: s.plan,
        plan_digest: s.digest,
        observe: s.work.counts(),
        skipped: s.skipped,
        scan: s.scan.stats,
        plan_ms: Date.now() - started,
      };
    } finally {
      s.close();
    }
  }

  async run(epoch: number, action: RetentionAction, host: RetentionHost, opts: RunOptions = {}): Promise<RetentionResult> {
    const ctx = await this.context();
    const started = Date.now();
    const s = await this.session(ctx, epoch, action, opts.maxArtifacts, await host.pins(), opts.onProgress);
    try {
      const result = this.resultOf(action, s, Date.now() - started);
      if (opts.planDigest !== undefined && opts.planDigest !== s.digest) {
        const reason = `the plan recomputed now (${s.digest}) is not the reviewed plan (${opts.planDigest}): something changed since; run \`alp retention plan\` again and review the new plan`;
        return { ...result, status: 'REFUSED', reason };
      }
      const empty = s.plan.candidates.length === 0;
      if (empty && s.work.counts().starts + s.work.counts().resets === 0) return this.nothingToDo(result);
      // The human decision on exactly this plan, checked here, not taken on trust (before the fence: it reads the restore).
      const approval = empty ? undefined : await host.approve(s.plan, s.digest);
      const refusal = empty ? undefined : await this.checkApproval(ctx, approval, s.digest, s.installationId);
      // Grace starts and resets commit before the fence, as ordinary fenced writes (run-observe.ts).
      try {
        await observeBeforeFence(ctx, s, epoch, result);
      } catch (e) {
        if (!(e instanceof ObservationsChanged)) throw e;
        return { ...result, status: 'REFUSED', reason: changedReason(e) };
      }
      if (empty) return this.nothingToDo(result);
      // What changed since the plan (the grace starts just written, a backfilling plan's own index
      // entries, other writers' items) is folded here, outside the fence: under it, only what changes after.
      await refreshBeforeFence(ctx, s.scan, { pins: s.pins });
      const fenceStart = Date.now();
      const inFence = (m: MaintenanceCommitter) => this.underFence(ctx, s, m, { epoch, action, approval, refusal }, result);
      const done = await host.withMaintenance(
        epoch,
        (m) =>
          m && typeof m.commit === 'function' ? inFence(m) : withMaintenance(ctx, epoch, 'retention (library)', inFence, ownFence(action)),
        { action },
      );
      return { ...done, fence_ms: Date.now() - fenceStart };
    } finally {
      s.close();
    }
  }

  /** Closes the stores this instance opened itself (the path form); idempotent. */
  async close(): Promise<void> {
    const o = this.opened;
    this.opened = undefined;
    this.ctxP = undefined;
    if (o?.owned) {
      try {
        await o.content.close();
      } finally {
        await o.items.close();
      }
    }
  }

  /** Observations of the current content root, by object key (a convenience for tests and small installations: it holds them all). */
  async observations(): Promise<Map<string, Observation>> {
    const ctx = await this.context();
    const pks = observationPartitions(contentRootId(ctx.content.location), ctx.layout.index_shards);
    const items = await queryAllMerged(ctx.items, { pks, sk: { beginsWith: OBSERVATION_SK_PREFIX }, consistent: true });
    return new Map((items as Observation[]).map((o) => [o.key, o]));
  }

  private async session(
    ctx: ServiceContext,
    epoch: number,
    action: RetentionAction,
    maxArtifacts: number | undefined,
    pins: Iterable<string>,
    onProgress: PlanOptions['onProgress'],
  ): Promise<PlanSession> {
    return openPlanSession(ctx, {
      epoch,
      action,
      ...(maxArtifacts !== undefined ? { maxArtifacts } : {}),
      pins,
      ...(onProgress ? { onProgress } : {}),
    });
  }

  private resultOf(action: RetentionAction, s: PlanSession, planMs: number): RetentionResult {
    return {
      status: 'DONE',
      action,
      plan: s.plan,
      plan_digest: s.digest,
      quarantined: [],
      purged: [],
      reset: [],
      observed: [],
      skipped: [...s.skipped],
      counts: { observed: 0, reset: 0, skipped: s.skippedCount, dropped: 0 },
      scan: s.scan.stats,
      fence_ms: 0,
      plan_ms: planMs,
    };
  }

  private nothingToDo(result: RetentionResult): RetentionResult {
    return { ...result, status: 'NOTHING_TO_DO', reason: 'no candidate has completed its grace or quarantine period' };
  }

  /** Under the fence, only: re-validate, commit the observation writes, act, journal. */
  private async underFence(
    ctx: ServiceContext,
    s: PlanSession,
    m: MaintenanceCommitter,
    d: { epoch: number; action: RetentionAction; approval: RetentionApproval | undefined; refusal: string | undefined },
    result: RetentionResult,
  ): Promise<RetentionResult> {
    let keep: Observation[];
    try {
      keep = await revalidateAndObserve(ctx, s, m, result);
    } catch (e) {
      if (!(e instanceof ObservationsChanged)) throw e;
      return { ...result, status: 'REFUSED', reason: changedReason(e) };
    }
    if (s.plan.candidates.length === 0) return this.nothingToDo(result);
    const j = { root: s.root, action: d.action, digest: s.digest, epoch: d.epoch, approval: d.approval };
    // An approval may expire while the fence is awaited: checked again here.
    const refusal =
      d.refusal ?? (d.approval && Date.parse(d.approval.expires_at) <= ctx.clock.now().getTime() ? 'the approval has expired' : undefined);
    if (refusal) {
      await journal(ctx, m, j, { status: 'REFUSED', reason: refusal });
      return { ...result, status: 'REFUSED', reason: refusal };
    }
    const approved = d.approval as RetentionApproval;
    if (d.action === 'QUARANTINE') {
      try {
        await quarantine(m, keep, { at: ctx.clock.now().toISOString(), digest: s.digest, approved }, result);
      } catch (e) {
        if (!(e instanceof ObservationsChanged)) throw e;
        const reason = changedReason(e);
        await journal(ctx, m, j, { status: 'REFUSED', reason, quarantined: result.quarantined.length });
        return { ...result, status: 'REFUSED', reason };
      }
    } else {
      for (const o of keep) await purgeOne(ctx, m, o, { planDigest: s.digest, approval: approved, pins: s.pins }, result);
    }
    await journal(ctx, m, j, {
      status: 'DONE',
      quarantined: result.quarantined.length,
      purged: result.purged.length,
      skipped: result.skipped.length,
      dropped: result.counts.dropped,
    });
    return result;
  }

  private async checkApproval(
    ctx: ServiceContext,
    a: RetentionApproval | undefined,
    digest: string,
    installationId: string,
  ): Promise<string | undefined> {
    if (!a) return 'the host did not approve the plan';
    if (a.principal?.kind !== 'human' || typeof a.principal.id !== 'string') return 'the approval does not name a human principal';
    if (typeof a.evidence_ref !== 'string' || a.evidence_ref.trim() === '') return 'the approval carries no evidence reference';
    if (a.plan_digest !== digest) return `the approval binds ${String(a.plan_digest)}, not this plan (${digest})`;
    const expires = Date.parse(a.expires_at);
    if (!Number.isFinite(expires) || expires <= ctx.clock.now().getTime()) return 'the approval has expired';
    return verifyRestoreReference(a.restore, installationId, ctx.items);
  }
}

/** ALP's own fence, for a host that fences the seed's way (fn() without ALP's handle): readers too; held after a failed PURGE. */
function ownFence(action: RetentionAction) {
  return { purpose: 'retention', refuseWhileRestoreHeld: true, fenceReaders: true, holdOnFailure: action === 'PURGE' };
}

function changedReason(e: Error): string {
  return `the observations changed since the plan (another retention run committed): run \`alp retention plan\` again (${e.message})`;
}
