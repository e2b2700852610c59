/**
 * What the entry points call (the CLI's `alp webhooks …`, the server's loop): endpoint administration
 * with its delivery log, reading the log, and a one-shot delivery pass.
 */
import { readWebhookLog, type WebhookLogEvent } from '../audit/webhook-log.ts';
import { assertActor } from '../lifecycle/access.ts';
import type { Principal } from '../lifecycle/model.ts';
import type { ServiceContext } from '../system/context.ts';
import type { WebhookSettings } from './config.ts';
import { type DeliveryAttempt, deleteDeliveryLog, readAttempts } from './delivery-log.ts';
import { type DeliveryReport, deliverPending } from './dispatcher.ts';
import { getEndpoint, listEndpoints, removeEndpoint, type WebhookEndpoint } from './endpoints.ts';
import { dispatcherQueue } from './loop.ts';

export type { DeliveryAttempt } from './delivery-log.ts';
export type { DeliveryReport } from './dispatcher.ts';
export { addEndpoint, enableEndpoint, listEndpoints, type SigningEndpoint, type WebhookEndpoint } from './endpoints.ts';
export type { WebhookLogEvent };

/** The webhook log: every endpoint change, oldest first. */
export async function webhookChanges(ctx: ServiceContext, by: Principal): Promise<WebhookLogEvent[]> {
  assertActor('manageWebhooks', by);
  const events: WebhookLogEvent[] = [];
  for await (const e of readWebhookLog(ctx)) events.push(e);
  return events;
}

/** Removes the endpoint (recorded in the webhook log), then its delivery log. */
export async function removeWebhook(ctx: ServiceContext, id: string, by: Principal, reason?: string): Promise<WebhookEndpoint> {
  const ep = await removeEndpoint(ctx, id, by, reason);
  await deleteDeliveryLog(ctx, id);
  return ep;
}

/** The newest attempts of one endpoint, or of every endpoint merged by time. */
export async function deliveryLog(
  ctx: ServiceContext,
  by: Principal,
  endpointId: string | undefined,
  limit: number,
): Promise<DeliveryAttempt[]> {
  assertActor('manageWebhooks', by);
  const ids = endpointId ? [(await getEndpoint(ctx, endpointId)).endpoint_id] : (await listEndpoints(ctx, by)).map((e) => e.endpoint_id);
  const all = (await Promise.all(ids.map((id) => readAttempts(ctx, id, limit)))).flat();
  return all.sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : 0)).slice(0, limit);
}

/** One pass now (cron, tests): deliver everything the outbox has available, then return. */
export async function deliverNow(
  ctx: ServiceContext,
  settings: WebhookSettings,
  opts: { maxClaims?: number } = {},
): Promise<DeliveryReport> {
  return deliverPending(ctx, { queue: dispatcherQueue(ctx), settings, ...opts });
}
