/**
 * Hosts for the plan/run tests: the local trusted host with hooks at the two places a run can be
 * observed from outside — before the fence (in approve, after the plan) and under the fence (inside
 * withMaintenance, before the run's own work) — and the seed's host shape (fn() with no argument).
 */
import type { RetentionApproval, RetentionPlan } from '../../src/retention/model.ts';
import type { RetentionHost } from '../../src/retention/retention.ts';
import type { ServiceContext } from '../../src/system/context.ts';
import { host as harnessHost } from '../helpers/retention-harness.ts';

export interface RunHostOptions {
  restore: string;
  pins?: string[];
  approve?: (plan: RetentionPlan, digest: string) => RetentionApproval | undefined;
  /** Runs after the plan, before the fence is taken (the approval is being asked). */
  beforeFence?: () => Promise<void>;
  /** Runs under the fence, before the run re-validates and acts. */
  inside?: () => Promise<void>;
  holdOnFailure?: boolean;
}

/** The harness's host (retention-harness.ts host) under the names these tests use. */
export function runHost(ctx: ServiceContext, o: RunHostOptions): RetentionHost {
  const { beforeFence, ...rest } = o;
  return harnessHost(ctx, { ...rest, ...(beforeFence ? { during: beforeFence } : {}) });
}

/**
 * A host written the seed's way: its own mutual exclusion (here: a flag), `fn()` called with no
 * argument. The run takes ALP's fence inside it.
 */
export function seedStyleHost(ctx: ServiceContext, o: RunHostOptions): RetentionHost & { entered: number } {
  const base = runHost(ctx, o);
  let busy = false;
  const host = {
    entered: 0,
    pins: base.pins,
    approve: base.approve,
    async withMaintenance<T>(_epoch: number, fn: () => Promise<T>): Promise<T> {
      if (busy) throw new Error('the host is already in maintenance');
      busy = true;
      host.entered++;
      try {
        if (o.inside) await o.inside();
        return await fn();
      } finally {
        busy = false;
      }
    },
  };
  return host;
}
