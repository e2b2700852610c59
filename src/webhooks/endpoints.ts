/**
 * Webhook endpoints (issue 20 item 5): where events go, which ones, signed with which secret. Items
 * `WEBHOOKS / EP#{id}` (core/keys.ts). Every change is a human's (the access table's manageWebhooks)
 * or, for the automatic disable after repeated failure, the dispatcher's, and commits with its entry
 * of the hash-chained webhook log (audit/webhook-log.ts) in one transaction, fenced like every writer.
 *
 * The secret (`whsec_` + base64 of 32 random bytes, the Standard Webhooks form) is stored in the item
 * because signing needs it; it is returned once, by addEndpoint, and never by a listing or the log.
 */
import { randomBytes } from 'node:crypto';
import { commitWebhookChange, type WebhookAction, type WebhookEventDraft } from '../audit/webhook-log.ts';
import { ConditionFailed, Conflict, InvalidInput, NotFound } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { WEBHOOK_ENDPOINT_SK_PREFIX, WEBHOOKS_PK, webhookEndpointSk } from '../core/keys.ts';
import { assertActor } from '../lifecycle/access.ts';
import type { Principal } from '../lifecycle/model.ts';
import { cond, type Item, queryAll, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { parseEventFilter } from './event-types.ts';

export type EndpointState = 'ACTIVE' | 'DISABLED';

export interface WebhookEndpoint {
  endpoint_id: string;
  url: string;
  events: string[];
  state: EndpointState;
  consecutive_failures: number;
  created_at: string;
  created_by: { id: string; kind: string };
  description?: string;
  disabled_at?: string;
  disabled_reason?: string;
  last_success_at?: string;
  last_failure_at?: string;
}

/** An endpoint as the dispatcher holds it: with its signing secret. */
export interface SigningEndpoint extends WebhookEndpoint {
  secret: string;
}

/** Who records an automatic disable in the webhook log. */
export const DISPATCHER_PRINCIPAL = { id: 'alp:webhook-dispatcher', kind: 'service' } as const;

const ENDPOINT_ID_RE = /^wh_[0-9A-HJKMNP-TV-Z]{26}$/;
const MAX_URL_LENGTH = 2048;

/** http(s) only, no credentials in the URL (they would be logged and shown by `list`), no fragment. */
export function validateEndpointUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidInput(`not a URL: ${JSON.stringify(text.slice(0, 200))}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new InvalidInput(`a webhook URL is http:// or https://, not ${url.protocol}`);
  if (url.username !== '' || url.password !== '')
    throw new InvalidInput('a webhook URL must not carry credentials (user:password@): receivers authenticate ALP by the signature');
  if (url.hash !== '') throw new InvalidInput('a webhook URL has no #fragment (it is never sent)');
  const out = url.toString();
  if (out.length > MAX_URL_LENGTH) throw new InvalidInput(`a webhook URL is at most ${MAX_URL_LENGTH} characters`);
  return out;
}

export function newEndpointSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function endpointKey(id: string) {
  return { PK: WEBHOOKS_PK, SK: webhookEndpointSk(id) };
}

export function endpointView(item: Item): WebhookEndpoint {
  const { PK: _pk, SK: _sk, type: _t, secret: _secret, ...rest } = item;
  return rest as unknown as WebhookEndpoint;
}

function draft(
  ep: WebhookEndpoint,
  action: WebhookAction,
  by: Principal | typeof DISPATCHER_PRINCIPAL,
  extra: Partial<WebhookEventDraft> = {},
) {
  return { action, endpoint_id: ep.endpoint_id, url: ep.url, events: ep.events, by: { id: by.id, kind: by.kind }, ...extra };
}

export interface AddEndpointInput {
  url: string;
  events: readonly string[];
  description?: string | undefined;
}

/** A new ACTIVE endpoint; its secret is in the result and shown nowhere else. */
export async function addEndpoint(ctx: ServiceContext, input: AddEndpointInput, by: Principal): Promise<SigningEndpoint> {
  assertActor('manageWebhooks', by);
  const url = validateEndpointUrl(input.url);
  const events = parseEventFilter(input.events);
  if (input.description !== undefined && input.description.length > 500) throw new InvalidInput('a description is at most 500 characters');
  const endpoint: SigningEndpoint = {
    endpoint_id: `wh_${newId(ctx.clock)}`,
    url,
    events,
    state: 'ACTIVE',
    consecutive_failures: 0,
    created_at: ctx.clock.now().toISOString(),
    created_by: { id: by.id, kind: by.kind },
    ...(input.description === undefined ? {} : { description: input.description }),
    secret: newEndpointSecret(),
  };
  const item: Item = { ...endpointKey(endpoint.endpoint_id), type: 'webhook_endpoint', ...endpoint };
  await commitWebhookChange(ctx, [{ op: 'put', item, condition: cond.notExists() }], draft(endpoint, 'added', by));
  return endpoint;
}

async function storedEndpoints(ctx: ServiceContext): Promise<Item[]> {
  return queryAll(ctx.items, { pk: WEBHOOKS_PK, sk: { beginsWith: WEBHOOK_ENDPOINT_SK_PREFIX }, consistent: true });
}

/** Every endpoint, oldest first, without secrets. */
export async function listEndpoints(ctx: ServiceContext, by: Principal): Promise<WebhookEndpoint[]> {
  assertActor('manageWebhooks', by);
  return (await storedEndpoints(ctx)).map(endpointView);
}

/** The endpoints events go to now, with their secrets (the dispatcher's read). */
export async function activeEndpoints(ctx: ServiceContext): Promise<SigningEndpoint[]> {
  return (await storedEndpoints(ctx)).filter((i) => i.state === 'ACTIVE').map((i) => ({ ...endpointView(i), secret: i.secret as string }));
}

export async function getEndpoint(ctx: ServiceContext, id: string): Promise<WebhookEndpoint> {
  if (!ENDPOINT_ID_RE.test(id))
    throw new InvalidInput(`a webhook endpoint id is wh_ and 26 characters (alp webhooks list), got ${JSON.stringify(id)}`);
  const item = await ctx.items.get(endpointKey(id), { consistent: true });
  if (!item) throw new NotFound(`no webhook endpoint ${id}`);
  return endpointView(item);
}

/** `ops[0]` of a change is its condition on the endpoint: a failure there means someone changed it meanwhile. */
async function commitEndpointChange(ctx: ServiceContext, op: TransactOp, event: WebhookEventDraft, conflict: string): Promise<void> {
  try {
    await commitWebhookChange(ctx, [op], event);
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 0) throw new Conflict(conflict);
    throw e;
  }
}

/** Deletes the endpoint (its delivery log is deleted by the caller, delivery-log.ts). */
export async function removeEndpoint(ctx: ServiceContext, id: string, by: Principal, reason?: string): Promise<WebhookEndpoint> {
  assertActor('manageWebhooks', by);
  const ep = await getEndpoint(ctx, id);
  const op: TransactOp = { op: 'delete', key: endpointKey(id), condition: cond.exists() };
  await commitEndpointChange(ctx, op, draft(ep, 'removed', by, { reason }), `webhook endpoint ${id} was removed concurrently`);
  return ep;
}

/** A DISABLED endpoint gets events again (those that happen from now on), its failure count reset. */
export async function enableEndpoint(
  ctx: ServiceContext,
  id: string,
  by: Principal,
  reason?: string,
): Promise<{ endpoint: WebhookEndpoint; already_active: boolean }> {
  assertActor('manageWebhooks', by);
  const ep = await getEndpoint(ctx, id);
  if (ep.state === 'ACTIVE') return { endpoint: ep, already_active: true };
  const at = ctx.clock.now().toISOString();
  const op: TransactOp = {
    op: 'update',
    key: endpointKey(id),
    update: { set: { state: 'ACTIVE', consecutive_failures: 0, enabled_at: at }, remove: ['disabled_at', 'disabled_reason'] },
    condition: cond.eq('state', 'DISABLED'),
  };
  await commitEndpointChange(ctx, op, draft(ep, 'enabled', by, { reason }), `webhook endpoint ${id} changed concurrently; look again`);
  return { endpoint: { ...ep, state: 'ACTIVE', consecutive_failures: 0 }, already_active: false };
}

/**
 * The dispatcher's automatic disable, recorded in the webhook log. Conditioned on the endpoint being
 * ACTIVE: of two nodes seeing the same failures, one records it. Returns whether this call disabled it.
 */
export async function disableAfterFailures(ctx: ServiceContext, ep: WebhookEndpoint, failures: number): Promise<boolean> {
  const at = ctx.clock.now().toISOString();
  const reason = `${failures} consecutive failed deliveries`;
  const op: TransactOp = {
    op: 'update',
    key: endpointKey(ep.endpoint_id),
    update: { set: { state: 'DISABLED', disabled_at: at, disabled_reason: reason } },
    condition: cond.eq('state', 'ACTIVE'),
  };
  try {
    await commitWebhookChange(ctx, [op], draft(ep, 'disabled', DISPATCHER_PRINCIPAL, { reason, failures }));
    return true;
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 0) return false;
    throw e;
  }
}

/** Counts a failed attempt; the endpoint's consecutive failures after it (undefined: it was removed meanwhile). */
export async function countFailure(ctx: ServiceContext, id: string, at: string): Promise<number | undefined> {
  try {
    const item = await ctx.items.update(
      endpointKey(id),
      { add: { consecutive_failures: 1 }, set: { last_failure_at: at } },
      { condition: cond.exists() },
    );
    return item.consecutive_failures as number;
  } catch (e) {
    if (e instanceof ConditionFailed) return undefined;
    throw e;
  }
}

/** A delivered attempt ends a run of failures. Only written when there was one: a healthy endpoint's item is not rewritten per event. */
export async function resetFailures(ctx: ServiceContext, id: string, at: string): Promise<void> {
  try {
    await ctx.items.update(
      endpointKey(id),
      { set: { consecutive_failures: 0, last_success_at: at } },
      { condition: cond.and(cond.exists(), cond.gt('consecutive_failures', 0)) },
    );
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
  }
}
