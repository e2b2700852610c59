/**
 * What the client throws. A problem+json answer becomes an `AlpHttpError` carrying the server's stable
 * `code` (the one the CLI prints), its HTTP status, `detail`, `type` and request id; an INTEGRITY
 * problem (the server found stored bytes that do not match, or refused an upload whose bytes did not
 * match its digest) and the client's own re-hash mismatch are `IntegrityError`s, so one `instanceof`
 * covers both. The classes are core/errors.ts's (AlpError and its subclasses import nothing).
 */

import type { ProblemDocument } from '../api/schemas.ts';
import { AlpError, ERROR_CODES, type ErrorCode, IntegrityError } from '../core/errors.ts';

export { AlpError, type ErrorCode, IntegrityError };

/** The HTTP side of a problem answer. */
export interface HttpProblemFields {
  readonly status: number;
  /** `urn:alp:problem:{code}` (or whatever a non-ALP hop answered). */
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly instance: string | undefined;
  readonly requestId: string | undefined;
}

export class AlpHttpError extends AlpError implements HttpProblemFields {
  readonly status: number;
  readonly type: string;
  readonly problemTitle: string;
  readonly detail: string;
  readonly instance: string | undefined;
  readonly requestId: string | undefined;

  constructor(code: ErrorCode, fields: HttpProblemFields, details?: Record<string, unknown>) {
    super(code, fields.detail || fields.title, details);
    this.status = fields.status;
    this.type = fields.type;
    this.problemTitle = fields.title;
    this.detail = fields.detail;
    this.instance = fields.instance;
    this.requestId = fields.requestId;
  }

  override get httpStatus(): number {
    return this.status;
  }

  override get title(): string {
    return this.problemTitle;
  }
}

/** An INTEGRITY problem answered by the server (502 on a download, 400 on an upload). */
export class HttpIntegrityError extends IntegrityError implements HttpProblemFields {
  readonly status: number;
  readonly type: string;
  readonly problemTitle: string;
  readonly detail: string;
  readonly instance: string | undefined;
  readonly requestId: string | undefined;

  constructor(fields: HttpProblemFields, details?: Record<string, unknown>) {
    super(fields.detail || fields.title, details);
    this.status = fields.status;
    this.type = fields.type;
    this.problemTitle = fields.title;
    this.detail = fields.detail;
    this.instance = fields.instance;
    this.requestId = fields.requestId;
  }

  override get httpStatus(): number {
    return this.status;
  }

  override get title(): string {
    return this.problemTitle;
  }
}

/** The server did not answer (connection refused, reset, DNS): nothing is known about the request's effect. */
export class AlpNetworkError extends AlpError {
  constructor(message: string, cause: unknown) {
    super('STORAGE', message, undefined, { cause });
  }
}

const isCode = (c: unknown): c is ErrorCode => typeof c === 'string' && (ERROR_CODES as string[]).includes(c);

/** The code of an answer that carries none (a proxy's page, a bare status). */
function codeOfStatus(status: number): ErrorCode {
  const byStatus: Record<number, ErrorCode> = {
    401: 'UNAUTHENTICATED',
    403: 'FORBIDDEN',
    404: 'NOT_FOUND',
    409: 'CONFLICT',
    413: 'TOO_LARGE',
  };
  return byStatus[status] ?? (status === 429 || status === 503 ? 'THROTTLED' : status >= 500 ? 'INTERNAL' : 'INVALID');
}

/** The typed error of a non-2xx answer, from its problem document when it has one. */
export async function errorOf(res: Response): Promise<AlpError> {
  let doc: Partial<ProblemDocument> = {};
  if ((res.headers.get('content-type') ?? '').includes('json')) {
    try {
      doc = (await res.json()) as Partial<ProblemDocument>;
    } catch {
      // not JSON after all: described by its status alone
    }
  } else {
    await res.body?.cancel().catch(() => {});
  }
  const code = isCode(doc.code) ? doc.code : codeOfStatus(res.status);
  const fields: HttpProblemFields = {
    status: res.status,
    type: typeof doc.type === 'string' ? doc.type : 'about:blank',
    title: typeof doc.title === 'string' ? doc.title : res.statusText || `HTTP ${res.status}`,
    detail: typeof doc.detail === 'string' ? doc.detail : '',
    instance: typeof doc.instance === 'string' ? doc.instance : undefined,
    requestId: typeof doc.request_id === 'string' ? doc.request_id : (res.headers.get('x-request-id') ?? undefined),
  };
  const details = doc.details && typeof doc.details === 'object' ? (doc.details as Record<string, unknown>) : undefined;
  return code === 'INTEGRITY' ? new HttpIntegrityError(fields, details) : new AlpHttpError(code, fields, details);
}
