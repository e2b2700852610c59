/**
 * The dispatcher's settings, from the environment of the process that delivers (`alp serve`/`start`,
 * `alp webhooks deliver`): ALP_WEBHOOK_TIMEOUT_MS, ALP_WEBHOOK_BACKOFF_BASE_MS, ALP_WEBHOOK_BACKOFF_MAX_MS,
 * ALP_WEBHOOK_DISABLE_AFTER, ALP_WEBHOOK_LOG_RETENTION_MS, ALP_WEBHOOK_POLL_MS, ALP_PUBLIC_URL.
 */
import { wholeNumberFromEnv } from '../core/config.ts';

export interface WebhookSettings {
  /** Bound on one HTTP request, connect to last byte of the answer. */
  timeoutMs: number;
  /** The back-off after a record's first failed lease; doubled for each later one, up to backoffMaxMs. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** An endpoint is disabled after this many consecutive failed attempts. */
  disableAfter: number;
  /** Delivery attempts older than this are deleted from the log. */
  logRetentionMs: number;
  /** How often the server's loop looks for records. */
  pollMs: number;
  /** Prefix of the payload's links ('' for root-relative paths). */
  apiBase: string;
}

export const DEFAULT_WEBHOOK_SETTINGS: Readonly<WebhookSettings> = Object.freeze({
  timeoutMs: 10_000,
  backoffBaseMs: 30_000,
  backoffMaxMs: 6 * 60 * 60 * 1000,
  disableAfter: 10,
  logRetentionMs: 7 * 24 * 60 * 60 * 1000,
  pollMs: 1_000,
  apiBase: '',
});

const NUMERIC: Array<[keyof Omit<WebhookSettings, 'apiBase'>, string, number, number]> = [
  ['timeoutMs', 'ALP_WEBHOOK_TIMEOUT_MS', 100, 120_000],
  ['backoffBaseMs', 'ALP_WEBHOOK_BACKOFF_BASE_MS', 1, 24 * 60 * 60 * 1000],
  ['backoffMaxMs', 'ALP_WEBHOOK_BACKOFF_MAX_MS', 1, 24 * 60 * 60 * 1000],
  ['disableAfter', 'ALP_WEBHOOK_DISABLE_AFTER', 1, 10_000],
  ['logRetentionMs', 'ALP_WEBHOOK_LOG_RETENTION_MS', 60_000, 366 * 24 * 60 * 60 * 1000],
  ['pollMs', 'ALP_WEBHOOK_POLL_MS', 10, 3_600_000],
];

/** The settings: defaults, then the environment; `apiBase` given by the caller (the server's URL) unless ALP_PUBLIC_URL says. */
export function webhookSettings(env: NodeJS.ProcessEnv = process.env, apiBase = ''): WebhookSettings {
  const out: WebhookSettings = { ...DEFAULT_WEBHOOK_SETTINGS, apiBase };
  for (const [key, name, min, max] of NUMERIC) out[key] = wholeNumberFromEnv(env, name, out[key], { min, max });
  const pub = env.ALP_PUBLIC_URL;
  if (pub) out.apiBase = pub.replace(/\/+$/, '');
  return out;
}
