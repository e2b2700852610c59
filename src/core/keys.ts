/**
 * Item key builders: the single table of docs/data-model.md (RFC-012 §9.1 plus our own entities). Every PK, SK
 * and GSI1 value is built here and nowhere else.
 */
export const VERSION_DIGITS = 10;
export const SEQ_DIGITS = 10;
export const STEP_DIGITS = 6;

export function pad(n: number, digits: number): string {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`cannot pad ${n}`);
  const s = String(n);
  if (s.length > digits) throw new RangeError(`${n} does not fit in ${digits} digits`);
  return s.padStart(digits, '0');
}

export const artifactPk = (artifactId: string) => `ART#${artifactId}`;
export const versionSk = (version: number) => `V#${pad(version, VERSION_DIGITS)}`;
export const VERSION_SK_PREFIX = 'V#';
export const HEAD_SK = 'HEAD';
export const stateGsiPk = (state: string) => `STATE#${state}`;
export const createdGsiSk = (createdAt: string, artifactId: string) => `#${createdAt}#${artifactId}`;
export const nameGsiPk = (name: string) => `NAME#${name}`;

export const transitionSk = (timestamp: string, seq: number) => `TRANS#${timestamp}#${pad(seq, SEQ_DIGITS)}`;
export const transitionGsiPk = (date: string) => `TRANS#${date}`;
export const approvalSk = (timestamp: string, seq: number) => `APPROVAL#${timestamp}#${pad(seq, SEQ_DIGITS)}`;
export const approverGsiPk = (actorId: string) => `APPROVER#${actorId}`;
export const executionSk = (runId: string) => `EXEC#${runId}`;
export const runGsiPk = (date: string) => `RUN#${date}`;
export const provenanceSk = (step: number) => `PROV#${pad(step, STEP_DIGITS)}`;
export const provenanceGsiPk = (date: string) => `PROV#${date}`;
export const COMPENSATION_SK_PREFIX = 'COMP#';
export const compensationSk = (compArtifactId: string) => `${COMPENSATION_SK_PREFIX}${compArtifactId}`;
export const compStateGsiPk = (state: string) => `COMP_STATE#${state}`;
export const eventGsiSk = (timestamp: string, artifactId: string) => `#${timestamp}#${artifactId}`;

/** The SK prefixes of the audit items of an artifact partition (everything chained by the HEAD). */
export const AUDIT_SK_PREFIXES = ['TRANS#', 'APPROVAL#', 'EXEC#', 'PROV#', 'COMP#'] as const;

/** Our system entities (documented in docs/data-model.md). */
export const SYS_PK = 'SYS#installation';
export const INSTALLATION_SK = 'INSTALLATION';
export const runPk = (runId: string) => `RUN#${runId}`;
export const RUN_POINTER_SK = 'POINTER';
export const tokenPk = (tokenHash: string) => `TOKEN#${tokenHash}`;
export const TOKEN_SK = 'TOKEN';
/** INSTANCE#{id} / LEASE: a process instance's lease, refreshed while it holds upload reservations (lifecycle/instance.ts). */
export const instanceLeaseKey = (instanceId: string) => ({ PK: `INSTANCE#${instanceId}`, SK: 'LEASE' });
export const principalPk = (principalId: string) => `PRINCIPAL#${principalId}`;
export const PRINCIPAL_SK = 'PRINCIPAL';
/** A principal id's normalised form (lifecycle/principal-key.ts), claimed by the one spelling it names. */
export const principalNamePk = (normalised: string) => `PRINCIPAL_NAME#${normalised}`;
export const PRINCIPAL_NAME_SK = 'PRINCIPAL_NAME';

export type ItemKey = { PK: string; SK: string };
export const FENCE_SK = 'FENCE';
export const EPOCH_SK = 'EPOCH';
export const RESTORE_HOLD_SK = 'RESTORE_HOLD';
export const restorePk = (restoreId: string) => `RESTORE#${restoreId}`;

/** The telemetry outbox (src/telemetry/queue.ts; docs/data-model.md "Telemetry outbox"). */
export const TELQ_PK = 'TELQ#outbox';
export const TELQ_STATE_SK = 'STATE';
export const TIME_DIGITS = 15;
export const EPOCH_DIGITS = 10;
/** The identity of a queued record: where it is now (its slot), its payload digest and size. */
export const telqIdSk = (id: string) => `ID#${id}`;
/** A record never leased, ordered by the time it became available (its audit timestamp). */
export const TELQ_FRESH_PREFIX = 'A#';
export const telqFreshSk = (availableMs: number, id: string) => `A#${pad(availableMs, TIME_DIGITS)}#${id}`;
/** A leased record, ordered by lease epoch, then lease expiry (when it becomes available again). */
export const TELQ_LEASE_PREFIX = 'L#';
export const telqLeaseEpochPrefix = (epoch: number) => `L#${pad(epoch, EPOCH_DIGITS)}#`;
export const telqLeaseSk = (epoch: number, expiresMs: number, id: string) =>
  `${telqLeaseEpochPrefix(epoch)}${pad(expiresMs, TIME_DIGITS)}#${id}`;
/** Sorts after every record id in a slot key (ids never contain it). */
export const TELQ_SK_END = '~';
export const telqTimeBound = (ms: number) => pad(ms, TIME_DIGITS);

/** A packed history segment of an artifact's audit chain (src/audit/compaction.ts). */
export const SEGMENT_SK_PREFIX = 'SEG#';
export const segmentSk = (firstSeq: number) => `${SEGMENT_SK_PREFIX}${pad(firstSeq, SEQ_DIGITS)}`;

// Recovery entities (src/recovery; docs/data-model.md "Recovery").
/** SYS#installation / EPOCH#{epoch:10}: one record per epoch advance (who, when, why). */
export const epochRecordSk = (epoch: number) => `EPOCH#${pad(epoch, SEQ_DIGITS)}`;
export const EPOCH_RECORD_SK_PREFIX = 'EPOCH#';
/** SYS#installation / CONTENT_ROOT: the content root the installation's objects live in since a restore. */
export const CONTENT_ROOT_SK = 'CONTENT_ROOT';
/** SYS#installation / BACKUP#{backup_id}: the registry of backups (a reference source for retention). */
export const backupSk = (backupId: string) => `BACKUP#${backupId}`;
export const BACKUP_SK_PREFIX = 'BACKUP#';
/** RESTORE#{restore_id} / RESTORE: the restore record. */
export const RESTORE_SK = 'RESTORE';
/** RESTORE#{restore_id} or SYS#installation / RECONCILE#{reconcile_id}: a reconciliation result. */
export const reconcileSk = (reconcileId: string) => `RECONCILE#${reconcileId}`;
/** Where a reconciliation record lives: beside its restore, or in the installation's partition without one. */
export const reconcileKey = (reconcileId: string, restoreId?: string) => ({
  PK: restoreId === undefined ? SYS_PK : restorePk(restoreId),
  SK: reconcileSk(reconcileId),
});
export const RECONCILE_SK_PREFIX = 'RECONCILE#';
/** SYS#installation / RESTORE_ACTIVATION: which restore this installation was activated from. */
export const RESTORE_ACTIVATION_SK = 'RESTORE_ACTIVATION';

// Retention (src/retention; docs/data-model.md "Retention"). Partitioned per content root, so a restore
// into another root starts fresh observations.
export const retentionPk = (contentRootId: string) => `RET#${contentRootId}`;
export const OBSERVATION_SK_PREFIX = 'OBS#';
export const observationSk = (objectKey: string) => `${OBSERVATION_SK_PREFIX}${objectKey}`;
export const RETENTION_RUN_SK_PREFIX = 'RUN#';
export const retentionRunSk = (timestamp: string, runId: string) => `${RETENTION_RUN_SK_PREFIX}${timestamp}#${runId}`;
