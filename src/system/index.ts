/**
 * The installation-wide state as one interface (docs/design.md, system/): the installation record,
 * the schema version, the epoch, the maintenance fence (check, acquire, release, crash recovery), the
 * restore hold, the content root, the backup registry and the restore proof. Services ask `system`;
 * no other module builds the keys of these SYS#installation items.
 *
 *   import { system } from '../system/index.ts';
 *   ops.push(system.fence.check(ctx, { kind: 'artifacts', ids: [artifactId] }));
 *
 * The named functions behind it (system/state.ts, fence.ts, recovery.ts, installation.ts, schema.ts,
 * backups.ts, restore-proof.ts) may be imported directly too.
 */
import { BACKUP_REGISTRY, backupRegistryKey, readBackupRecord } from './backups.ts';
import {
  acquireMaintenance,
  assertNotFenced,
  fenceCheck,
  isFenced,
  maintenanceStatus,
  readFence,
  releaseMaintenance,
  withMaintenance,
} from './fence.ts';
import { initInstallation, markBootstrapShown, readInstallation } from './installation.ts';
import { recoverMaintenance } from './recovery.ts';
import { readRestoreProof } from './restore-proof.ts';
import { checkSchema, readSchemaVersion } from './schema.ts';
import {
  advanceEpoch,
  assertEpochAndNoHold,
  epochAdvanceOps,
  epochCheck,
  epochCondition,
  epochHistory,
  isRestoreHeld,
  noRestoreHoldCheck,
  readContentRoot,
  readEpoch,
} from './state.ts';

export const system = {
  installation: { read: readInstallation, init: initInstallation, markBootstrapShown },
  schema: { read: readSchemaVersion, check: checkSchema },
  epoch: {
    read: readEpoch,
    /** The transaction check that holds only while the given epoch is current. */
    check: epochCheck,
    condition: epochCondition,
    advance: advanceEpoch,
    advanceOps: epochAdvanceOps,
    history: epochHistory,
    /** Fail fast with STALE_EPOCH / RESTORE_HELD before an operation starts. */
    assertCurrentAndNotHeld: assertEpochAndNoHold,
  },
  restoreHold: { check: noRestoreHoldCheck, isHeld: isRestoreHeld },
  fence: {
    /** The check op a publisher's transaction carries for a scope: one fence shard of ctx.layout (fence-shards.ts). */
    check: fenceCheck,
    assertNotHeld: assertNotFenced,
    isHeld: isFenced,
    read: readFence,
    acquire: acquireMaintenance,
    release: releaseMaintenance,
    run: withMaintenance,
    /** The master, the epoch and every shard: free | held | partial | orphaned. */
    status: maintenanceStatus,
    /** Crash recovery: take an abandoned fence over in a newer epoch and run the registered steps. */
    recover: recoverMaintenance,
  },
  contentRoot: { read: readContentRoot },
  backups: { key: backupRegistryKey, read: readBackupRecord, location: BACKUP_REGISTRY },
  restoreProof: { read: readRestoreProof },
} as const;

export type { ProcessInstance, ServiceContext } from './context.ts';
export type { FenceInfo, FenceScope, MaintenanceHandle, MaintenanceOptions } from './fence.ts';
