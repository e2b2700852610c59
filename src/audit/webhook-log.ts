/**
 * The webhook endpoint log (issue 20 item 5): every endpoint added, removed, enabled, and disabled
 * (by a human, or by the dispatcher after repeated failure), hash-chained like the token log
 * (chained-log.ts; layout in docs/data-model.md "Webhooks"):
 *
 *   WEBHOOKS / LOG#{seq:10}  type `webhook_event`: `seq`, `timestamp`, `action`, `endpoint_id`, `url`,
 *                            `events`, `by` {id, kind}, and as given `reason`, `failures`; `prev_hash`,
 *                            `hash`.
 *   WEBHOOKS / LOG_HEAD      type `webhook_log_head`: `seq` and `head_hash` of the last entry.
 *
 * Never holds an endpoint's secret. `alp audit verify` checks it beside the token log (verify-all.ts).
 */
import type { Digest } from '../core/digest.ts';
import { WEBHOOK_LOG_HEAD_SK, WEBHOOK_LOG_SK_PREFIX, WEBHOOKS_PK, webhookLogSk } from '../core/keys.ts';
import type { TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { type ChainedLog, commitLogged, readLog, verifyLog } from './chained-log.ts';
import type { ChainReport } from './verify.ts';

export const WEBHOOK_ACTIONS = ['added', 'removed', 'enabled', 'disabled'] as const;
export type WebhookAction = (typeof WEBHOOK_ACTIONS)[number];

/** The report name of the webhook log among the chains `alp audit verify` lists. */
export const WEBHOOK_LOG_ID = 'webhook-log';

export interface WebhookEventDraft {
  action: WebhookAction;
  endpoint_id: string;
  url: string;
  events: string[];
  by: { id: string; kind: string };
  reason?: string | undefined;
  /** Consecutive failed deliveries, on an automatic disable. */
  failures?: number | undefined;
}

export type WebhookLogEvent = WebhookEventDraft & { seq: number; timestamp: string; prev_hash: Digest | null; hash: Digest };

const WEBHOOK_LOG: ChainedLog = {
  id: WEBHOOK_LOG_ID,
  pk: WEBHOOKS_PK,
  entryPrefix: WEBHOOK_LOG_SK_PREFIX,
  entrySk: webhookLogSk,
  headSk: WEBHOOK_LOG_HEAD_SK,
  entryType: 'webhook_event',
  headType: 'webhook_log_head',
};

/** Commits `ops` with the entry of `event` (chained-log.ts commitLogged: fenced, head-conditioned). */
export async function commitWebhookChange(ctx: ServiceContext, ops: TransactOp[], event: WebhookEventDraft): Promise<WebhookLogEvent> {
  const [entry] = await commitLogged(ctx, WEBHOOK_LOG, ops, [event as unknown as Record<string, unknown>], event.endpoint_id);
  return entry as unknown as WebhookLogEvent;
}

export async function* readWebhookLog(ctx: Pick<ServiceContext, 'items'>): AsyncGenerator<WebhookLogEvent> {
  for await (const e of readLog(ctx, WEBHOOK_LOG)) yield e as unknown as WebhookLogEvent;
}

export function verifyWebhookLog(ctx: Pick<ServiceContext, 'items'>): Promise<ChainReport> {
  return verifyLog(ctx, WEBHOOK_LOG);
}
