/**
 * Errors as `application/problem+json` (RFC 9457). The `code` is the stable code the CLI prints
 * (`alp: {CODE}: …`); the status comes from the error (core/errors.ts) unless the HTTP adapter knows
 * better (a client digest mismatch is the client's fault: 400; an unsatisfiable range: 416). Internal
 * failures never show their message, stack or paths: the response names the request id, the log has
 * the rest.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AlpError, ERROR_TABLE, type ErrorCode, toAlpError } from '../core/errors.ts';

export const PROBLEM_TYPE = 'application/problem+json';

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  code: ErrorCode;
  request_id: string;
  details?: Record<string, unknown>;
}

/** An error whose HTTP status differs from the code's default. */
export class HttpProblem extends AlpError {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly customTitle: string | undefined;

  constructor(
    status: number,
    code: ErrorCode,
    message: string,
    opts: { details?: Record<string, unknown>; headers?: Record<string, string>; title?: string; cause?: unknown } = {},
  ) {
    super(code, message, opts.details, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.status = status;
    this.headers = opts.headers ?? {};
    this.customTitle = opts.title;
  }

  override get httpStatus(): number {
    return this.status;
  }
}

/** The code of an error fastify or Node raised with only an HTTP status (a code's own status is in ERROR_TABLE). */
const CODE_BY_STATUS: Record<number, ErrorCode> = {
  401: 'UNAUTHENTICATED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  409: 'CONFLICT',
  413: 'TOO_LARGE',
  414: 'TOO_LARGE',
  431: 'TOO_LARGE',
};

/** Titles of those statuses: a code's title from ERROR_TABLE, or the HTTP-only reason. */
const TITLE_BY_STATUS: Record<number, string> = {
  400: ERROR_TABLE.INVALID.title,
  404: ERROR_TABLE.NOT_FOUND.title,
  405: 'Method not allowed',
  417: 'Expectation failed',
  413: ERROR_TABLE.TOO_LARGE.title,
  414: 'URI too long',
  415: 'Unsupported media type',
  416: 'Range not satisfiable',
  431: 'Request header fields too large',
  503: 'Service unavailable',
};

export function problemTypeUri(code: ErrorCode): string {
  return `urn:alp:problem:${code.toLowerCase()}`;
}

/** The problem document for any error; `internal` tells the caller to log it as a server fault. */
export function toProblem(raw: unknown, request: { id: string; url: string }): { problem: Problem; internal: boolean } {
  const instance = pathOf(request.url);
  // A failing disk or a lost storage connection is told as such (503 STORAGE), not as a bug.
  // (An error that carries its own HTTP status, such as a client's aborted body, keeps it.)
  const storage =
    raw instanceof AlpError || typeof (raw as { statusCode?: unknown } | null)?.statusCode === 'number' ? undefined : toAlpError(raw);
  const err = storage?.code === 'STORAGE' ? storage : raw;
  if (err instanceof AlpError && err.code !== 'INTERNAL') {
    const status = err.httpStatus;
    const problem: Problem = {
      type: problemTypeUri(err.code),
      title: err instanceof HttpProblem && err.customTitle ? err.customTitle : err.title,
      status,
      detail: scrub(err.message),
      instance,
      code: err.code,
      request_id: request.id,
      ...(err.details && Object.keys(err.details).length ? { details: scrubDetails(err.details) } : {}),
    };
    return { problem, internal: status >= 500 && err.code !== 'INTEGRITY' && err.code !== 'MAINTENANCE' && err.code !== 'THROTTLED' };
  }
  const fe = err as Partial<FastifyError> | undefined;
  const status = typeof fe?.statusCode === 'number' ? fe.statusCode : 500;
  if (status >= 400 && status < 500) {
    const code = CODE_BY_STATUS[status] ?? 'INVALID';
    return {
      problem: {
        type: problemTypeUri(code),
        title: TITLE_BY_STATUS[status] ?? 'Invalid request',
        status,
        detail: scrub(clientMessage(fe)),
        instance,
        code,
        request_id: request.id,
      },
      internal: false,
    };
  }
  const internalStatus = err instanceof HttpProblem ? err.status : status >= 500 && status < 600 ? status : 500;
  return {
    problem: {
      type: problemTypeUri('INTERNAL'),
      title: err instanceof HttpProblem && err.customTitle ? err.customTitle : ERROR_TABLE.INTERNAL.title,
      status: internalStatus,
      detail: `the server failed to handle the request; the log has the details under request id ${request.id}`,
      instance,
      code: 'INTERNAL',
      request_id: request.id,
    },
    internal: true,
  };
}

function clientMessage(fe: Partial<FastifyError> | undefined): string {
  return typeof fe?.message === 'string' && fe.message ? fe.message : 'invalid request';
}

export function pathOf(url: string): string {
  const q = url.indexOf('?');
  const p = q >= 0 ? url.slice(0, q) : url;
  return p.length > 512 ? `${p.slice(0, 512)}…` : p;
}

// Absolute filesystem paths never leave the server, even inside a message written for users.
const ABSOLUTE_PATH = /(?<![\w:/])\/(?:[\w.@+-]+\/)+[\w.@+-]*/g;

export function scrub(message: string): string {
  const oneLine = message.replace(/\s*\n\s*/g, ' ');
  const short = oneLine.length > 2000 ? `${oneLine.slice(0, 2000)}…` : oneLine;
  return short.replace(ABSOLUTE_PATH, (m) => (looksLikeFsPath(m) ? '[path]' : m));
}

function looksLikeFsPath(m: string): boolean {
  return /^\/(?:home|root|tmp|var|usr|etc|opt|srv|mnt|work|data|proc|run|private|Users)\//.test(m);
}

function scrubDetails(details: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(details)) {
    if (k === 'cause' || k === 'stack') continue;
    out[k] = typeof v === 'string' ? scrub(v) : v;
  }
  return out;
}

/** Sends the problem; closes the connection when the request body was not read to its end. */
export function sendProblem(request: FastifyRequest, reply: FastifyReply, problem: Problem, headers: Record<string, string> = {}): void {
  if (!request.raw.complete) reply.header('connection', 'close');
  for (const [k, v] of Object.entries(headers)) reply.header(k, v);
  if (problem.status === 401) reply.header('www-authenticate', 'Bearer realm="alp"');
  const retryable = problem.code === 'THROTTLED' || problem.code === 'STORAGE' || problem.code === 'MAINTENANCE';
  if (retryable && headers['retry-after'] === undefined) reply.header('retry-after', '1');
  // A Buffer, so no charset parameter is appended (JSON is UTF-8; RFC 9457 defines none).
  reply
    .code(problem.status)
    .type(PROBLEM_TYPE)
    .send(Buffer.from(JSON.stringify(problem)));
}

/** Writes a problem on a raw socket (errors Node's HTTP parser raises before fastify sees a request). */
const REASONS: Record<number, string> = {
  400: 'Bad Request',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  417: 'Expectation Failed',
  431: 'Request Header Fields Too Large',
};

export function rawProblem(status: number, code: ErrorCode, detail: string, headers: Record<string, string> = {}): string {
  const reason = REASONS[status] ?? 'Bad Request';
  const body = JSON.stringify({
    type: problemTypeUri(code),
    title: TITLE_BY_STATUS[status] ?? reason,
    status,
    detail,
    instance: '',
    code,
    request_id: '',
  });
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return `HTTP/1.1 ${status} ${reason}\r\nContent-Type: ${PROBLEM_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`;
}
