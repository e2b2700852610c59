/**
 * Item key builders: the single table of docs/data-model.md (RFC-012 §9.1 plus our own entities). Every PK, SK
 * and GSI1 value is built here and nowhere else.
 */
import { allShards, shardOf, shardSuffix } from './shard.ts';

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
/**
 * ARCHIVE#{id} / JOURNAL: the journal of a chunked archive (lifecycle/archive.ts; docs/data-model.md
 * "Archive journal"), in a partition of its own: every row of ART#{id} but the HEAD is vouched for by
 * the audit chain, and the journal is bookkeeping the chain does not hash.
 */
export const archiveJournalKey = (artifactId: string) => ({ PK: `ARCHIVE#${artifactId}`, SK: 'JOURNAL' });

// Write-sharded GSI1 keys (docs/data-model.md "Write-sharded index keys"). `shard` is an index shard
// suffix (indexShard): '' with index_shards = 1, so every builder gives the RFC-012 §9.1 value exactly;
// else `#{s}`, s = shardOf(artifact id, index_shards): every index entry of one artifact is in the same
// shard, and the artifacts spread uniformly over the shards.
/** The index shard suffix of an artifact's entries under `indexShards` (ctx.layout.index_shards). */
export const indexShard = (artifactId: string, indexShards: number) => shardSuffix(shardOf(artifactId, indexShards), indexShards);
/** Every shard partition of the index partition `base` (a listing reads and merges them all). */
export const indexPartitions = (base: string, indexShards: number) =>
  allShards(indexShards).map((s) => `${base}${shardSuffix(s, indexShards)}`);
/** The RFC-012 §9.1 value of a GSI1PK written under `indexShards`: the `#{s}` suffix stripped. */
export function unshardedGsiPk(pk: string, indexShards: number): string {
  if (indexShards === 1) return pk;
  const width = shardSuffix(indexShards - 1, indexShards).length;
  return /^#\d+$/.test(pk.slice(-width)) ? pk.slice(0, -width) : pk;
}
export const stateGsiPk = (state: string, shard = '') => `STATE#${state}${shard}`;
/** The shard suffix a version item's STATE# key carries (every later entry of its artifact reuses it). */
export function versionIndexShard(v: { state: string; GSI1PK?: unknown }): string {
  const base = stateGsiPk(v.state);
  const pk = typeof v.GSI1PK === 'string' ? v.GSI1PK : base;
  const suffix = pk.startsWith(base) ? pk.slice(base.length) : '';
  return /^(#\d+)?$/.test(suffix) ? suffix : '';
}
export const createdGsiSk = (createdAt: string, artifactId: string) => `#${createdAt}#${artifactId}`;
/**
 * COUNTS{s} / STATES: versions per state of the artifacts of index shard `s` (the suffix of
 * versionIndexShard), one number attribute per state, added to by every state change
 * (lifecycle/state-counts.ts).
 */
export const stateCountsPk = (shard = '') => `COUNTS${shard}`;
export const STATE_COUNTS_SK = 'STATES';
/**
 * NAME#{name}: per name, written once per artifact created with it, so not sharded. Carried by the
 * artifact's name entry (ARTNAME#{id} / NAME, written once at creation, in a partition of its own so the
 * artifact's partition keeps only what its chain vouches for), not by the HEAD, which every audit
 * transaction rewrites (HEADs written before issue 16 still carry it: listings read both).
 */
export const nameGsiPk = (name: string) => `NAME#${name}`;
export const artifactNamePk = (artifactId: string) => `ARTNAME#${artifactId}`;
export const NAME_SK = 'NAME';
/**
 * ARTNAME#{id} / SEARCH: the artifact's entry in the search index (issue 20 item 6,
 * lifecycle/search.ts), written once with the artifact beside its NAME entry. GSI1PK `NAMES{s}` (the
 * artifact's index shard), GSI1SK `#{name}#{created_at}#{id}`: a name prefix is a begins_with on
 * every shard, merged in name order.
 */
export const SEARCH_SK = 'SEARCH';
export const searchGsiPk = (shard = '') => `NAMES${shard}`;
export const searchGsiSk = (name: string, createdAt: string, artifactId: string) => `#${name}#${createdAt}#${artifactId}`;
export const searchGsiSkPrefix = (namePrefix: string) => `#${namePrefix}`;

export const transitionSk = (timestamp: string, seq: number) => `TRANS#${timestamp}#${pad(seq, SEQ_DIGITS)}`;
export const transitionGsiPk = (date: string, shard = '') => `TRANS#${date}${shard}`;
export const approvalSk = (timestamp: string, seq: number) => `APPROVAL#${timestamp}#${pad(seq, SEQ_DIGITS)}`;
/** Sharded too: one principal (a service or CI approver) can approve at the installation's whole rate. */
export const approverGsiPk = (actorId: string, shard = '') => `APPROVER#${actorId}${shard}`;
export const executionSk = (runId: string) => `EXEC#${runId}`;
/** An execution's output upload record: outside `EXEC#`, so `begins_with(SK,'EXEC#')` is one item per run (§9.1). */
export const executionOutputSk = (runId: string, name: string) => `OUTPUT#${runId}#${name}`;
/** An execution's finish record (outside `EXEC#`, as above). */
export const executionFinishSk = (runId: string) => `FINISH#${runId}`;
/** Schema 1 keys of those two records (migration installation-2, src/system/migrations.ts; still in packed segments). */
export const legacyExecutionOutputSk = (runId: string, name: string) => `EXEC#${runId}#OUTPUT#${name}`;
export const legacyExecutionFinishSk = (runId: string) => `EXEC#${runId}#FINISH`;
/** On an audit entry a key migration moved: the SK it was written and hashed under (src/audit/hash.ts). */
export const MOVED_FROM_SK = 'moved_from_sk';
/** The schema-2 key of an item written under a schema-1 execution record key, else undefined. */
export function movedExecutionSk(legacySk: string): string | undefined {
  const m = /^EXEC#([^#]+)#(?:OUTPUT#([^#]+)|(FINISH))$/.exec(legacySk);
  if (!m) return undefined;
  return m[3] ? executionFinishSk(m[1] as string) : executionOutputSk(m[1] as string, m[2] as string);
}
/** On the run's POINTER item (written once), not on the execution item (rewritten by every upload). */
export const runGsiPk = (date: string, shard = '') => `RUN#${date}${shard}`;
export const provenanceSk = (step: number) => `PROV#${pad(step, STEP_DIGITS)}`;
export const provenanceGsiPk = (date: string, shard = '') => `PROV#${date}${shard}`;
export const COMPENSATION_SK_PREFIX = 'COMP#';
export const compensationSk = (compArtifactId: string) => `${COMPENSATION_SK_PREFIX}${compArtifactId}`;
/** Sharded by the compensation artifact (the entry follows its version's state). */
export const compStateGsiPk = (state: string, shard = '') => `COMP_STATE#${state}${shard}`;
export const eventGsiSk = (timestamp: string, artifactId: string) => `#${timestamp}#${artifactId}`;

/** An alias move (issue 20 item 6, lifecycle/aliases.ts): set, moved or removed, on the artifact's chain. */
export const aliasSk = (timestamp: string, seq: number) => `ALIAS#${timestamp}#${pad(seq, SEQ_DIGITS)}`;

/** The SK prefixes of the audit items of an artifact partition (everything chained by the HEAD). */
export const AUDIT_SK_PREFIXES = ['TRANS#', 'APPROVAL#', 'EXEC#', 'OUTPUT#', 'FINISH#', 'PROV#', 'COMP#', 'ALIAS#'] as const;

/** Our system entities (documented in docs/data-model.md). */
export const SYS_PK = 'SYS#installation';
export const INSTALLATION_SK = 'INSTALLATION';
export const runPk = (runId: string) => `RUN#${runId}`;
export const RUN_POINTER_SK = 'POINTER';
export const tokenPk = (tokenHash: string) => `TOKEN#${tokenHash}`;
export const TOKEN_SK = 'TOKEN';
/**
 * TOKENS: the token index (issue 19 B8), one partition written only by token administration: an entry
 * per token (`ID#{token_id}`, what `alp token list` reads instead of scanning the table), the token
 * log (`LOG#{seq:10}`, hash-chained, src/audit/token-log.ts) and its head (`LOG_HEAD`), and the mark
 * that tokens minted before the index have their entries (`INDEXED`).
 */
export const TOKENS_PK = 'TOKENS';
export const TOKEN_ENTRY_SK_PREFIX = 'ID#';
export const tokenEntrySk = (tokenId: string) => `${TOKEN_ENTRY_SK_PREFIX}${tokenId}`;
export const TOKEN_LOG_SK_PREFIX = 'LOG#';
export const tokenLogSk = (seq: number) => `${TOKEN_LOG_SK_PREFIX}${pad(seq, SEQ_DIGITS)}`;
export const TOKEN_LOG_HEAD_SK = 'LOG_HEAD';
export const TOKEN_INDEX_MARK_SK = 'INDEXED';
/**
 * WEBHOOKS: the webhook endpoints (issue 20 item 5, src/webhooks/), one partition written only by
 * endpoint administration and the dispatcher's failure count: an item per endpoint (`EP#{id}`), the
 * endpoint change log (`LOG#{seq:10}`, hash-chained, src/audit/webhook-log.ts) and its head (`LOG_HEAD`).
 */
export const WEBHOOKS_PK = 'WEBHOOKS';
export const WEBHOOK_ENDPOINT_SK_PREFIX = 'EP#';
export const webhookEndpointSk = (endpointId: string) => `${WEBHOOK_ENDPOINT_SK_PREFIX}${endpointId}`;
export const WEBHOOK_LOG_SK_PREFIX = 'LOG#';
export const webhookLogSk = (seq: number) => `${WEBHOOK_LOG_SK_PREFIX}${pad(seq, SEQ_DIGITS)}`;
export const WEBHOOK_LOG_HEAD_SK = 'LOG_HEAD';
/**
 * APPROVAL_POLICY: the installation approval policy (issue 20 item 4, src/lifecycle/approval-policy.ts),
 * one partition written only by `alp policy set` / `PUT /v1/policy`: the policy in force (`CURRENT`),
 * its change log (`LOG#{seq:10}`, hash-chained, src/audit/approval-policy-log.ts) and its head (`LOG_HEAD`).
 */
export const APPROVAL_POLICY_PK = 'APPROVAL_POLICY';
export const APPROVAL_POLICY_CURRENT_SK = 'CURRENT';
export const APPROVAL_POLICY_LOG_SK_PREFIX = 'LOG#';
export const approvalPolicyLogSk = (seq: number) => `${APPROVAL_POLICY_LOG_SK_PREFIX}${pad(seq, SEQ_DIGITS)}`;
export const APPROVAL_POLICY_LOG_HEAD_SK = 'LOG_HEAD';
/**
 * KEYS: the installation signing key's history (issue 20 item 2, src/audit/key-log.ts), one partition
 * written only when a key is first used, rotated or replaced: the key log (`LOG#{seq:10}`,
 * hash-chained, KEY_ACTIVATED / KEY_ROTATED), its head (`LOG_HEAD`) and the recorded current key
 * (`CURRENT`: its fingerprint, the condition every key change is written under).
 */
export const KEYS_PK = 'KEYS';
export const KEY_CURRENT_SK = 'CURRENT';
export const KEY_LOG_SK_PREFIX = 'LOG#';
export const keyLogSk = (seq: number) => `${KEY_LOG_SK_PREFIX}${pad(seq, SEQ_DIGITS)}`;
export const KEY_LOG_HEAD_SK = 'LOG_HEAD';
/**
 * WHLOG#{endpoint id}: an endpoint's delivery log, `A#{at}#{ulid}` per attempt (status or error,
 * duration, attempt number; deleted after the retention period), and `OK#{event id}` once an event was
 * delivered there (deleted when its outbox record is acknowledged).
 */
export const webhookDeliveryPk = (endpointId: string) => `WHLOG#${endpointId}`;
export const WEBHOOK_ATTEMPT_SK_PREFIX = 'A#';
export const webhookAttemptSk = (at: string, id: string) => `${WEBHOOK_ATTEMPT_SK_PREFIX}${at}#${id}`;
export const webhookDeliveredSk = (eventId: string) => `OK#${eventId}`;
/** IDEM#{principal}#{sha256 hex of the key} / IDEM: an idempotency key's record (lifecycle/idempotency.ts). */
export const idempotencyPk = (principalId: string, keyHash: string) => `IDEM#${principalId}#${keyHash}`;
export const IDEMPOTENCY_SK = 'IDEM';
/** INSTANCE#{id} / LEASE: a process instance's lease, refreshed while it holds upload reservations (lifecycle/instance.ts). */
export const instanceLeaseKey = (instanceId: string) => ({ PK: `INSTANCE#${instanceId}`, SK: 'LEASE' });
export const principalPk = (principalId: string) => `PRINCIPAL#${principalId}`;
export const PRINCIPAL_SK = 'PRINCIPAL';
/** A principal id's normalised form (lifecycle/principal-key.ts), claimed by the one spelling it names. */
export const principalNamePk = (normalised: string) => `PRINCIPAL_NAME#${normalised}`;
export const PRINCIPAL_NAME_SK = 'PRINCIPAL_NAME';

export type ItemKey = { PK: string; SK: string };
export const FENCE_SK = 'FENCE';
/** The maintenance-fence shards (system/fence.ts): `SYS#fence#{s}` / FENCE, a partition each; with one shard, FENCE itself. */
export const FENCE_SHARD_PK_PREFIX = 'SYS#fence';
export const fenceShardKey = (shard: number, n: number): ItemKey =>
  n === 1 ? { PK: SYS_PK, SK: FENCE_SK } : { PK: `${FENCE_SHARD_PK_PREFIX}${shardSuffix(shard, n)}`, SK: FENCE_SK };
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
/**
 * The partition of telemetry shard `s` of `n` (docs/data-model.md "Telemetry shards"): each holds its
 * own STATE, identity and record items. With one shard it is TELQ#outbox itself.
 */
export const telqShardPk = (s: number, n: number) => `${TELQ_PK}${shardSuffix(s, n)}`;
/** Many audit events of one transaction in one never-leased item, unpacked into records at claim. */
export const telqBatchSk = (availableMs: number, firstId: string) => `${telqFreshSk(availableMs, firstId)}#batch`;

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
/** SYS#installation / NATIVE_BACKUP#{id}: a DynamoDB-native backup (export to S3); not a `backup` record, so not a retention reference source. */
export const nativeBackupSk = (id: string) => `NATIVE_BACKUP#${id}`;
export const NATIVE_BACKUP_SK_PREFIX = 'NATIVE_BACKUP#';
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
/**
 * An observation's partition: RET#{root}, or RET#{root}#{s} when index_shards > 1 (every publish
 * condition-checks its objects' observations), s = shardOf(the object key's directory, index_shards):
 * the objects one commit publishes (a version's content and metadata, a run's output) share their
 * directory, so a publish checks one shard. Runs stay in RET#{root}.
 */
export const observationShardOf = (objectKey: string, indexShards: number) =>
  shardOf(objectKey.slice(0, objectKey.lastIndexOf('/') + 1) || objectKey, indexShards);
export const observationPk = (contentRootId: string, objectKey: string, indexShards: number) =>
  `RET#${contentRootId}${shardSuffix(observationShardOf(objectKey, indexShards), indexShards)}`;
/** Every observation partition of a content root (a reader of all observations fans out over them). */
export const observationPartitions = (contentRootId: string, indexShards: number) =>
  indexPartitions(retentionPk(contentRootId), indexShards);
export const OBSERVATION_SK_PREFIX = 'OBS#';
export const observationSk = (objectKey: string) => `${OBSERVATION_SK_PREFIX}${objectKey}`;
export const RETENTION_RUN_SK_PREFIX = 'RUN#';
export const retentionRunSk = (timestamp: string, runId: string) => `${RETENTION_RUN_SK_PREFIX}${timestamp}#${runId}`;

/**
 * The reference index (issue 17, system/ref-index.ts; docs/data-model.md "Reference index"): one entry
 * per object, written when the object is written, naming the digests found inside its bytes.
 * REFIDX#{root}{#s} / OBJ#{key}, s = the shard of the object's directory (what one publish writes —
 * content and metadata.json — lands in one partition), or of the key itself when the directory is a
 * top-level prefix (every `provenance/{id}.json` in one directory would make one hot partition).
 */
export const refIndexShardOf = (objectKey: string, indexShards: number) => {
  const dir = objectKey.slice(0, objectKey.lastIndexOf('/') + 1);
  return shardOf(dir === '' || dir.indexOf('/') === dir.length - 1 ? objectKey : dir, indexShards);
};
export const refIndexPk = (contentRootId: string, objectKey: string, indexShards: number) =>
  `REFIDX#${contentRootId}${shardSuffix(refIndexShardOf(objectKey, indexShards), indexShards)}`;
export const refIndexPartitions = (contentRootId: string, indexShards: number) => indexPartitions(`REFIDX#${contentRootId}`, indexShards);
export const REF_INDEX_SK_PREFIX = 'OBJ#';
export const refIndexSk = (objectKey: string) => `${REF_INDEX_SK_PREFIX}${objectKey}`;
/** Persistent host pins (retention/pins.ts): PINS / PIN#{digest}. */
export const PINS_PK = 'PINS';
export const pinSk = (digest: string) => `PIN#${digest}`;
export const PIN_SK_PREFIX = 'PIN#';
/** PINS / LOG#{at}#{ulid}: the permanent record of one pin add or remove (who, when, why), oldest first. */
export const pinLogSk = (at: string, id: string) => `LOG#${at}#${id}`;
export const PIN_LOG_SK_PREFIX = 'LOG#';
