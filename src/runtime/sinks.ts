import type { ServiceContext } from '../lifecycle/context.ts';

/** Plugs the telemetry outbox into the audit transaction (the telemetry issue fills this in). */
export async function attachAuditSinks(_ctx: ServiceContext): Promise<void> {}
