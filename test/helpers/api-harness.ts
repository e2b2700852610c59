/**
 * The HTTP API in-process on 127.0.0.1 (a port the OS picks) over an embedded installation with a
 * manual clock, and tokens for one principal of each kind (plus a second human). Requests go over real
 * HTTP with Node's fetch.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { type AlpServer, buildServer, type ServerOptions } from '../../src/api/server.ts';
import type { Principal } from '../../src/lifecycle/model.ts';
import { createToken } from '../../src/lifecycle/principals.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { embeddedContext, type TestContext } from './context.ts';

export interface Tokens {
  human: string;
  human2: string;
  agent: string;
  service: string;
}

export interface Harness {
  url: string;
  ctx: TestContext;
  server: AlpServer;
  tokens: Tokens;
  principals: Record<keyof Tokens, Principal>;
  /** Every log line the server wrote (parsed JSON). */
  logs: Array<Record<string, unknown>>;
  call(method: string, path: string, opts?: CallOptions): Promise<ApiResponse>;
  close(): Promise<void>;
}

export interface CallOptions {
  token?: string | undefined;
  json?: unknown;
  body?: Uint8Array | string | ReadableStream | undefined;
  headers?: Record<string, string>;
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  bytes: Buffer;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: response documents are asserted field by field in the tests
  json: any;
}

export async function startApi(options: ServerOptions = {}): Promise<Harness> {
  const ctx = await embeddedContext();
  // The audit sinks attach as in every entry point (runtime/open.ts): the telemetry outbox.
  await attachAuditSinks(ctx);
  await initInstallation(ctx);
  const admin: Principal = { id: 'test-admin', kind: 'human' };
  const mk = async (principal: string, kind: string) => (await createToken(ctx, { principal, kind }, admin)).token;
  const tokens: Tokens = {
    human: await mk('alice', 'human'),
    human2: await mk('bob', 'human'),
    agent: await mk('agent-7', 'agent'),
    service: await mk('exporter', 'service'),
  };
  const principals = {
    human: { id: 'alice', kind: 'human' },
    human2: { id: 'bob', kind: 'human' },
    agent: { id: 'agent-7', kind: 'agent' },
    service: { id: 'exporter', kind: 'service' },
  } as const satisfies Record<keyof Tokens, Principal>;
  const logs: Array<Record<string, unknown>> = [];
  let partial = '';
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      partial += chunk.toString('utf8');
      let nl = partial.indexOf('\n');
      while (nl >= 0) {
        const line = partial.slice(0, nl);
        partial = partial.slice(nl + 1);
        try {
          logs.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          logs.push({ raw: line });
        }
        nl = partial.indexOf('\n');
      }
      cb();
    },
  });
  const server = await buildServer(ctx, { logger: pino({ level: 'info' }, sink), processMetrics: false, version: 'test', ...options });
  const url = await server.listen('127.0.0.1', 0);
  return {
    url,
    ctx,
    server,
    tokens,
    principals,
    logs,
    call: (method, path, opts = {}) => call(url, method, path, opts),
    async close() {
      await server.shutdown(1000);
      await ctx.items.close();
      await ctx.content.close();
    },
  };
}

export async function call(base: string, method: string, path: string, opts: CallOptions = {}): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: RequestInit['body'];
  if (opts.json !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = JSON.stringify(opts.json);
  } else if (opts.body !== undefined) {
    headers['content-type'] ??= 'application/octet-stream';
    body = opts.body as RequestInit['body'];
  }
  const init: RequestInit & { duplex?: 'half' } = { method, headers };
  if (body !== undefined) init.body = body;
  if (opts.body instanceof ReadableStream) init.duplex = 'half';
  const res = await fetch(`${base}${path}`, init);
  const bytes = Buffer.from(await res.arrayBuffer());
  const text = bytes.toString('utf8');
  let json: unknown;
  const type = res.headers.get('content-type') ?? '';
  if (type.includes('json') && text) json = JSON.parse(text);
  return { status: res.status, headers: res.headers, bytes, text, json };
}

/** Fails with the response when the status is not the expected one. */
export function expectStatus(r: ApiResponse, status: number, what = ''): ApiResponse {
  if (r.status !== status) throw new Error(`${what} expected ${status}, got ${r.status}: ${r.text.slice(0, 500)}`);
  return r;
}
