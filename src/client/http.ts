/**
 * The client's transport: one request of the route table (api/access.ts gives its method and path),
 * the bearer token, problem+json answers as typed errors, and bounded retries of what is safe to
 * send again — reads, and creates carrying an `Idempotency-Key` with a body that can be re-sent — when
 * the server answers 503 or 429 (after its `Retry-After`) or does not answer at all.
 */
import { ROUTES, type RouteId } from '../api/access.ts';
import { bodyOf, type UploadSource } from './body.ts';
import { type Digest, toReprDigest } from './digest.ts';
import { AlpNetworkError, errorOf } from './errors.ts';
import type { Sha256Factory } from './sha256.ts';

export interface RetryOptions {
  /** Attempts in all, the first included (default 4). */
  attempts?: number;
  /** The longest wait between two attempts, whatever Retry-After says (default 30 s). */
  maxDelayMs?: number;
}

export interface TransportOptions {
  url: string;
  token?: string | undefined;
  fetch?: typeof fetch | undefined;
  retry?: RetryOptions | undefined;
  /** How to wait between attempts (tests pass one that records and returns at once). */
  sleep?: ((ms: number) => Promise<void>) | undefined;
  headers?: Record<string, string> | undefined;
}

export type QueryValue = string | number | boolean | readonly string[] | undefined;

export interface Call {
  route: RouteId;
  params?: Record<string, string | number>;
  query?: Record<string, QueryValue> | undefined;
  json?: unknown;
  upload?: UploadSource | undefined;
  headers?: Record<string, string>;
  /** Send again after a 503/429 or no answer: a read, or a write made idempotent by its key. */
  retrySafe?: boolean;
}

export interface Sent {
  res: Response;
  /** The digest of the upload body this attempt sent, when there was one. */
  sent: Digest | undefined;
}

const sleepFor = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function pathOf(route: RouteId, params: Record<string, string | number> = {}): string {
  return ROUTES[route].url.replace(/:(\w+)/g, (_m, name: string) => {
    const v = params[name];
    if (v === undefined || v === '') throw new TypeError(`${route}: missing path parameter ${name}`);
    return encodeURIComponent(String(v));
  });
}

export function queryString(query: Record<string, QueryValue> | undefined): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const item of v) q.append(k, item);
    else q.append(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** Milliseconds to wait from a Retry-After header (delay-seconds or an HTTP date), if it has one. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const v = header.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export class Transport {
  readonly base: string;
  private readonly token: string | undefined;
  private readonly fetchImpl: typeof fetch;
  private readonly attempts: number;
  private readonly maxDelayMs: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly extraHeaders: Record<string, string>;

  constructor(
    opts: TransportOptions,
    private readonly hasher: Sha256Factory,
  ) {
    this.base = opts.url.replace(/\/+$/, '');
    this.token = opts.token;
    this.fetchImpl = opts.fetch ?? ((input, init) => fetch(input, init));
    this.attempts = Math.max(1, opts.retry?.attempts ?? 4);
    this.maxDelayMs = opts.retry?.maxDelayMs ?? 30_000;
    this.sleep = opts.sleep ?? sleepFor;
    this.extraHeaders = opts.headers ?? {};
  }

  /** Sends the call (retrying what is safe); a non-2xx answer (but 304) is thrown as its typed error. */
  async send(call: Call): Promise<Sent> {
    const spec = ROUTES[call.route];
    const url = `${this.base}${pathOf(call.route, call.params)}${queryString(call.query)}`;
    const safe = (spec.method === 'GET' || spec.method === 'HEAD' || call.retrySafe === true) && (call.upload?.replayable ?? true);
    for (let attempt = 1; ; attempt++) {
      const last = !safe || attempt >= this.attempts;
      const prepared = call.upload ? await bodyOf(call.upload, this.hasher) : undefined;
      // `duplex` (Node's fetch, for a streamed body) and `cache` (the browser's) are not in both libraries' RequestInit.
      const init: RequestInit & { duplex?: 'half'; cache?: 'no-store' } = {
        method: spec.method,
        headers: this.headersFor(call),
        redirect: 'error',
        credentials: 'omit',
        cache: 'no-store',
      };
      if (prepared) {
        init.body = prepared.body as NonNullable<RequestInit['body']>;
        if (prepared.streamed) init.duplex = 'half';
      } else if (call.json !== undefined) init.body = JSON.stringify(call.json);
      let res: Response;
      try {
        res = await this.fetchImpl(url, init);
      } catch (e) {
        if ((e as Error).name === 'AbortError' || last)
          throw new AlpNetworkError(`${spec.method} ${url}: no answer (${(e as Error).message})`, e);
        await this.sleep(this.backoff(attempt));
        continue;
      }
      if ((res.status === 503 || res.status === 429) && !last) {
        const wait = retryAfterMs(res.headers.get('retry-after')) ?? this.backoff(attempt);
        await res.body?.cancel().catch(() => {});
        await this.sleep(Math.min(wait, this.maxDelayMs));
        continue;
      }
      if (!res.ok && res.status !== 304) throw await errorOf(res);
      return { res, sent: prepared?.sent() };
    }
  }

  async json<T>(call: Call): Promise<T> {
    return (await (await this.send(call)).res.json()) as T;
  }

  private backoff(attempt: number): number {
    return Math.min(250 * 2 ** (attempt - 1), this.maxDelayMs);
  }

  private headersFor(call: Call): Record<string, string> {
    const h: Record<string, string> = { accept: 'application/json, application/problem+json', ...this.extraHeaders, ...call.headers };
    if (this.token) h.authorization = `Bearer ${this.token}`;
    if (call.json !== undefined) h['content-type'] = 'application/json';
    if (call.upload) {
      h['content-type'] = 'application/octet-stream';
      if (call.upload.digest) h['repr-digest'] = toReprDigest(call.upload.digest);
    }
    return h;
  }
}
