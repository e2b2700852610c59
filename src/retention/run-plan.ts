/**
 * The plan, made outside the fence and read-only (issue 17 item 3): scan, stream the observations into
 * a working set, decide which observations lapse (referenced again, gone, changed) and which candidates
 * start a grace period, choose at most `max` candidates of the action and re-hash them (B11: bytes that
 * changed since their first observation are a new observation, with a new digest and a new grace
 * period, so a pin of the new digest protects them). Nothing is written: the run commits the
 * observation writes under the fence, after re-validating them against every change since the plan.
 */
import type { Digest } from '../core/digest.ts';
import { IntegrityError, InvalidInput, NotFound } from '../core/errors.ts';
import { forEachLimited } from '../core/limit.ts';
import type { ServiceContext } from '../system/context.ts';
import { readInstallation } from '../system/installation.ts';
import { assertEpochAndNoHold } from '../system/state.ts';
import {
  contentRootId,
  DEFAULT_MAX_ARTIFACTS,
  MAX_ARTIFACTS,
  type Observation,
  observationKey,
  type PlanCandidate,
  type RetentionAction,
  type RetentionPlan,
  retentionMaterialDigest,
} from './model.ts';
import { storedPins } from './pins.ts';
import { normalisePins, storedDigest } from './purge.ts';
import { planScan } from './run-scan.ts';
import { ObservationWorkset } from './run-workset.ts';
import { scanCacheFile } from './scan-cache.ts';
import type { ReferenceScan, ScannedObject } from './scan-result.ts';

/** Chosen candidates re-hashed at once while planning. */
const REHASH_CONCURRENCY = 16;

/** How many keys a result lists per kind (the counts are always complete). */
export const LISTED_KEYS = 1000;

export interface PlanInput {
  action: RetentionAction;
  epoch: number;
  max: number;
  /** The host's pins, the persistent pins: merged with the pins recorded by interrupted purges. */
  pins: Iterable<string>;
  onProgress?: (phase: string, done: number, total?: number) => void;
}

export interface Skip {
  key: string;
  reason: string;
}

/** A plan and what it stands on; close() it (deletes the working sets). */
export interface PlanSession {
  plan: RetentionPlan;
  digest: Digest;
  installationId: string;
  root: string;
  /** The chosen observations, in plan order (≤ max). */
  chosen: Observation[];
  pins: string[];
  scan: ReferenceScan;
  work: ObservationWorkset;
  /** Candidates the plan left alone, and why (the first LISTED_KEYS). */
  skipped: Skip[];
  skippedCount: number;
  close(): void;
}

/**
 * Checks the request (action, 1 ≤ maxArtifacts ≤ 1000, epoch current, no restore held) and makes the
 * plan with the installation's persistent pins (`alp pins`) added to `pins`: every plan and run honours them.
 */
export async function openPlanSession(
  ctx: ServiceContext,
  o: { epoch: number; action: RetentionAction; maxArtifacts?: number; pins: Iterable<string>; onProgress?: PlanInput['onProgress'] },
): Promise<PlanSession> {
  if (o.action !== 'QUARANTINE' && o.action !== 'PURGE') throw new InvalidInput('action must be QUARANTINE or PURGE');
  const max = o.maxArtifacts ?? DEFAULT_MAX_ARTIFACTS;
  if (!Number.isInteger(max) || max < 1 || max > MAX_ARTIFACTS) throw new InvalidInput(`maxArtifacts must be 1–${MAX_ARTIFACTS}`);
  if (!Number.isInteger(o.epoch) || o.epoch < 1) throw new InvalidInput('epoch must be a positive integer');
  await assertEpochAndNoHold(ctx.items, o.epoch);
  const stored = await storedPins(ctx.items);
  return makePlan(ctx, {
    action: o.action,
    epoch: o.epoch,
    max,
    pins: [...o.pins, ...stored],
    ...(o.onProgress ? { onProgress: o.onProgress } : {}),
  });
}

export async function makePlan(ctx: ServiceContext, input: PlanInput): Promise<PlanSession> {
  const installation = await readInstallation(ctx);
  if (!installation) throw new NotFound('no installation here: run alp init');
  const root = contentRootId(ctx.content.location);
  const now = ctx.clock.now();
  const work = new ObservationWorkset();
  let scan: ReferenceScan | undefined;
  try {
    await work.load(ctx.items, root, ctx.layout.index_shards);
    // The pins recorded by interrupted purges stay in force with the host's own (never fewer pins).
    const pins = normalisePins(input.pins, work.recordedPins);
    const cacheFile = scanCacheFile(installation.installation_id, root);
    scan = await planScan(ctx, {
      pins,
      ...(cacheFile ? { cache: { file: cacheFile, identity: `${installation.installation_id} ${root} ${ctx.layout.index_shards}` } } : {}),
      knownDigest: (key) => work.get(key)?.digest,
      ...(input.onProgress ? { onProgress: input.onProgress } : {}),
    });
    const skips: Skip[] = [];
    let skippedCount = 0;
    const skip = (key: string, reason: string) => {
      skippedCount++;
      if (skips.length < LISTED_KEYS) skips.push({ key, reason });
    };
    await lapseObservations(ctx, work, scan, skip);
    await startGrace(ctx, work, scan, { root, at: now.toISOString() });
    const chosen = await choose(ctx, work, scan, { action: input.action, now: now.getTime(), max: input.max, root, skip });
    const plan = planOf(input.action, installation.installation_id, ctx.content.location, input.epoch, chosen, pins, now.toISOString());
    const s = scan;
    return {
      plan,
      digest: retentionMaterialDigest(plan),
      installationId: installation.installation_id,
      root,
      chosen,
      pins,
      scan: s,
      work,
      skipped: skips,
      get skippedCount() {
        return skippedCount;
      },
      close() {
        s.close();
        work.close();
      },
    };
  } catch (e) {
    scan?.close();
    work.close();
    throw e;
  }
}

/** Why `o` is referenced now. An interrupted purge's bytes may be gone: a reference to its key OR its digest counts (B10). */
export function referencedWhy(scan: ReferenceScan, o: Pick<Observation, 'key' | 'digest' | 'state'>): string | undefined {
  const present = scan.object(o.key);
  return scan.referencedWhy(o.key) ?? (o.state === 'PREPARED' && !present ? scan.digestWhy(o.digest, o.key) : undefined);
}

/** A new reference to bytes an interrupted purge removed: fail closed, naming key and digest (seed 004). */
export function referencedAfterPurge(o: Observation, why: string): IntegrityError {
  return new IntegrityError(
    `${o.key} (${o.digest}) is referenced again (${why}) but its purge removed the bytes; restore them before anything else`,
    { key: o.key, digest: o.digest },
  );
}

/**
 * Lapses the observations referenced again, gone or changed (size differs from the listing, or bytes
 * whose digest differs); writes between pages only (work.all pages by key).
 * keeps the rest in force. A missing QUARANTINED object is left for an operator (no purge was prepared).
 */
async function lapseObservations(
  ctx: ServiceContext,
  work: ObservationWorkset,
  scan: ReferenceScan,
  skip: (key: string, reason: string) => void,
): Promise<void> {
  for (const page of work.all()) {
    for (const o of page) {
      const present = scan.object(o.key);
      const why = referencedWhy(scan, o);
      if (o.state === 'PREPARED' || o.state === 'PURGED') {
        if (why && !present && o.state === 'PREPARED') throw referencedAfterPurge(o, why);
        if (why && o.state === 'PREPARED') work.reset(o, 'referenced');
        continue;
      }
      if (!why && !present && o.state === 'QUARANTINED') {
        skip(o.key, 'missing, but no purge of it was prepared: left for an operator to investigate');
        work.drop(o.key);
        continue;
      }
      if (why) work.reset(o, 'referenced');
      else if (!present) work.reset(o, 'gone');
      else if (present.size !== o.size) work.reset(o, 'changed');
      else if (present.digest !== undefined && present.digest !== o.digest) {
        // The listing and the observation disagree: one of them is stale (an index entry written for
        // bytes since rewritten at the same size, or bytes rewritten). Rare; the bytes decide.
        if ((await storedDigest(ctx.content, o.key)) !== o.digest) work.reset(o, 'changed');
      }
    }
  }
}

/** A first observation, a digest republished after its purge, or changed bytes: a new 7-day grace period. */
async function startGrace(
  ctx: ServiceContext,
  work: ObservationWorkset,
  scan: ReferenceScan,
  { root, at }: { root: string; at: string },
): Promise<void> {
  let batch: Array<{ item: Observation; prior: string | null }> = [];
  const flush = () => {
    const b = batch;
    batch = [];
    work.tx(() => {
      for (const s of b) work.start(s.item, s.prior);
    });
  };
  const changed = work.anyChangedReset();
  for (const c of scan.candidates()) {
    if (!c.digest) continue;
    const prior = work.stateOf(c.key);
    if (prior !== undefined && prior !== 'PURGED') continue;
    let digest: string | undefined = c.digest;
    // Changed bytes: the listing's digest may be the one recorded before the change; read them again.
    if (changed && work.update(c.key)?.why === 'changed') digest = await storedDigest(ctx.content, c.key);
    if (digest === undefined || scan.digestWhy(digest, c.key)) continue;
    batch.push({ item: observationOf(root, c, digest, at, ctx.layout.index_shards), prior: prior ?? null });
    if (batch.length >= 500) flush();
  }
  flush();
}

function observationOf(root: string, c: ScannedObject, digest: string, at: string, shards: number): Observation {
  return {
    ...observationKey(root, c.key, shards),
    type: 'retention_observation',
    key: c.key,
    digest,
    size: c.size,
    state: 'GRACE',
    first_observed_at: at,
  };
}

/**
 * The observations the action takes, in plan order (interrupted purges first, then the oldest
 * observation), at most `max`, each re-hashed (B11): bytes that changed are a new observation (the old
 * one lapses; a new grace starts unless the new digest is referenced), a missing QUARANTINED object is
 * left for an operator, a missing PREPARED one is accepted (its purge was prepared).
 */
async function choose(
  ctx: ServiceContext,
  work: ObservationWorkset,
  scan: ReferenceScan,
  o: { action: RetentionAction; now: number; max: number; root: string; skip: (key: string, reason: string) => void },
): Promise<Observation[]> {
  const chosen: Observation[] = [];
  const lapsed: string[] = [];
  // Pages as large as the places left (rows lapsed here stay in the set until the end: offsets hold).
  for (let offset = 0; chosen.length < o.max; ) {
    const page = work.eligible(o.action, o.now, o.max - chosen.length, offset);
    if (page.length === 0) break;
    offset += page.length;
    // Re-hashed concurrently (a handful of round trips each), judged in plan order.
    const open = page.filter((c) => !scan.referencedWhy(c.key));
    const digests = new Map<string, string | undefined>();
    await forEachLimited(open, REHASH_CONCURRENCY, async (c) => {
      digests.set(c.key, await storedDigest(ctx.content, c.key));
    });
    for (const c of open) {
      if (chosen.length >= o.max) break;
      const actual = digests.get(c.key);
      if (actual === undefined && c.state !== 'PREPARED') {
        o.skip(c.key, 'missing, but no purge of it was prepared: left for an operator to investigate');
        if (c.state === 'GRACE') work.reset(c, 'gone', true);
        lapsed.push(c.key);
        continue;
      }
      if (actual !== undefined && actual !== c.digest) {
        o.skip(c.key, `its bytes changed (${actual}, observed ${c.digest}): a new observation, its grace starts again`);
        work.reset(c, 'changed', true);
        lapsed.push(c.key);
        const listed = scan.object(c.key);
        if (listed && !scan.digestWhy(actual, c.key))
          work.start(observationOf(o.root, listed, actual, new Date(o.now).toISOString(), ctx.layout.index_shards), c.state);
        continue;
      }
      chosen.push(c);
    }
  }
  for (const k of lapsed) work.drop(k);
  return chosen;
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
