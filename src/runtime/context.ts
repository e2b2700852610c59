/**
 * Builds the ServiceContext every entry point and test uses and registers the services' hooks on it,
 * so services reach each other's rules through the context instead of importing each other:
 * - publish checks: the retention publisher guard (retention/guard.ts) joins every audit commit that
 *   makes uploaded objects referenced;
 * - recovery steps: maintenance crash recovery (system/recovery.ts) settles interrupted backups, then
 *   reviews and retries interrupted retention purges, in that order.
 * - the reference index: `ctx.content` is the engine decorated by system/indexed-content.ts, so every
 *   object written under an indexed prefix gets its REFIDX entry from the pass that hashes it
 *   (issue 17 item 1); a content store that is already indexed is re-decorated, never stacked.
 * - the key history: installationSigner holds every signer it opens to the installation key log
 *   (audit/key-history.ts: the first key recorded, a rotation finished, a retired key refused).
 * Audit sinks (the telemetry outbox) are attached by `attachAuditSinks` (runtime/sinks.ts), which the
 * entry points call after this.
 */
import { KEY_HISTORY } from '../audit/key-history.ts';
import { settleInterruptedBackups } from '../recovery/backup.ts';
import { publishChecks } from '../retention/guard.ts';
import { recoverPreparedPurges } from '../retention/recovery-step.ts';
import {
  type ContextParts,
  createContext as createBareContext,
  type MaintenanceRecoveryStep,
  type PublishCheck,
  type ServiceContext,
} from '../system/context.ts';
import { indexedContent } from '../system/indexed-content.ts';

export type { AuditEvent, AuditSink, ServiceContext } from '../system/context.ts';

/** The publish checks every context carries. */
export const PUBLISH_CHECKS: readonly PublishCheck[] = [publishChecks];

/** The steps every maintenance crash recovery runs, in order. */
export const RECOVERY_STEPS: readonly MaintenanceRecoveryStep[] = [
  { name: 'backups: settle interrupted backups', run: async (ctx) => ({ ...(await settleInterruptedBackups(ctx)) }) },
  { name: 'retention: review and retry interrupted purges', run: recoverPreparedPurges },
];

/**
 * A context with the services' publish checks and recovery steps registered (and no audit sinks yet),
 * its content indexed into its items (the shard count read from ctx.layout at each write).
 */
export function createContext(parts: ContextParts): ServiceContext {
  const ctx = createBareContext({
    publishChecks: [...PUBLISH_CHECKS],
    recoverySteps: [...RECOVERY_STEPS],
    keyHistory: KEY_HISTORY,
    ...parts,
  });
  ctx.content = indexedContent(ctx.content, ctx.items, () => ctx.layout, ctx.clock);
  return ctx;
}
