/**
 * The ContentStore contract: immutable-by-convention objects under '/'-separated keys, with sha256
 * computed while streaming and verified on every read. test/content/conformance.ts is its executable
 * form; the fs and S3 engines both pass it.
 *
 * - put streams once: digest and size are computed in the same pass. With `expectedDigest`, a mismatch
 *   leaves nothing at the key (IntegrityError). Past `maxBytes`, nothing is left (TooLarge). A put that
 *   returned is durable; a put that failed left nothing visible at the key.
 * - get verifies: the returned stream fails with IntegrityError before its end if the bytes do not
 *   hash to `expectedDigest`; the final bytes are held back until verification passes, so a consumer
 *   never sees a clean end of wrong bytes. A range read still hashes the whole object.
 * - keys pass core/object-keys validateObjectKey before reaching storage.
 * - A COMMITTED IMMUTABLE KEY IS NEVER REWRITTEN. Keys under `isImmutableKey` (artifacts/, executions/,
 *   archive/) and packed history segments are create-only: publication (fs: link(), never rename-over;
 *   S3: `If-None-Match: *` on PutObject and CompleteMultipartUpload) fails when anything is at the key.
 *   The same bytes already there are success (a retried upload, an archive copy, compaction or restore
 *   resumed after a crash); different bytes fail with CONFLICT and leave nothing of the losing writer.
 *   Only `repair` (restore) may replace bytes there, and only bytes that do not match the digest being
 *   written (damage). Other keys (provenance/: derived documents) are replaced atomically by a put.
 *
 * ERRORS. Every method fails only with these typed errors (core/errors.ts); engines map errno and SDK
 * errors inside the engine (fs: mapFsError; S3: s3/errors.ts), so no caller looks at engine errors:
 * - InvalidInput: a malformed or escaping key or prefix, a bad range, list cursor or option, a symlink
 *   inside the content root. Nothing was touched.
 * - NotFound: get / readRaw / copy of an absent key.
 * - IntegrityError: bytes that do not hash to the expected digest (put with expectedDigest, every get,
 *   copy's source), a size other than expectedSize, a torn write, something at the key that is not a
 *   regular file.
 * - Conflict: a create-only key already holds other bytes (createOnlyConflict).
 * - ArchivedCold (ARCHIVED_COLD): get / readRaw / copy of an object in a cold class (S3 GLACIER): S3
 *   answers 403 InvalidObjectState until the object is restored (RestoreObject, `aws s3api
 *   restore-object`); the same read succeeds after the restore. Callers never read archive copies to
 *   check them: copy verifies by checksum or by the source, retention and reconcile trust the
 *   recorded digest plus the S3 checksum (head's sha256).
 * - TooLarge: a put past maxBytes.
 * - Throttled: the storage asked us to slow down, or refused the connection (the request did not
 *   reach it); nothing took effect.
 * - StorageFailure: the storage failed (disk full, I/O error, a failed fsync, read-only storage, no
 *   permission, a timeout or lost connection that may have applied a write).
 * - InternalError: anything else (a missing bucket, refused credentials, a bug).
 * A failing body (the caller's stream) fails the put with the body's own error; nothing stays.
 */
import type { Readable } from 'node:stream';
import type { Digest } from '../core/digest.ts';
import { Conflict } from '../core/errors.ts';
import { HISTORY_SEGMENT_PREFIX, isImmutableKey, TLOG_IMMUTABLE_PREFIXES } from '../core/object-keys.ts';

/** Whether publication at `key` must never replace what is there (see the contract above). */
export function isCreateOnlyKey(key: string): boolean {
  return isImmutableKey(key) || key.startsWith(HISTORY_SEGMENT_PREFIX) || TLOG_IMMUTABLE_PREFIXES.some((p) => key.startsWith(p));
}

/** The error of a writer that lost a create-only key to other bytes. */
export function createOnlyConflict(key: string): Conflict {
  return new Conflict(`${key} already holds other bytes; an immutable key, once written, is never written again`, {
    key,
    immutable: true,
  });
}

export type StorageClass = 'STANDARD' | 'STANDARD_IA' | 'GLACIER';

export type Body = AsyncIterable<Uint8Array> | Iterable<Uint8Array> | Readable;

export interface PutOptions {
  expectedDigest?: Digest;
  storageClass?: StorageClass;
  maxBytes?: number;
  /**
   * The size the caller declared (HTTP Content-Length, `--size`, a file's size), when known: engines
   * with multipart uploads size the parts from it (S3: 1 TiB needs 105 MiB parts). Not a check: the
   * digest, expectedSize on reads and maxBytes are. Unknown sizes still work (the parts grow).
   */
  sizeHint?: number;
  signal?: AbortSignal;
  /**
   * Restore only: a create-only key holding bytes that do not hash to `expectedDigest` (damaged) is
   * overwritten; the right bytes already there are kept. Needs `expectedDigest`.
   */
  repair?: boolean;
  /**
   * The key is new by construction — under an id just minted or a version number just reserved, so no
   * other writer and no retry ever writes it — and nothing names it until the caller commits. An
   * engine may then write the bytes at the key itself and make them durable in one round (fs: O_EXCL
   * on the final name, the file's and the directories' fsyncs together) instead of staging them aside:
   * after a crash the key may hold partial bytes, which no record names, every read would refuse by
   * their digest, and retention reclaims (docs/design.md §6 "fs publish"). Ignored with `repair`, for
   * replaceable keys, and by engines whose writes are atomic anyway (S3).
   */
  fresh?: boolean;
}

export interface PutResult {
  digest: Digest;
  size: number;
}

/** An object written by `stage`, to be made durable and visible by `publish` (or dropped by `discard`). */
export interface StagedObject {
  readonly key: string;
  readonly digest: Digest;
  readonly size: number;
}

export interface GetOptions {
  /** First byte to deliver (inclusive). */
  start?: number;
  /** Last byte to deliver (inclusive). */
  end?: number;
  /** The size recorded with the digest, when known: a different size fails early. */
  expectedSize?: number;
}

export interface ObjectInfo {
  key: string;
  size: number;
  storageClass: StorageClass;
  /**
   * head only, when the engine stores one: the SHA-256 the storage computed over the whole object (S3
   * ChecksumSHA256 with ChecksumMode ENABLED: archive copies are made with it). Lets maintenance check
   * a cold object against its recorded digest without reading it.
   */
  sha256?: Digest;
}

export interface ListPage {
  objects: ObjectInfo[];
  cursor?: string;
}

/** A storage-class lifecycle rule (S3 bucket lifecycle), prefixes relative to the store's root. */
export interface LifecycleRule {
  /** Unique among this store's rules: letters, digits, '.', '_', '-' (at most 64). */
  id: string;
  /** Key prefix the rule applies to, relative to the store ('' = every object of the store). */
  prefix: string;
  transitions?: Array<{ days: number; storageClass: Exclude<StorageClass, 'STANDARD'> }>;
  expirationDays?: number;
  abortIncompleteMultipartUploadDays?: number;
}

export interface ContentStore {
  /** 'fs' | 's3': diagnostics only; services never branch on it. */
  readonly engine: string;
  /** A stable description of the content root (directory or bucket/prefix); restores compare it. */
  readonly location: string;
  /** Whether the engine has real storage classes (S3) or only reports them (fs). */
  readonly hasStorageClasses: boolean;

  put(key: string, body: Body, opts?: PutOptions): Promise<PutResult>;
  /**
   * Writes and hashes an object like `put`, but leaves the durable publication to `publish`, so several
   * objects can be made durable together (their fsyncs overlap on the fs engine). An engine may make
   * the object visible already here (S3: each object appears atomically, verified); a reader never sees
   * partial bytes either way. Every staged object must be published or discarded.
   */
  stage(key: string, body: Body, opts?: PutOptions): Promise<StagedObject>;
  /** Makes staged objects durable and visible; when it fails each object is either whole at its key or absent. */
  publish(staged: StagedObject[]): Promise<void>;
  /** Drops staged objects that will not be published (nothing of them stays visible). */
  discard(staged: StagedObject[]): Promise<void>;
  /** Rejects with NotFound when the key is absent. */
  get(key: string, expectedDigest: Digest, opts?: GetOptions): Promise<Readable>;
  /**
   * The bytes as stored, NOT verified: only for maintenance scans that hash what they read (retention
   * reference scans). Content is never delivered to a consumer through this. NotFound when absent.
   */
  readRaw(key: string): Promise<Readable>;
  head(key: string): Promise<ObjectInfo | undefined>;
  /**
   * The storage class the storage itself reports for the object, as it names it (S3: HeadObject
   * `StorageClass`, 'STANDARD' when S3 omits the header); undefined when the object is absent or the
   * engine has no storage classes (fs: it never invents one). `alp lifecycle status` shows it.
   */
  storageClass?(key: string): Promise<string | undefined>;
  /** Keys in UTF-8 byte order, at most `limit` (default 1000) a page. */
  listPage(prefix: string, opts?: { cursor?: string; limit?: number }): Promise<ListPage>;
  list(prefix: string): AsyncIterable<ObjectInfo>;
  /** Copies with verification of the source; returns the digest and size written. */
  copy(sourceKey: string, targetKey: string, opts: { expectedDigest: Digest; storageClass?: StorageClass }): Promise<PutResult>;
  /** Durable delete; false when nothing was there. */
  delete(key: string): Promise<boolean>;
  /**
   * Engines with real storage classes apply lifecycle rules (S3 bucket lifecycle); others leave these
   * out and services report what each object's class would be instead.
   */
  getLifecycleRules?(): Promise<LifecycleRule[]>;
  /** Replaces this store's rules, keeping rules of other owners; idempotent. */
  putLifecycleRules?(rules: LifecycleRule[]): Promise<void>;
  /** Removes leftovers of interrupted puts by dead writers. Returns how many were removed. */
  cleanupInterrupted(): Promise<number>;
  close(): Promise<void>;
}

export async function* listAll(store: ContentStore, prefix: string): AsyncIterable<ObjectInfo> {
  let cursor: string | undefined;
  do {
    const page = await store.listPage(prefix, cursor ? { cursor } : {});
    yield* page.objects;
    cursor = page.cursor;
  } while (cursor);
}

/**
 * A body's size when it is known before reading it: the declared `sizeHint`, or the total of an
 * in-memory array of chunks (a metadata snapshot, a library caller's buffers).
 */
export function knownBodySize(body: Body, opts?: PutOptions): number | undefined {
  if (opts?.sizeHint !== undefined) return opts.sizeHint;
  if (!Array.isArray(body)) return undefined;
  let size = 0;
  for (const chunk of body as Uint8Array[]) size += chunk.byteLength;
  return size;
}
