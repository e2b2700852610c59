/**
 * Retention's items and its plan. Observations (RET#{content root}/OBS#{key}) carry each candidate
 * through GRACE → QUARANTINED → PREPARED → PURGED; runs (RET#{root}/RUN#…) journal every decision.
 */
import { canonicalDigest } from '../core/canonical-json.ts';
import { DAY_MS } from '../core/clock.ts';
import type { Digest } from '../core/digest.ts';
import { observationPk, observationSk } from '../core/keys.ts';
import type { Principal } from '../lifecycle/model.ts';

export const GRACE_MS = 7 * DAY_MS;
export const QUARANTINE_MS = 30 * DAY_MS;
export const DEFAULT_MAX_ARTIFACTS = 100;
export const MAX_ARTIFACTS = 1000;

export type ObservationState = 'GRACE' | 'QUARANTINED' | 'PREPARED' | 'PURGED';
export type RetentionAction = 'QUARANTINE' | 'PURGE';

export interface Observation {
  PK: string;
  SK: string;
  type: 'retention_observation';
  key: string;
  digest: string;
  size: number;
  state: ObservationState;
  first_observed_at: string;
  quarantined_at?: string;
  prepared_at?: string;
  purged_at?: string;
  plan_digest?: string;
  approved_by?: Principal;
  evidence_ref?: string;
  /** The pins in force when the purge was PREPARED: every re-check of it (recovery) honours them. */
  pins?: string[];
  [k: string]: unknown;
}

/** Observations are per installation and content root: paths are installation-local. */
export { contentRootId } from '../system/ref-index.ts';

/**
 * Where the observation of `objectKey` lives: RET#{root}, or its index shard RET#{root}#{s} (keys.ts
 * observationPk) under the installation's `indexShards` (ctx.layout.index_shards; 1: unsharded).
 */
export function observationKey(rootId: string, objectKey: string, indexShards: number) {
  return { PK: observationPk(rootId, objectKey, indexShards), SK: observationSk(objectKey) };
}

/** An observation read from the table: its own key (whichever shard it is in). */
export function keyOfObservation(o: Pick<Observation, 'PK' | 'SK'>) {
  return { PK: o.PK, SK: o.SK };
}

export type PlanCandidate = Pick<Observation, 'key' | 'digest' | 'size' | 'state' | 'first_observed_at' | 'quarantined_at'>;

export interface RetentionPlan {
  action: RetentionAction;
  installation_id: string;
  content_root: string;
  epoch: number;
  candidates: PlanCandidate[];
  /** The host's pins the plan was made with (sorted): the approval binds them, a prepared purge records them. */
  pins: string[];
  total_bytes: number;
  created_at: string;
}

/**
 * The stable digest an approval binds: the plan's canonical form without its creation time (two plans
 * of the same material have the same digest; any change of action, epoch, root or candidate changes it).
 */
export function retentionMaterialDigest(plan: RetentionPlan): Digest {
  const { created_at: _t, ...material } = plan;
  return canonicalDigest({
    ...material,
    candidates: [...material.candidates].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)),
  });
}

/** What the trusted host returns from approve(plan). */
export interface RetentionApproval {
  principal: Principal;
  evidence_ref: string;
  plan_digest: string;
  expires_at: string;
  /** The restore this approval rests on: a path or URL of the restored installation's metadata. */
  restore: string;
}

export interface TrustedHost {
  /** Runs fn under the exclusive maintenance fence of `epoch`. */
  withMaintenance<T>(epoch: number, fn: () => Promise<T>): Promise<T>;
  /** sha256 digests the host wants kept. */
  pins(): Promise<Iterable<string>> | Iterable<string>;
  /** The human decision on a plan, or undefined to decline. */
  approve(plan: RetentionPlan, digest: Digest): Promise<RetentionApproval | undefined>;
}
