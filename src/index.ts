/**
 * ALP as a library (issue 17 B14, seed 004 "Trusted maintenance contract"): what `import … from 'alp'`
 * gives a trusted host. The seed's shape:
 *
 *   import { ArtifactRetention, TelemetryQueue } from 'alp';
 *   const retention = new ArtifactRetention(database, artifactRoot);   // a SQLite file + content dir
 *   try { const result = await retention.run(epoch, 'QUARANTINE', trustedHost, { maxArtifacts: 100 }); }
 *   finally { await retention.close(); }
 *   const telemetry = new TelemetryQueue(database);
 *   const batch = await telemetry.claim(epoch, 'host-exporter', now, { maxRecords: 100, maxBytes: 1 << 20, leaseMs: 30_000 });
 *
 * Every method is async (the seed's sketch is synchronous): the same services run on DynamoDB and S3,
 * which answer over the network. Besides the path forms, both classes take opened stores (ItemStore,
 * ContentStore) for any engine; `openInstallation` opens an installation from storage URLs the way
 * the CLI and the HTTP server do. The administrative API is for trusted hosts only: none of it is
 * reachable over HTTP.
 */

export type { ContentStore } from './content/content-store.ts';
export { type Clock, ManualClock, systemClock } from './core/clock.ts';
export { type ContentConfig, type MetadataConfig, resolveStorageConfig, type StorageConfig } from './core/config.ts';
export {
  AlpError,
  Conflict,
  type ErrorCode,
  Forbidden,
  IntegrityError,
  InvalidInput,
  MaintenanceInProgress,
  NotFound,
  RestoreHeld,
  StaleEpoch,
} from './core/errors.ts';
export type { Principal } from './core/model.ts';
export { type LocalHostOptions, localTrustedHost } from './retention/host.ts';
export {
  DEFAULT_MAX_ARTIFACTS,
  GRACE_MS,
  MAX_ARTIFACTS,
  type Observation,
  type ObservationState,
  QUARANTINE_MS,
  type RetentionAction,
  type RetentionApproval,
  type RetentionPlan,
  retentionMaterialDigest,
  type TrustedHost,
} from './retention/model.ts';
export { addPin, listPins, type Pin, type PinEvent, pinHistory, removePin, storedPins } from './retention/pins.ts';
// Retention (seed 004 "Retain references before considering age", "Trusted maintenance contract").
export {
  ArtifactRetention,
  type MaintenanceCommitter,
  type PlanOptions,
  type RetentionHost,
  type RetentionPlanResult,
  type RetentionResult,
  type RunOptions,
} from './retention/retention.ts';
export type { ServiceContext } from './runtime/context.ts';
// Opening an installation (the entry points' way) and the contracts it is made of.
export { type OpenInstallation, openInstallation } from './runtime/open.ts';
export type { ItemStore } from './store/item-store.ts';
export { DEFAULT_TELEMETRY_LIMITS, type TelemetryLimits } from './telemetry/limits.ts';
// Telemetry (seed 004 "Best-effort telemetry with explicit pressure").
export { type TelemetryCounters, TelemetryQueue, type TelemetryStatus } from './telemetry/queue.ts';
export type { AckResult, ClaimedRecord, ClaimOptions, EnqueueResult, Moment } from './telemetry/records.ts';
