/**
 * The only way the UI talks to the server: the public /v1 API with the signed-in token as
 * `Authorization: Bearer`. The token lives in this tab's sessionStorage; only when the user opts in
 * ("remember on this device") is it also kept in localStorage, so links opened in new tabs are signed
 * in. Never in a URL, a cookie or a log line; signing out clears both stores. Errors are the API's
 * problem+json documents, shown by their `title` and `code`.
 */

import type { Static } from '@sinclair/typebox';
import type * as Status from '../../api/routes/status.ts';
import type * as S from '../../api/schemas.ts';
import type { TelemetryStatus } from '../../telemetry/queue.ts';

export type Principal = Static<typeof S.PrincipalSchema>;
export type PrincipalKind = Principal['kind'];

export interface Problem {
  status: number;
  title: string;
  code: string;
  detail?: string | undefined;
  request_id?: string | undefined;
}

export class ApiError extends Error {
  readonly problem: Problem;
  constructor(problem: Problem) {
    super(`${problem.title} (${problem.code})`);
    this.problem = problem;
  }
}

const TOKEN_KEY = 'alp.token';
const PRINCIPAL_KEY = 'alp.principal';
const listeners = new Set<() => void>();

/** localStorage, or nothing where the browser refuses it (then the token stays per tab). */
function deviceStore(): Storage | undefined {
  try {
    return window.localStorage;
  } catch {
    return undefined;
  }
}

function read(key: string): string | null {
  return sessionStorage.getItem(key) ?? deviceStore()?.getItem(key) ?? null;
}

const notify = () => {
  for (const l of listeners) l();
};

export const session = {
  token(): string | null {
    return read(TOKEN_KEY);
  },
  principal(): Principal | null {
    const raw = read(PRINCIPAL_KEY);
    if (!raw || !read(TOKEN_KEY)) return null;
    try {
      return JSON.parse(raw) as Principal;
    } catch {
      return null;
    }
  },
  /** Whether the token is remembered on this device (localStorage). */
  remembered(): boolean {
    return Boolean(deviceStore()?.getItem(TOKEN_KEY));
  },
  signIn(token: string, principal: Principal, remember = false): void {
    sessionStorage.setItem(TOKEN_KEY, token);
    sessionStorage.setItem(PRINCIPAL_KEY, JSON.stringify(principal));
    const device = deviceStore();
    if (remember && device) {
      device.setItem(TOKEN_KEY, token);
      device.setItem(PRINCIPAL_KEY, JSON.stringify(principal));
    } else {
      // A sign-in that does not ask to be remembered replaces one that was.
      device?.removeItem(TOKEN_KEY);
      device?.removeItem(PRINCIPAL_KEY);
    }
    notify();
  },
  signOut(): void {
    for (const store of [sessionStorage, deviceStore()]) {
      store?.removeItem(TOKEN_KEY);
      store?.removeItem(PRINCIPAL_KEY);
    }
    notify();
  },
  subscribe(listener: () => void): () => void {
    listeners.add(listener);
    return () => listeners.delete(listener);
  },
};

// Signing out in another tab of a remembered session signs this tab out too.
window.addEventListener('storage', (e) => {
  if (e.key !== TOKEN_KEY || e.newValue !== null || e.oldValue === null) return;
  if (sessionStorage.getItem(TOKEN_KEY) !== e.oldValue) return;
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(PRINCIPAL_KEY);
  notify();
});

async function problemOf(res: Response): Promise<Problem> {
  const type = res.headers.get('content-type') ?? '';
  if (type.includes('json')) {
    try {
      const doc = (await res.json()) as Partial<Problem>;
      return {
        status: res.status,
        title: typeof doc.title === 'string' ? doc.title : res.statusText || 'Request failed',
        code: typeof doc.code === 'string' ? doc.code : `HTTP_${res.status}`,
        detail: typeof doc.detail === 'string' ? doc.detail : undefined,
        request_id: typeof doc.request_id === 'string' ? doc.request_id : undefined,
      };
    } catch {
      // not JSON after all
    }
  }
  return { status: res.status, title: res.statusText || 'Request failed', code: `HTTP_${res.status}` };
}

export interface RequestOptions {
  method?: string;
  json?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
  /** Use this token instead of the session's (the sign-in check). */
  token?: string;
}

async function send(path: string, opts: RequestOptions): Promise<Response> {
  if (!path.startsWith('/v1/')) throw new Error('the UI only calls the /v1 API');
  const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
  const token = opts.token ?? session.token();
  if (token) headers.authorization = `Bearer ${token}`;
  const init: RequestInit = { method: opts.method ?? 'GET', headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
  if (opts.json !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(opts.json);
  }
  if (opts.signal) init.signal = opts.signal;
  let res: Response;
  try {
    res = await fetch(path, init);
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new ApiError({ status: 0, title: 'The server did not answer', code: 'NETWORK', detail: (e as Error).message });
  }
  if (!res.ok && res.status !== 206 && res.status !== 304) {
    const problem = await problemOf(res);
    // A token that no longer works: back to the sign-in page (the caller still gets the error).
    if (res.status === 401 && opts.token === undefined) session.signOut();
    throw new ApiError(problem);
  }
  return res;
}

export async function api<T>(path: string, opts: RequestOptions = {}): Promise<T> {
  const res = await send(path, opts);
  return (await res.json()) as T;
}

export interface Chunk {
  bytes: Uint8Array;
  start: number;
  /** Exclusive end. */
  end: number;
  total: number;
}

/** Bytes [start, end) of a verified download (content or execution output), by one Range request. */
export async function fetchRange(path: string, start: number, end: number, signal?: AbortSignal): Promise<Chunk> {
  const res = await send(path, { headers: { accept: '*/*', range: `bytes=${start}-${end - 1}` }, signal });
  const bytes = new Uint8Array(await res.arrayBuffer());
  if (res.status === 206) {
    const m = /bytes (\d+)-(\d+)\/(\d+)/.exec(res.headers.get('content-range') ?? '');
    if (m) return { bytes, start: Number(m[1]), end: Number(m[2]) + 1, total: Number(m[3]) };
  }
  return { bytes, start: 0, end: bytes.length, total: bytes.length };
}

export async function fetchAll(path: string, signal?: AbortSignal): Promise<Uint8Array> {
  const res = await send(path, { headers: { accept: '*/*' }, signal });
  return new Uint8Array(await res.arrayBuffer());
}

// ---- response shapes: derived from the API's TypeBox schemas (src/api/schemas.ts), never copied.
// Where a schema leaves an entry open (history entries, approvals, provenance steps), the UI names
// the fields it reads beside the derived part; the server's tests check those fields exist.

type ArtifactWithVersionsBody = Static<typeof S.ArtifactWithVersions>;
export type Version = Static<typeof S.VersionSchema>;
export type Artifact = Omit<ArtifactWithVersionsBody, 'versions' | 'archived'> & {
  archived?: { at?: string; objects?: ArchivedObject[] };
};
export type ArchivedObject = Static<typeof S.ArchiveResult>['archived'][number];
export type ArtifactWithVersions = Artifact & { versions: Version[] };
export type Page<T> = Omit<Static<typeof S.Page>, 'items'> & { items: T[] };
export type HistoryEntry = Static<typeof S.History>['entries'][number] & {
  seq: number;
  timestamp: string;
  hash?: string;
  [k: string]: unknown;
};
export type Approval = Static<typeof S.ApprovalList>['approvals'][number] & {
  seq: number;
  timestamp: string;
  version: number;
  decision: 'APPROVE' | 'REJECT';
  actor: Principal;
  evidence_ref: string;
  content_hash: string;
  expires_at: string;
  round: number;
  counted: boolean;
  not_counted_reason?: string;
  comment?: string;
};
export type OutputRecord = Static<typeof S.OutputRecord>;
export type Execution = Static<typeof S.ExecutionResult>;
export type ProvenanceStep = Omit<Static<typeof S.ProvenanceStep>, 'recorded_by' | 'actor'> & {
  actor?: string;
  recorded_by?: Principal;
  inputs: string[];
  outputs: string[];
  tool?: string;
  model?: string;
  note?: string;
  timestamp?: string;
  hash?: string;
};
export type StateCounts = Static<typeof Status.StateCounts>;
type OperationsBody = Static<typeof Status.OperationsStatus>;
export type OperationsStatus = Omit<OperationsBody, 'telemetry' | 'retention'> & {
  /** The schema leaves it open: the shape is the queue's own status type. */
  telemetry: Omit<TelemetryStatus, 'initialised_at'> | null;
  retention: Omit<OperationsBody['retention'], 'recent_runs'> & { recent_runs: Array<Record<string, unknown>> };
};

export { VERSION_STATES as STATES } from '../../lifecycle/states.ts';

export const enc = encodeURIComponent;
