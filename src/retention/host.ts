/**
 * A trusted host for ArtifactRetention on this machine (the CLI is one): it takes the maintenance
 * fence, supplies pins, and approves a plan on behalf of a human principal of this installation who
 * gave an evidence reference and a verified restore. The approval it returns is still checked by
 * ArtifactRetention (human, evidence, plan digest, expiry, verified same-installation restore).
 */

import type { Digest } from '../core/digest.ts';
import { Forbidden, InvalidInput } from '../core/errors.ts';
import { PRINCIPAL_SK, principalPk } from '../core/keys.ts';
import type { Principal } from '../lifecycle/model.ts';
import type { ServiceContext } from '../system/context.ts';
import { withMaintenance } from '../system/fence.ts';
import type { RetentionAction, RetentionApproval, RetentionPlan } from './model.ts';
import { resolveRestoreReference } from './restore-proof.ts';
import type { MaintenanceCommitter, RetentionHost } from './retention.ts';

export interface LocalHostOptions {
  /** The fence owner label, e.g. "retention os:alice". */
  owner: string;
  approver: Principal;
  evidenceRef: string;
  /** Path or URL of the verified restore the approval rests on. */
  restore: string;
  pins?: string[];
  /** How long the approval stays valid (default one hour). */
  approvalTtlMs?: number;
  /** Called with the plan before approving; return false to decline (an interactive confirmation). */
  confirm?: (plan: RetentionPlan, digest: Digest) => Promise<boolean> | boolean;
  /**
   * Keep the fence if the run fails midway (a purge interrupted between journal records), so that
   * review and retry happen under maintenance before publishers resume (seed 004). Default: true for
   * a PURGE run, false otherwise.
   */
  holdOnFailure?: boolean;
}

/** Only a human principal known to this installation (or the local operator, a human) may approve. */
export async function assertHumanApprover(ctx: ServiceContext, approver: Principal): Promise<void> {
  if (approver.kind !== 'human') throw new Forbidden(`${approver.id} is ${approver.kind}: only human principals approve retention`);
  if (approver.id.startsWith('os:')) return;
  const p = await ctx.items.get({ PK: principalPk(approver.id), SK: PRINCIPAL_SK }, { consistent: true });
  if (!p) throw new Forbidden(`${approver.id} is not a principal of this installation`);
  if (p.kind !== 'human') throw new Forbidden(`${approver.id} is ${String(p.kind)}: only human principals approve retention`);
}

export function localTrustedHost(ctx: ServiceContext, o: LocalHostOptions): RetentionHost {
  if (!o.evidenceRef?.trim()) throw new InvalidInput('an evidence reference is required');
  if (!o.restore?.trim()) throw new InvalidInput('a verified restore (path or URL) is required');
  // A reference that names no metadata store at all is the operator's mistake: a coded error now, before the fence.
  resolveRestoreReference(o.restore);
  return {
    // Retention fences readers too (seed 004: "every artifact publisher, reader, …"), refuses while a
    // restore is held, and keeps the fence after a failed PURGE unless told otherwise.
    withMaintenance: <T>(epoch: number, fn: (m?: MaintenanceCommitter) => Promise<T>, run?: { action: RetentionAction }) =>
      withMaintenance(ctx, epoch, o.owner, (handle) => fn(handle), {
        purpose: 'retention',
        refuseWhileRestoreHeld: true,
        fenceReaders: true,
        holdOnFailure: o.holdOnFailure ?? run?.action === 'PURGE',
      }),
    pins: () => o.pins ?? [],
    approve: async (plan, digest): Promise<RetentionApproval | undefined> => {
      await assertHumanApprover(ctx, o.approver);
      if (o.confirm && !(await o.confirm(plan, digest))) return undefined;
      return {
        principal: o.approver,
        evidence_ref: o.evidenceRef,
        plan_digest: digest,
        expires_at: new Date(ctx.clock.now().getTime() + (o.approvalTtlMs ?? 60 * 60 * 1000)).toISOString(),
        restore: o.restore,
      };
    },
  };
}
