/**
 * `AlpClient`: one method per route of the HTTP API, typed from the route contract (types.ts). Uses
 * only `fetch` and web streams, so it runs in Node ≥ 20 and in the browser; Node's file and stream
 * helpers are in client/node.ts. Uploads carry `Repr-Digest`; creates carry an `Idempotency-Key`
 * (generated when not given) and are retried on 503/429; downloads are re-hashed as they are read.
 */
import type { RouteId } from '../api/access.ts';
import { IntegrityError } from '../core/errors.ts';
import { type UploadBody, type UploadSource, uploadSource } from './body.ts';
import { type Digest, digestOfBytes } from './digest.ts';
import { type RepresentationInfo, representationOf, VerifiedDownload } from './download.ts';
import { type Call, type RetryOptions, Transport } from './http.ts';
import { jsSha256, type Sha256Factory } from './sha256.ts';
import type * as T from './types.ts';

export interface AlpClientOptions {
  /** The server's base URL, e.g. http://127.0.0.1:8787 */
  url: string;
  /** A bearer token (`alp token create`); the public routes need none. */
  token?: string | undefined;
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch | undefined;
  retry?: RetryOptions | undefined;
  sleep?: ((ms: number) => Promise<void>) | undefined;
  /** How to hash (default a plain-TypeScript sha256; client/node.ts passes node:crypto). */
  sha256?: Sha256Factory | undefined;
  /** Extra headers on every request (a User-Agent, an X-Request-Id). */
  headers?: Record<string, string> | undefined;
}

/** One byte range of a download: checked by the server (it verifies the whole object), not re-hashed here. */
export interface RangeChunk {
  bytes: Uint8Array;
  start: number;
  /** Exclusive. */
  end: number;
  total: number;
  digest: Digest;
}

export interface DownloadOptions {
  /** The digest you expect (e.g. the version's content_hash): a server announcing another is refused. */
  expectedDigest?: Digest | undefined;
}

function base64Bytes(text: string): Uint8Array {
  let binary: string;
  try {
    binary = atob(text);
  } catch {
    throw new TypeError('content is not valid base64');
  }
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

export function newIdempotencyKey(): string {
  const c = globalThis.crypto;
  if (typeof c?.randomUUID === 'function') return c.randomUUID();
  const b = c.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

export class AlpClient {
  private readonly http: Transport;
  private readonly sha256: Sha256Factory;

  constructor(opts: AlpClientOptions) {
    this.sha256 = opts.sha256 ?? jsSha256;
    this.http = new Transport(opts, this.sha256);
  }

  get url(): string {
    return this.http.base;
  }

  // ---- operations (public)

  health(): Promise<T.Health> {
    return this.http.json({ route: 'health' });
  }

  ready(): Promise<T.Ready> {
    return this.http.json({ route: 'ready' });
  }

  /** Prometheus text. */
  async metrics(): Promise<string> {
    return (await this.http.send({ route: 'metrics' })).res.text();
  }

  openapi(): Promise<Record<string, unknown>> {
    return this.http.json({ route: 'openapi' });
  }

  async docs(): Promise<string> {
    return (await this.http.send({ route: 'docs' })).res.text();
  }

  /** The installation's public signing key (public route): pin it to verify attestations and checkpoints. */
  keys(): Promise<T.KeyList> {
    return this.http.json({ route: 'keys' });
  }

  /** The transparency log's signed checkpoint (a C2SP signed note): verify it with `keys()`' verifier key, pinned. */
  async logCheckpoint(): Promise<string> {
    return (await this.http.send({ route: 'logCheckpoint' })).res.text();
  }

  /** The RFC 9162 inclusion proof of leaf `leaf` in the tree of `size` leaves (default: the committed size). */
  logInclusion(leaf: number, size?: number): Promise<T.LogInclusion> {
    return this.http.json({ route: 'logInclusion', query: size === undefined ? { leaf } : { leaf, size } });
  }

  /** The RFC 9162 consistency proof from the tree of `from` leaves to the tree of `to` (default: the committed size). */
  logConsistency(from: number, to?: number): Promise<T.LogConsistency> {
    return this.http.json({ route: 'logConsistency', query: to === undefined ? { from } : { from, to } });
  }

  /** Where entry `seq` of an artifact's audit chain is in the transparency log (its leaf, or pending). */
  logEntry(artifactId: string, seq: number): Promise<T.LogEntry> {
    return this.http.json({ route: 'logEntry', query: { artifact: artifactId, seq } });
  }

  /** The installation approval policy; with a version, also what it means for that version and the caller (`review`). */
  policy(version?: { artifactId: string; version: T.VersionRef }): Promise<T.PolicyState> {
    const query = version ? { artifact_id: version.artifactId, version: version.version } : {};
    return this.http.json({ route: 'getPolicy', query });
  }

  /** Replaces the approval policy (humans only); `expectedVersion` refuses a lost update (409 POLICY_CHANGED). */
  setPolicy(policy: T.ApprovalPolicyInput, options: { expectedVersion?: number; reason?: string } = {}): Promise<T.PolicyState> {
    const json = {
      policy,
      ...(options.expectedVersion === undefined ? {} : { expected_version: options.expectedVersion }),
      ...(options.reason === undefined ? {} : { reason: options.reason }),
    };
    return this.http.json({ route: 'setPolicy', json });
  }

  /** The approval policy log: every change, oldest first, with who, when, before and after (hash-chained). */
  policyLog(): Promise<T.PolicyLog> {
    return this.http.json({ route: 'policyLog' });
  }

  whoami(): Promise<T.WhoAmI> {
    return this.http.json({ route: 'whoami' });
  }

  // ---- artifacts and versions

  listArtifacts(query: T.ListArtifactsQuery = {}): Promise<T.ArtifactPage> {
    return this.http.json({ route: 'listArtifacts', query });
  }

  /** Creates an artifact whose version 1 (DRAFT) is `body`; retried safely under one Idempotency-Key. */
  async createArtifact(options: T.CreateArtifactOptions, body: UploadBody): Promise<T.Version> {
    const { labels, idempotencyKey, ...query } = options;
    const label = labels ? Object.entries(labels).map(([k, v]) => `${k}=${v}`) : undefined;
    return this.upload<T.Version>(
      { route: 'createArtifact', query: { ...query, label }, ...this.idempotent(idempotencyKey) },
      body,
      (v) => v.content_hash,
    );
  }

  /** The next version (DRAFT) of an artifact; retried safely under one Idempotency-Key. */
  addVersion(id: string, options: T.AddVersionOptions, body: UploadBody): Promise<T.Version> {
    const { idempotencyKey, ...query } = options;
    return this.upload<T.Version>(
      { route: 'addVersion', params: { id }, query, ...this.idempotent(idempotencyKey) },
      body,
      (v) => v.content_hash,
    );
  }

  /**
   * A small artifact as one JSON document (at most 1 MiB decoded): `content` as text, or base64 with
   * `encoding: 'base64'`. Its sha256 is sent as `content_hash` unless given, so the server checks it.
   */
  createArtifactFromText(doc: T.TextArtifact): Promise<T.Version> {
    const { idempotencyKey, ...body } = doc;
    return this.jsonUpload({ route: 'createArtifact', ...this.idempotent(idempotencyKey) }, body);
  }

  addVersionFromText(id: string, doc: T.TextVersion): Promise<T.Version> {
    const { idempotencyKey, ...body } = doc;
    return this.jsonUpload({ route: 'addVersion', params: { id }, ...this.idempotent(idempotencyKey) }, body);
  }

  showArtifact(id: string): Promise<T.ArtifactWithVersions> {
    return this.http.json({ route: 'showArtifact', params: { id } });
  }

  listVersions(id: string): Promise<T.VersionList> {
    return this.http.json({ route: 'listVersions', params: { id } });
  }

  showVersion(id: string, v: T.VersionRef): Promise<T.Version> {
    return this.http.json({ route: 'showVersion', params: { id, v } });
  }

  /** The version's content, re-hashed as it is read (`bytes()`, `text()`, `stream()`). */
  getContent(id: string, v: T.VersionRef, opts: DownloadOptions = {}): Promise<VerifiedDownload> {
    return this.download('getContent', { id, v }, opts);
  }

  headContent(id: string, v: T.VersionRef): Promise<RepresentationInfo> {
    return this.head('headContent', { id, v });
  }

  /** Bytes [start, end) of the content (one Range request). */
  getContentRange(id: string, v: T.VersionRef, start: number, end: number): Promise<RangeChunk> {
    return this.range('getContent', { id, v }, start, end);
  }

  history(id: string): Promise<T.History> {
    return this.http.json({ route: 'history', params: { id } });
  }

  verification(id: string): Promise<T.Verification> {
    return this.http.json({ route: 'verification', params: { id } });
  }

  // ---- lifecycle

  transition(id: string, v: T.VersionRef, body: T.TransitionBody): Promise<T.Version> {
    return this.http.json({ route: 'transition', params: { id, v }, json: body });
  }

  propose(id: string, v: T.VersionRef, reason?: string): Promise<T.Version> {
    return this.transition(id, v, { to: 'PROPOSED', ...(reason === undefined ? {} : { reason }) });
  }

  withdraw(id: string, v: T.VersionRef, reason?: string): Promise<T.Version> {
    return this.transition(id, v, { to: 'DRAFT', ...(reason === undefined ? {} : { reason }) });
  }

  /** Approve or reject (human tokens only). */
  decide(id: string, v: T.VersionRef, body: T.DecisionBody): Promise<T.DecisionResult> {
    return this.http.json({ route: 'decide', params: { id, v }, json: body });
  }

  listApprovals(id: string): Promise<T.ApprovalList> {
    return this.http.json({ route: 'listApprovals', params: { id } });
  }

  /** Compensation (rollback) artifact of an EXECUTED or FAILED version. */
  compensate(id: string, v: T.VersionRef, query: T.CompensationQuery, body: UploadBody): Promise<T.CompensationResult> {
    return this.upload<T.CompensationResult>({ route: 'compensate', params: { id, v }, query }, body, (r) => r.version.content_hash);
  }

  getProvenance(id: string): Promise<T.ProvenanceChain> {
    return this.http.json({ route: 'getProvenance', params: { id } });
  }

  getProvenanceInToto(id: string): Promise<T.InTotoStatement> {
    return this.http.json({ route: 'getProvenance', params: { id }, query: { format: 'in-toto' } });
  }

  /** The SLSA provenance statement in a DSSE envelope signed by the installation key (verify with `keys()`). */
  getProvenanceEnvelope(id: string): Promise<T.DsseEnvelope> {
    return this.http.json({ route: 'getProvenance', params: { id }, query: { format: 'dsse' } });
  }

  /** Every approval and rejection of a version, each as a signed in-toto statement (DSSE). */
  listAttestations(id: string, v: T.VersionRef): Promise<T.AttestationList> {
    return this.http.json({ route: 'listAttestations', params: { id, v } });
  }

  addProvenance(id: string, body: T.ProvenanceBody): Promise<T.ProvenanceStep> {
    return this.http.json({ route: 'addProvenance', params: { id }, json: body });
  }

  archive(id: string): Promise<T.ArchiveResult> {
    return this.http.json({ route: 'archive', params: { id } });
  }

  // ---- aliases and search

  listAliases(id: string): Promise<T.AliasList> {
    return this.http.json({ route: 'listAliases', params: { id } });
  }

  /** Sets or moves `@name` to an APPROVED or EXECUTED version (human tokens only). */
  setAlias(id: string, name: string, version: T.VersionRef, reason?: string): Promise<T.AliasChange> {
    return this.http.json({ route: 'setAlias', params: { id, name }, json: { version, ...(reason === undefined ? {} : { reason }) } });
  }

  removeAlias(id: string, name: string, reason?: string): Promise<T.AliasRemoval> {
    return this.http.json({ route: 'removeAlias', params: { id, name }, query: reason === undefined ? {} : { reason } });
  }

  /** Artifacts by name prefix, labels (all must match) and state; `labels` as a map. */
  search(options: T.SearchOptions = {}): Promise<T.SearchPage> {
    const { labels, ...query } = options;
    const label = labels ? Object.entries(labels).map(([k, v]) => `${k}=${v}`) : undefined;
    return this.http.json({ route: 'search', query: { ...query, ...(label ? { label } : {}) } });
  }

  // ---- executions

  startExecution(id: string, v: T.VersionRef): Promise<T.Execution> {
    return this.http.json({ route: 'startExecution', params: { id, v } });
  }

  listExecutions(id: string): Promise<T.ExecutionList> {
    return this.http.json({ route: 'listExecutions', params: { id } });
  }

  showExecution(run: string): Promise<T.Execution> {
    return this.http.json({ route: 'showExecution', params: { run } });
  }

  uploadOutput(run: string, output: T.OutputName, body: UploadBody): Promise<T.OutputRecord> {
    return this.upload<T.OutputRecord>({ route: 'uploadOutput', params: { run, output } }, body, (r) => r.digest);
  }

  getOutput(run: string, output: T.OutputName, opts: DownloadOptions = {}): Promise<VerifiedDownload> {
    return this.download('getOutput', { run, output }, opts);
  }

  headOutput(run: string, output: T.OutputName): Promise<RepresentationInfo> {
    return this.head('headOutput', { run, output });
  }

  getOutputRange(run: string, output: T.OutputName, start: number, end: number): Promise<RangeChunk> {
    return this.range('getOutput', { run, output }, start, end);
  }

  finishExecution(run: string, body: T.FinishBody): Promise<T.Execution> {
    return this.http.json({ route: 'finishExecution', params: { run }, json: body });
  }

  // ---- queries and status

  queryTransitions(query: T.DateQuery): Promise<T.QueryPage> {
    return this.http.json({ route: 'queryTransitions', query });
  }

  queryApprovals(query: T.ApproverQuery): Promise<T.QueryPage> {
    return this.http.json({ route: 'queryApprovals', query });
  }

  queryRuns(query: T.DateQuery): Promise<T.QueryPage> {
    return this.http.json({ route: 'queryRuns', query });
  }

  queryProvenance(query: T.DateQuery): Promise<T.QueryPage> {
    return this.http.json({ route: 'queryProvenance', query });
  }

  queryCompensations(query: T.StateQuery): Promise<T.QueryPage> {
    return this.http.json({ route: 'queryCompensations', query });
  }

  statusStates(): Promise<T.StateCounts> {
    return this.http.json({ route: 'statusStates' });
  }

  statusOperations(): Promise<T.OperationsStatus> {
    return this.http.json({ route: 'statusOperations' });
  }

  // ---- the parts the methods share

  private idempotent(key: string | undefined): Pick<Call, 'headers' | 'retrySafe'> {
    const k = key ?? newIdempotencyKey();
    return { headers: { 'idempotency-key': `"${k.replace(/(["\\])/g, '\\$1')}"` }, retrySafe: true };
  }

  /** Sends an upload; the digest the server recorded must be the digest of the bytes sent. */
  private async upload<R>(call: Call, body: UploadBody, recorded: (r: R) => string): Promise<R> {
    const source: UploadSource = await uploadSource(body, this.sha256);
    const { res, sent } = await this.http.send({ ...call, upload: source });
    const result = (await res.json()) as R;
    if (sent && recorded(result) !== sent) {
      throw new IntegrityError(`the server recorded ${recorded(result)} for bytes whose sha256 is ${sent}`, {
        expected: sent,
        actual: recorded(result),
      });
    }
    return result;
  }

  private async jsonUpload(call: Call, body: { content: string; encoding?: 'utf8' | 'base64'; content_hash?: string }): Promise<T.Version> {
    const bytes = body.encoding === 'base64' ? base64Bytes(body.content) : new TextEncoder().encode(body.content);
    const digest = digestOfBytes(bytes, this.sha256);
    const v = await this.http.json<T.Version>({ ...call, json: { content_hash: digest, ...body } });
    if (v.content_hash !== (body.content_hash ?? digest)) {
      throw new IntegrityError(`the server recorded ${v.content_hash} for content whose sha256 is ${digest}`, {
        expected: digest,
        actual: v.content_hash,
      });
    }
    return v;
  }

  private async download(route: RouteId, params: Record<string, string | number>, opts: DownloadOptions): Promise<VerifiedDownload> {
    const { res } = await this.http.send({ route, params, headers: { accept: '*/*' } });
    return new VerifiedDownload(res, this.sha256, opts.expectedDigest);
  }

  private async head(route: RouteId, params: Record<string, string | number>): Promise<RepresentationInfo> {
    return representationOf((await this.http.send({ route, params, headers: { accept: '*/*' } })).res);
  }

  private async range(route: RouteId, params: Record<string, string | number>, start: number, end: number): Promise<RangeChunk> {
    if (!(Number.isInteger(start) && Number.isInteger(end) && start >= 0 && end > start)) throw new RangeError('need 0 <= start < end');
    const { res } = await this.http.send({ route, params, headers: { accept: '*/*', range: `bytes=${start}-${end - 1}` } });
    const info = representationOf(res);
    const bytes = new Uint8Array(await res.arrayBuffer());
    const m = /bytes (\d+)-(\d+)\/(\d+)/.exec(res.headers.get('content-range') ?? '');
    if (res.status === 206 && m) return { bytes, start: Number(m[1]), end: Number(m[2]) + 1, total: Number(m[3]), digest: info.digest };
    return { bytes, start: 0, end: bytes.length, total: bytes.length, digest: info.digest };
  }
}
