/**
 * Streaming transfer over HTTP. Uploads: the raw request body goes to the content store as it arrives
 * (never buffered whole), counted, limited, with an optional RFC 9530 client digest. Downloads: the
 * verified stream from the content store goes to the socket with `ETag`, `Repr-Digest`,
 * `Content-Length`, single `Range` support; if verification fails after the headers went out, the
 * connection is destroyed so no client ever sees a complete 200 with wrong bytes.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Readable, Transform, type TransformCallback } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sendChunks } from '../content/direct-read.ts';
import { type Digest, fromStructuredDigest, toStructuredDigest } from '../core/digest.ts';
import { IntegrityError, InvalidInput, TooLarge } from '../core/errors.ts';
import type { ApiMetrics } from './metrics.ts';
import { HttpProblem, pathOf } from './problem.ts';

export interface UploadInput {
  body: Readable;
  expectedDigest: Digest | undefined;
  maxBytes: number;
  /** The declared Content-Length, when the request has one (the S3 engine sizes its parts by it). */
  size: number | undefined;
  /** Stops reading the request into the body (when the operation ends without consuming it). */
  dispose(): void;
}

/** Reads the upload headers (digest, size, coding) and streams the raw body to the store, counted. */
export function uploadInput(request: FastifyRequest, maxBytes: number, metrics: ApiMetrics): UploadInput {
  const h = request.headers;
  const coding = h['content-encoding'];
  if (coding !== undefined && coding.trim().toLowerCase() !== 'identity') {
    throw new HttpProblem(415, 'INVALID', 'content codings are not accepted: send the bytes as they are to be stored', {
      title: 'Unsupported media type',
    });
  }
  const declared = h['content-length'];
  if (declared !== undefined && /^\d+$/.test(declared) && Number(declared) > maxBytes) {
    throw new TooLarge(`the body is ${declared} bytes; the limit is ${maxBytes}`, { limit: maxBytes });
  }
  const expectedDigest = clientDigest(h['repr-digest'], h['content-digest']);
  const route = routeLabel(request);
  const raw = request.raw;
  let pending = 0;
  const count = (n: number) => {
    pending += n;
    if (pending >= 1 << 20) {
      metrics.bytesIn.inc({ route }, pending);
      pending = 0;
    }
  };
  const body = new CountingBody(count);
  // The consumer (the content store) sees the body's errors through its reads; this listener only
  // keeps an error that comes before the first read (a client aborting while the handler still checks
  // the request or reserves a version number) from being an uncaught 'error' that ends the process.
  body.on('error', () => {});
  body.once('close', () => {
    if (pending) metrics.bytesIn.inc({ route }, pending);
    pending = 0;
  });
  // pipe() keeps reading the socket while the store writes, up to the body's buffers; errors and
  // an early close of the request end the body with an error, so the store discards its temp file.
  raw.pipe(body);
  raw.on('error', (e) => body.destroy(clientAborted(e)));
  raw.on('close', () => {
    if (!raw.complete) body.destroy(clientAborted());
  });
  const dispose = () => {
    raw.unpipe(body);
    body.destroy();
  };
  const size = declared !== undefined && /^\d+$/.test(declared) ? Number(declared) : undefined;
  return { body, expectedDigest, maxBytes, size, dispose };
}

/**
 * The client went away before its body ended: the upload is discarded (the store removes its temp
 * file). Not a server fault, so it is answered (if anyone still listens) and logged as a 400.
 */
export function clientAborted(cause?: unknown): HttpProblem {
  return new HttpProblem(400, 'INVALID', 'the request was aborted before its body ended; nothing was stored', {
    title: 'Request aborted',
    ...(cause === undefined ? {} : { cause }),
  });
}

/** Bytes buffered on each side of the upload's body: the socket is read ahead while the store writes. */
const BODY_BUFFER_BYTES = 1 << 20;

/**
 * The upload's body as the content store reads it: the socket's chunks as they are (the store
 * gathers them into its own pooled buffers, content/fs/body-writer.ts), counted. A stream of its own,
 * not the request itself, so a store that stops reading early (the limit, a digest mismatch) ends
 * this stream and the connection stays up for the answer.
 */
export class CountingBody extends Transform {
  constructor(private readonly onBytes: (n: number) => void) {
    super({ writableHighWaterMark: BODY_BUFFER_BYTES, readableHighWaterMark: BODY_BUFFER_BYTES });
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.onBytes(chunk.length);
    cb(null, chunk);
  }
}

/** The sha-256 of Repr-Digest / Content-Digest (RFC 9530); both given must agree. */
export function clientDigest(repr: string | string[] | undefined, content: string | string[] | undefined): Digest | undefined {
  const parse = (name: string, value: string | string[] | undefined): Digest | undefined => {
    if (value === undefined) return undefined;
    const text = Array.isArray(value) ? value.join(',') : value;
    let d: Digest | undefined;
    try {
      d = fromStructuredDigest(text);
    } catch (e) {
      throw new InvalidInput(`${name}: ${(e as Error).message}`);
    }
    if (!d) throw new InvalidInput(`${name} must carry a sha-256 member (sha-256=:base64:), the only algorithm ALP verifies`);
    return d;
  };
  const a = parse('Repr-Digest', repr);
  const b = parse('Content-Digest', content);
  if (a && b && a !== b) throw new InvalidInput('Repr-Digest and Content-Digest disagree');
  return a ?? b;
}

/** Runs a store operation on an upload: a client digest mismatch is the client's fault (400). */
export async function withUpload<T>(
  input: UploadInput,
  metrics: ApiMetrics,
  inflight: Set<IncomingMessage>,
  request: FastifyRequest,
  fn: () => Promise<T>,
): Promise<T> {
  inflight.add(request.raw);
  metrics.uploadsInFlight.inc();
  try {
    return await fn();
  } catch (e) {
    if (e instanceof IntegrityError && input.expectedDigest) {
      metrics.integrityFailures.inc({ operation: 'upload', cause: 'client_digest' });
      throw new HttpProblem(400, 'INTEGRITY', `the body does not match the client digest; nothing was stored (${e.message})`, {
        details: { expected: input.expectedDigest, ...(e.details?.actual ? { actual: e.details.actual } : {}) },
      });
    }
    throw e;
  } finally {
    input.dispose();
    metrics.uploadsInFlight.dec();
    inflight.delete(request.raw);
  }
}

export function routeLabel(request: FastifyRequest): string {
  return request.routeOptions?.url ?? 'unmatched';
}

// ---- downloads

export interface Representation {
  digest: Digest;
  size: number;
  filename: string;
}

export type RangeDecision = { kind: 'full' } | { kind: 'partial'; start: number; end: number } | { kind: 'unsatisfiable' };

/**
 * One `bytes=` range (RFC 9110 §14): `a-b`, `a-`, `-n`. Anything else (other units, several ranges,
 * bad syntax) is ignored and the whole representation is sent, as the RFC allows. `If-Range` with
 * another entity tag also sends the whole.
 */
export function decideRange(range: string | undefined, ifRange: string | undefined, etag: string, size: number): RangeDecision {
  if (range === undefined) return { kind: 'full' };
  if (ifRange !== undefined && ifRange.trim() !== etag) return { kind: 'full' };
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(range);
  if (!m) return { kind: 'full' };
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return { kind: 'full' };
  if (a === '') {
    const n = Number(b);
    if (n === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(a);
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  if (b !== '' && Number(b) < start) return { kind: 'full' };
  if (start >= size) return { kind: 'unsatisfiable' };
  return { kind: 'partial', start, end };
}

export function etagOf(digest: Digest): string {
  return `"${digest}"`;
}

/** RFC 9110 If-None-Match: a weak comparison against our one strong tag. */
export function noneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === etag);
}

export function representationHeaders(rep: Representation): Record<string, string> {
  return {
    'content-type': 'application/octet-stream',
    etag: etagOf(rep.digest),
    'repr-digest': toStructuredDigest(rep.digest),
    'accept-ranges': 'bytes',
    'content-disposition': `attachment; filename*=UTF-8''${encodeRfc5987(rep.filename)}`,
    'cache-control': 'private, no-transform',
  };
}

function encodeRfc5987(s: string): string {
  return encodeURIComponent(s).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/**
 * Sends a verified stream. Nothing is written before the first chunk is released: a small object (one
 * read chunk) is verified completely before it, so its corruption is answered with a clean 502
 * problem. Later failures destroy the connection: the client sees a truncated, aborted response. A
 * stream with the direct capability (content/direct-read.ts) writes its chunks straight to the socket.
 */
export async function sendVerified(
  request: FastifyRequest,
  reply: FastifyReply,
  stream: Readable,
  status: number,
  headers: Record<string, string>,
  metrics: ApiMetrics,
  closing: () => boolean,
): Promise<void> {
  const res = reply.raw;
  let started = false;
  let sent = 0;
  const start = () => {
    if (started) return;
    started = true;
    reply.hijack();
    if (closing()) headers.connection = 'close';
    res.writeHead(status, { ...headers, 'x-request-id': request.id, 'x-content-type-options': 'nosniff' });
  };
  /** Settles when the socket is done with the chunk (direct) or has room for more (a stream's chunk, which it keeps). */
  const write = (chunk: Buffer, reused: boolean): Promise<void> => {
    start();
    if (res.destroyed) return Promise.reject(new ClientGone());
    sent += chunk.length;
    if (reused) return socketWrite(res, chunk);
    return res.write(chunk) ? Promise.resolve() : drained(res);
  };
  try {
    await sendChunks(stream, write);
    start();
    res.end();
  } catch (e) {
    stream.destroy();
    if (e instanceof IntegrityError) onIntegrityFailure(request, metrics, e, sent);
    if (!started) throw e;
    res.destroy();
    if (!(e instanceof IntegrityError) && !(e instanceof ClientGone)) request.log.warn({ err: e, bytes_sent: sent }, 'download aborted');
  } finally {
    metrics.bytesOut.inc({ route: routeLabel(request) }, sent);
  }
}

/**
 * One socket write, settled when the response is done with the chunk's memory (its callback) or
 * the connection is gone. Resolving on the callback also bounds what a download keeps queued.
 */
function socketWrite(res: ServerResponse, chunk: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const onClose = () => reject(new ClientGone());
    res.once('close', onClose);
    res.write(chunk, (err) => {
      res.off('close', onClose);
      if (err) reject(new ClientGone());
      else resolve();
    });
  });
}

function onIntegrityFailure(request: FastifyRequest, metrics: ApiMetrics, e: IntegrityError, sent: number): void {
  metrics.integrityFailures.inc({ operation: 'download', cause: 'stored_bytes' });
  request.log.error(
    { code: e.code, key: e.details?.key, expected: e.details?.expected, bytes_sent: sent },
    `integrity failure while serving ${pathOf(request.url)}: ${e.message}`,
  );
}

class ClientGone extends Error {}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve, reject) => {
    if (res.destroyed) {
      reject(new ClientGone());
      return;
    }
    const done = (err?: unknown) => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      if (err) reject(err);
      else resolve();
    };
    const onDrain = () => done();
    const onClose = () => done(new ClientGone());
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}

/**
 * Answers GET or HEAD for one stored representation: conditional (`If-None-Match` → 304), ranged
 * (206, or 416 with `Content-Range: bytes *\/size`), else the whole verified stream.
 */
export async function serveRepresentation(
  api: { metrics: ApiMetrics; isClosing(): boolean },
  request: FastifyRequest,
  reply: FastifyReply,
  rep: Representation,
  open: (range: { start: number; end: number } | undefined) => Promise<Readable>,
  headOnly: boolean,
): Promise<unknown> {
  const headers = representationHeaders(rep);
  const etag = headers.etag as string;
  if (noneMatch(request.headers['if-none-match'], etag)) {
    return reply.code(304).header('etag', etag).header('repr-digest', headers['repr-digest']).send();
  }
  const h = request.headers;
  const decision = decideRange(h.range, typeof h['if-range'] === 'string' ? h['if-range'] : undefined, etag, rep.size);
  if (decision.kind === 'unsatisfiable') {
    throw new HttpProblem(416, 'INVALID', `the range ${String(h.range).slice(0, 100)} is not satisfiable for ${rep.size} bytes`, {
      title: 'Range not satisfiable',
      headers: { 'content-range': `bytes */${rep.size}` },
      details: { size: rep.size },
    });
  }
  const range = decision.kind === 'partial' ? { start: decision.start, end: decision.end } : undefined;
  headers['content-length'] = String(range ? range.end - range.start + 1 : rep.size);
  if (range) headers['content-range'] = `bytes ${range.start}-${range.end}/${rep.size}`;
  const status = range ? 206 : 200;
  if (headOnly) return reply.code(status).headers(headers).send();
  const stream = await open(range);
  await sendVerified(request, reply, stream, status, headers, api.metrics, () => api.isClosing());
  return reply;
}
