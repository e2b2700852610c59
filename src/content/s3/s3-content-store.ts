/**
 * ContentStore on Amazon S3 (AWS SDK v3). Keys live under the configured prefix of one bucket.
 *
 * PUT WITHOUT A TEMPORARY KEY. A put must leave nothing at the key when the bytes do not match the
 * expected digest, exceed maxBytes or the body fails, and the digest of a stream is only known at its
 * end. Instead of uploading to a temporary key and copying (3 requests and twice the bytes moved for
 * every object, UploadPartCopy above 5 GB, and leftovers to clean), the body is streamed straight to
 * the final key through the upload loop of multipart.ts with the hashing and the checks INSIDE the stream
 * it reads (one pass): the stream only ends cleanly after the whole body was hashed and the digest
 * and size checked; any failure errors the stream instead. The loop sends the object only when the stream
 * has ended: a body of up to one part (8 MiB) as a single PutObject after the end, a larger one as a
 * multipart upload whose CompleteMultipartUpload comes only after the last part, i.e. after the end.
 * Part sizes follow the declared size (PutOptions.sizeHint) or grow as parts accumulate, so bodies up
 * to S3's 5 TiB fit its 10,000 parts (multipart.ts).
 * S3 makes an object visible only when PutObject or CompleteMultipartUpload succeeds, and atomically
 * replaces any previous object, so a failed put leaves the key as it was (nothing, for a new key) and
 * never a partial object. Memory stays bounded: queueSize (2) parts in flight plus the one filling.
 * Create-only keys (content-store.ts: a committed immutable key is never rewritten) carry
 * `If-None-Match: *` on PutObject and CompleteMultipartUpload: S3 refuses (412 PreconditionFailed, or
 * 409 ConditionalRequestConflict while another conditional write of the key is in flight) instead of
 * replacing. The loser then compares what is there with its own digest: the same bytes are success,
 * other bytes CONFLICT (its multipart upload aborted, nothing of it visible).
 * A failed multipart upload is aborted; the parts of one whose abort failed or whose writer died are
 * invisible (never listed, never read) and only cost storage until cleanupInterrupted() aborts them or a
 * bucket lifecycle rule (AbortIncompleteMultipartUpload) does.
 *
 * Reads verify the whole object, even for a range (content-store.ts): get streams the complete object
 * through VerifyingStream, which forwards the range and withholds the tail until the digest matched.
 * Copies are server-side CopyObject with a SHA-256 checksum, verified by the checksum S3 answers or
 * by the source, never by reading the target (copy.ts): a GLACIER copy cannot be read on real S3.
 *
 * Storage classes: STANDARD, STANDARD_IA, GLACIER are set on put and copy; head and listings report
 * S3's class mapped onto those three (S3 omits it for STANDARD). Reading a GLACIER object needs a
 * restore first: get then fails with ARCHIVED_COLD (ArchivedCold). Delete on a versioned bucket only
 * adds a delete marker: use an unversioned bucket (or a noncurrent-version expiration rule).
 */
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  type DeleteObjectsCommandOutput,
  GetObjectCommand,
  type GetObjectCommandOutput,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { type Clock, systemClock } from '../../core/clock.ts';
import { type ContentConfig, describeContent } from '../../core/config.ts';
import { type Digest, DigestAccumulator } from '../../core/digest.ts';
import { IntegrityError, InternalError, InvalidInput, NotFound, TooLarge } from '../../core/errors.ts';
import { validateListPrefix, validateObjectKey } from '../../core/object-keys.ts';
import {
  type Body,
  type ContentStore,
  createOnlyConflict,
  type GetOptions,
  isCreateOnlyKey,
  type LifecycleRule,
  type ListPage,
  listAll,
  type ObjectInfo,
  type PutOptions,
  type PutResult,
  type StagedObject,
  type StorageClass,
} from '../content-store.ts';
import { checkRange, checkRangeArgs, decodeListCursor, encodeListCursor, listLimit } from '../validate.ts';
import { VerifyingStream } from '../verify-stream.ts';
import { type CopyHost, digestOfChecksum, serverSideCopy } from './copy.ts';
import { isConditionFailure, isMissing, isUnsupported, mapS3Error } from './errors.ts';
import { BucketLifecycleRules, LifecycleNotSupported } from './lifecycle-rules.ts';
import { DEFAULT_PART_PLAN, type PartPlan, S3_MAX_OBJECT_BYTES, uploadBody } from './multipart.ts';

const PART_SIZE = 8 * 1024 * 1024;
const QUEUE_SIZE = 2;
const MAX_DELETE_KEYS = 1000;
/** Multipart uploads older than this are considered abandoned by cleanupInterrupted. */
const ABANDONED_UPLOAD_MS = 60 * 60 * 1000;
const STORAGE_CLASSES: readonly StorageClass[] = ['STANDARD', 'STANDARD_IA', 'GLACIER'];

export interface S3Options {
  /** Credentials for the client; default: the SDK's default chain (environment, profile, role). */
  credentials?: S3ClientConfig['credentials'];
  /** The clock that decides when an interrupted upload is old enough to abort. */
  clock?: Clock;
  /** Smallest multipart part (at least 5 MiB; default 8 MiB) and parts in flight (default 2). */
  partSize?: number;
  /**
   * Tests only: the part plan at a small scale (a tiny base part, few parts), bypassing the 5 MiB floor,
   * to show the part-size arithmetic on s3rver. Real S3 refuses parts under 5 MiB.
   */
  partPlan?: Partial<PartPlan>;
  queueSize?: number;
  /** SDK attempts per request, including the first (default 5; the SDK backs off with jitter). */
  maxAttempts?: number;
  /** Socket timeout per request (default 60 s). */
  requestTimeoutMs?: number;
}

export type { LifecycleRule };
export { LifecycleNotSupported };

export class S3ContentStore implements ContentStore {
  readonly engine = 's3';
  readonly hasStorageClasses = true;
  readonly location: string;
  readonly bucket: string;
  readonly prefix: string;
  private readonly counters = new Map<string, number>();
  /** Staged objects this store wrote itself (not found already there): only those may be discarded. */
  private readonly written = new WeakSet<StagedObject>();
  private readonly clock: Clock;
  private readonly partPlan: PartPlan;
  private readonly queueSize: number;
  private readonly rules: BucketLifecycleRules;
  /** What server-side copies need of this engine (copy.ts); remembers whether copies answer checksums. */
  private readonly copyHost: CopyHost;

  private constructor(
    config: Extract<ContentConfig, { engine: 's3' }>,
    readonly client: S3Client,
    opts: S3Options,
  ) {
    this.bucket = config.bucket;
    this.prefix = config.prefix;
    this.location = describeContent(config);
    this.clock = opts.clock ?? systemClock;
    const partSize = opts.partSize ?? PART_SIZE;
    this.queueSize = opts.queueSize ?? QUEUE_SIZE;
    if (!Number.isInteger(partSize) || partSize < 5 * 1024 * 1024) throw new InvalidInput('partSize must be at least 5 MiB');
    this.partPlan = { ...DEFAULT_PART_PLAN, base: partSize, ...opts.partPlan };
    if (!Number.isInteger(this.queueSize) || this.queueSize < 1) throw new InvalidInput('queueSize must be at least 1');
    this.rules = new BucketLifecycleRules(client, this.bucket, this.prefix);
    this.copyHost = {
      client,
      bucket: this.bucket,
      copyChecksums: undefined,
      fullKey: (k) => this.fullKey(k),
      head: (k) => this.head(k),
      verify: async (k, digest, size) => {
        for await (const _ of await this.get(k, digest, { expectedSize: size }));
      },
      deleteQuietly: async (k) => {
        await this.delete(k).catch(() => false);
      },
      mapError: (e, k) => this.mapError(e, k),
    };
    // Counts every attempt of every S3 operation, including the upload loop's (multipart.ts): it runs inside
    // the SDK's retry loop.
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const name = String(context.commandName ?? 'Unknown').replace(/Command$/, '');
        this.bump(name);
        return next(args);
      },
      { step: 'finalizeRequest', priority: 'low', name: 'alpRequestCounter' },
    );
  }

  /** Opens the engine without any request (the bucket must exist; a missing bucket fails each call clearly). */
  static async open(config: Extract<ContentConfig, { engine: 's3' }>, opts: S3Options = {}): Promise<S3ContentStore> {
    if (config.prefix !== '') {
      if (!config.prefix.endsWith('/')) throw new InvalidInput(`the S3 prefix must end with "/": ${JSON.stringify(config.prefix)}`);
      validateListPrefix(config.prefix);
    }
    const client = new S3Client({
      region: config.region,
      ...(config.endpoint ? { endpoint: config.endpoint } : {}),
      ...(opts.credentials ? { credentials: opts.credentials } : {}),
      forcePathStyle: true,
      // Otherwise the SDK sends streamed bodies aws-chunked with trailing checksums, which S3 clones
      // such as s3rver store verbatim (framing included). ALP verifies its own sha256 on every read.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: opts.maxAttempts ?? 5,
      requestHandler: { requestTimeout: opts.requestTimeoutMs ?? 60_000, connectionTimeout: 5_000 },
    });
    return new S3ContentStore(config, client, opts);
  }

  // ---------------------------------------------------------------------------------------------
  // Objects

  async put(key: string, body: Body, opts: PutOptions = {}): Promise<PutResult> {
    return (await this.putObject(key, body, opts)).result;
  }

  /** `created`: false when a create-only key already held these very bytes (nothing was written). */
  private async putObject(key: string, body: Body, opts: PutOptions): Promise<{ result: PutResult; created: boolean }> {
    validateObjectKey(key);
    const createOnly = isCreateOnlyKey(key) && opts.repair !== true;
    const storageClass = opts.storageClass === undefined ? undefined : checkStorageClass(opts.storageClass);
    const { maxBytes, expectedDigest, signal, sizeHint } = opts;
    if (maxBytes !== undefined && (!Number.isSafeInteger(maxBytes) || maxBytes < 0))
      throw new InvalidInput('maxBytes must be a non-negative integer');
    if (sizeHint !== undefined && (!Number.isSafeInteger(sizeHint) || sizeHint < 0))
      throw new InvalidInput('sizeHint must be a non-negative integer');
    if (sizeHint !== undefined && sizeHint > S3_MAX_OBJECT_BYTES) {
      throw new TooLarge(`${sizeHint} bytes is more than an S3 object holds (5 TiB)`, { limit: S3_MAX_OBJECT_BYTES });
    }
    signal?.throwIfAborted();

    let failure: unknown;
    let result: PutResult | undefined;
    // The one pass over the body: hash, count, check; the stream ends cleanly only when all checks passed.
    async function* checked(): AsyncGenerator<Buffer> {
      const acc = new DigestAccumulator();
      try {
        for await (const chunk of body) {
          signal?.throwIfAborted();
          const buf = toBuffer(chunk);
          acc.update(buf);
          if (maxBytes !== undefined && acc.size > maxBytes) {
            throw new TooLarge(`content exceeds the limit of ${maxBytes} bytes`, { limit: maxBytes });
          }
          if (buf.length > 0) yield buf;
        }
        const digest = acc.digest();
        if (expectedDigest && expectedDigest !== digest) {
          throw new IntegrityError(`content does not match the expected digest ${expectedDigest} (got ${digest})`, {
            key,
            expected: expectedDigest,
            actual: digest,
          });
        }
        result = { digest, size: acc.size };
      } catch (e) {
        failure ??= e;
        throw e;
      }
    }

    const source = Readable.from(checked(), { objectMode: false, highWaterMark: 1 << 20 });
    const abort = new AbortController();
    const onAbort = () => abort.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    const upload = uploadBody(
      {
        client: this.client,
        params: {
          Bucket: this.bucket,
          Key: this.fullKey(key),
          ContentType: 'application/octet-stream',
          ...(storageClass ? { StorageClass: storageClass } : {}),
          // On PutObject and CompleteMultipartUpload.
          ...(createOnly ? { IfNoneMatch: '*' } : {}),
        },
        queueSize: this.queueSize,
        plan: this.partPlan,
        size: sizeHint,
        signal: abort.signal,
      },
      source,
    );
    let created = true;
    try {
      await upload;
    } catch (e) {
      // The body's own failure (IntegrityError, TooLarge, the client's error) wins over whatever
      // the upload made of it, e.g. a failed abort on servers without AbortMultipartUpload.
      if (failure !== undefined) throw failure;
      if (signal?.aborted) throw signal.reason;
      if (!(createOnly && result && isConditionFailure(e))) throw this.mapError(e, key);
      if (!(await this.holds(key, result))) throw createOnlyConflict(key);
      created = false;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      source.destroy();
    }
    if (!result) throw new InternalError(`upload of ${key} finished before its body was fully read`);
    if (created) this.bump('bytesWritten', result.size);
    return { result, created };
  }

  /** Whether the key holds exactly these bytes (verified by hashing them). */
  private async holds(key: string, expected: PutResult): Promise<boolean> {
    try {
      const stream = await this.get(key, expected.digest, { expectedSize: expected.size });
      for await (const _ of stream);
      return true;
    } catch (e) {
      if (e instanceof IntegrityError || e instanceof NotFound) return false;
      throw e;
    }
  }

  /** S3 objects appear atomically with verified bytes: staging is a put, publishing has nothing left to do. */
  async stage(key: string, body: Body, opts: PutOptions = {}): Promise<StagedObject> {
    const { result, created } = await this.putObject(key, body, opts);
    const staged = { key, ...result };
    if (created) this.written.add(staged);
    return staged;
  }

  async publish(_staged: StagedObject[]): Promise<void> {}

  /** Deletes only what this store's own stage wrote: bytes found already at a key are someone else's. */
  async discard(staged: StagedObject[]): Promise<void> {
    for (const s of staged) {
      if (!this.written.delete(s)) continue;
      await this.delete(s.key).catch(() => false);
    }
  }

  async get(key: string, expectedDigest: Digest, opts: GetOptions = {}): Promise<Readable> {
    validateObjectKey(key);
    checkRangeArgs(opts);
    let out: GetObjectCommandOutput;
    try {
      out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key) }));
    } catch (e) {
      throw this.mapError(e, key);
    }
    const source = out.Body instanceof Readable ? out.Body : Readable.from([]);
    const size = out.ContentLength;
    try {
      if (size !== undefined) checkRange(opts, size);
    } catch (e) {
      source.destroy();
      throw e;
    }
    const verifier = new VerifyingStream({ key, expectedDigest, expectedSize: opts.expectedSize, start: opts.start, end: opts.end });
    source.on('error', (e) => verifier.destroy(e));
    verifier.on('close', () => source.destroy());
    source.pipe(verifier);
    if (opts.expectedSize !== undefined && size !== undefined && size !== opts.expectedSize) {
      // Fails early: the stream errors before delivering anything.
      verifier.destroy(
        new IntegrityError(`object ${key} is ${size} bytes, not its recorded ${opts.expectedSize}`, { key, expected: expectedDigest }),
      );
    }
    return verifier;
  }

  async readRaw(key: string): Promise<Readable> {
    validateObjectKey(key);
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key) }));
      return out.Body instanceof Readable ? out.Body : Readable.from([]);
    } catch (e) {
      throw this.mapError(e, key);
    }
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    validateObjectKey(key);
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key), ChecksumMode: 'ENABLED' }));
      const sha256 = digestOfChecksum(out.ChecksumSHA256);
      return { key, size: out.ContentLength ?? 0, storageClass: reportedClass(out.StorageClass), ...(sha256 ? { sha256 } : {}) };
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw this.mapError(e, key);
    }
  }

  async storageClass(key: string): Promise<string | undefined> {
    validateObjectKey(key);
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key) }));
      return out.StorageClass ?? 'STANDARD';
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw this.mapError(e, key);
    }
  }

  async listPage(prefix: string, opts: { cursor?: string; limit?: number } = {}): Promise<ListPage> {
    validateListPrefix(prefix);
    const limit = listLimit(opts.limit);
    let after = opts.cursor === undefined ? undefined : decodeListCursor(opts.cursor, prefix);
    const objects: ObjectInfo[] = [];
    for (;;) {
      let out: ListObjectsV2CommandOutput;
      try {
        out = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: this.prefix + prefix,
            MaxKeys: limit,
            ...(after !== undefined ? { StartAfter: this.prefix + after } : {}),
          }),
        );
      } catch (e) {
        throw this.mapError(e, prefix);
      }
      for (const o of out.Contents ?? []) {
        if (!o.Key?.startsWith(this.prefix)) continue;
        const rel = o.Key.slice(this.prefix.length);
        after = rel;
        // Only keys ALP could have written: not folder markers, not foreign or reserved names.
        if (!isValidKey(rel)) continue;
        objects.push({ key: rel, size: o.Size ?? 0, storageClass: reportedClass(o.StorageClass) });
      }
      const more = out.IsTruncated === true && (out.Contents?.length ?? 0) > 0;
      // A page made only of skipped keys: read on rather than return an empty page.
      if (objects.length === 0 && more) continue;
      const page: ListPage = { objects };
      if (more) page.cursor = encodeListCursor(after as string);
      return page;
    }
  }

  list(prefix: string): AsyncIterable<ObjectInfo> {
    return listAll(this, prefix);
  }

  async copy(sourceKey: string, targetKey: string, opts: { expectedDigest: Digest; storageClass?: StorageClass }): Promise<PutResult> {
    validateObjectKey(sourceKey);
    validateObjectKey(targetKey);
    const storageClass = opts.storageClass === undefined ? undefined : checkStorageClass(opts.storageClass);
    const result = await serverSideCopy(this.copyHost, sourceKey, targetKey, {
      expectedDigest: opts.expectedDigest,
      ...(storageClass ? { storageClass } : {}),
    });
    this.bump('bytesCopied', result.size);
    return result;
  }

  async delete(key: string): Promise<boolean> {
    validateObjectKey(key);
    const existed = (await this.head(key)) !== undefined;
    if (!existed) return false;
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key) }));
    } catch (e) {
      throw this.mapError(e, key);
    }
    return true;
  }

  /** Deletes many keys with DeleteObjects (1000 a request); throws when any of them failed. */
  async deleteMany(keys: string[]): Promise<number> {
    for (const k of keys) validateObjectKey(k);
    const unique = [...new Set(keys)];
    for (let i = 0; i < unique.length; i += MAX_DELETE_KEYS) {
      const batch = unique.slice(i, i + MAX_DELETE_KEYS);
      let out: DeleteObjectsCommandOutput;
      try {
        out = await this.client.send(
          new DeleteObjectsCommand({
            Bucket: this.bucket,
            Delete: { Objects: batch.map((k) => ({ Key: this.fullKey(k) })), Quiet: true },
          }),
        );
      } catch (e) {
        throw this.mapError(e, batch[0] ?? '');
      }
      const errors = out.Errors ?? [];
      if (errors.length > 0) {
        const sample = errors
          .slice(0, 5)
          .map((x) => `${x.Key}: ${x.Code}`)
          .join(', ');
        throw new InternalError(`S3 could not delete ${errors.length} of ${batch.length} objects (${sample}); retry the call`);
      }
    }
    return unique.length;
  }

  /**
   * Aborts the multipart uploads under this store's prefix that were started more than an hour ago
   * (by the injected clock): uploads of writers that died. Younger ones may still be running. Servers
   * without ListMultipartUploads / AbortMultipartUpload (s3rver) are tolerated: nothing is removed.
   */
  async cleanupInterrupted(): Promise<number> {
    const cutoff = this.clock.now().getTime() - ABANDONED_UPLOAD_MS;
    let removed = 0;
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    try {
      for (;;) {
        const out = await this.client.send(
          new ListMultipartUploadsCommand({
            Bucket: this.bucket,
            Prefix: this.prefix,
            ...(keyMarker ? { KeyMarker: keyMarker } : {}),
            ...(uploadIdMarker ? { UploadIdMarker: uploadIdMarker } : {}),
          }),
        );
        for (const u of out.Uploads ?? []) {
          if (!u.Key || !u.UploadId || !u.Initiated || u.Initiated.getTime() > cutoff) continue;
          try {
            await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: u.Key, UploadId: u.UploadId }));
            removed++;
          } catch (e) {
            if (!isMissing(e) && !isUnsupported(e)) throw e;
          }
        }
        if (!out.IsTruncated) break;
        keyMarker = out.NextKeyMarker;
        uploadIdMarker = out.NextUploadIdMarker;
        if (!keyMarker && !uploadIdMarker) break;
      }
    } catch (e) {
      if (isUnsupported(e)) return removed;
      throw this.mapError(e, this.prefix);
    }
    return removed;
  }

  // ---------------------------------------------------------------------------------------------
  // Bucket lifecycle configuration (lifecycle-rules.ts)

  /** This store's lifecycle rules (rules of other owners in the same bucket are not shown). */
  getLifecycleRules(): Promise<LifecycleRule[]> {
    return this.rules.get();
  }

  /**
   * Replaces this store's lifecycle rules with `rules`, keeping every rule of other owners (another
   * prefix, another tool) as it is. Idempotent. An empty list removes this store's rules.
   */
  putLifecycleRules(rules: LifecycleRule[]): Promise<void> {
    return this.rules.put(rules);
  }

  // ---------------------------------------------------------------------------------------------
  // Accounting

  /** Requests sent per S3 operation (every attempt counts) and bytesWritten, bytesCopied. */
  stats(): Record<string, number> {
    return Object.fromEntries([...this.counters.entries()].sort(([a], [b]) => a.localeCompare(b)));
  }

  resetStats(): void {
    this.counters.clear();
  }

  async close(): Promise<void> {
    this.client.destroy();
  }

  private bump(name: string, by = 1): void {
    this.counters.set(name, (this.counters.get(name) ?? 0) + by);
  }

  private fullKey(key: string): string {
    return this.prefix + key;
  }

  private mapError(e: unknown, key: string): Error {
    return mapS3Error(e, key, this.bucket);
  }
}

function toBuffer(chunk: unknown): Buffer {
  if (Buffer.isBuffer(chunk)) return chunk;
  if (chunk instanceof Uint8Array) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (typeof chunk === 'string') return Buffer.from(chunk, 'utf8');
  throw new InvalidInput('a body must yield bytes');
}

function checkStorageClass(c: StorageClass): StorageClass {
  if (!STORAGE_CLASSES.includes(c)) throw new InvalidInput(`unknown storage class ${JSON.stringify(c)}`);
  return c;
}

/** S3's many classes reported as the contract's three (absent means STANDARD). */
function reportedClass(c: string | undefined): StorageClass {
  switch (c) {
    case 'STANDARD_IA':
    case 'ONEZONE_IA':
    case 'GLACIER_IR':
      return 'STANDARD_IA';
    case 'GLACIER':
    case 'DEEP_ARCHIVE':
      return 'GLACIER';
    default:
      return 'STANDARD';
  }
}

function isValidKey(key: string): boolean {
  try {
    validateObjectKey(key);
    return true;
  } catch {
    return false;
  }
}
