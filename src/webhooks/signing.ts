/**
 * The Standard Webhooks request headers of one delivery, the signature made by the `standardwebhooks`
 * library itself (v1: HMAC-SHA256 over `{webhook-id}.{webhook-timestamp}.{body}` with the endpoint's
 * secret), so what receivers verify with any Standard Webhooks library is exactly what ALP signed.
 */
import { Webhook } from 'standardwebhooks';
import type { WebhookEvent } from './events.ts';

export function signedHeaders(secret: string, event: WebhookEvent, at: Date): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'alp-webhooks',
    'webhook-id': event.id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(event.id, at, event.body),
  };
}
