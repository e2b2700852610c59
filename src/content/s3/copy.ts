/**
 * Server-side copy for the S3 engine (archive copies): CopyObject, never a read of the target.
 *
 * On real S3 a GLACIER object answers GetObject with 403 InvalidObjectState until it is restored, so a
 * copy into GLACIER must be verified without reading it:
 * - CopyObject carries `ChecksumAlgorithm: SHA256`: S3 computes the SHA-256 of the whole new object (a
 *   copy is one part, so it is a full-object checksum) and answers it in CopyObjectResult
 *   ChecksumSHA256 (base64 of the 32 bytes), which must equal the digest we recorded. A mismatch deletes
 *   the copy this call created and fails with INTEGRITY.
 * - Until the endpoint has shown that it answers copies with a checksum (the first copy of a store
 *   instance; S3 clones such as s3rver never do), the SOURCE is verified before the copy by a verifying
 *   read (sources are STANDARD or STANDARD_IA, readable). A copy answered without a checksum after
 *   one was skipped verifies the source afterwards (sources are create-only, so the bytes read are the
 *   bytes copied) and deletes the copy when it does not verify.
 * - A source that carries a full-object ChecksumSHA256 (an earlier archive copy) is checked by it.
 * Create-only targets (archive/ is immutable) carry `If-None-Match: *` on CopyObject, which S3 supports
 * for copies as for PutObject (412, or 409 ConditionalRequestConflict when one is in flight). The loser
 * compares by the target's stored checksum (HeadObject, ChecksumMode ENABLED): the same digest is
 * success (a resumed archive), another is CONFLICT; a target without a checksum is compared by a
 * verifying read, and a cold one that cannot be read is CONFLICT (it cannot be shown to match).
 * CopyObject takes sources up to 5 GiB; larger ones are refused with TOO_LARGE (a multipart
 * UploadPartCopy is not implemented): such an artifact cannot be archived on S3 until it is.
 */
import { CopyObjectCommand, type CopyObjectCommandOutput, type S3Client } from '@aws-sdk/client-s3';
import type { Digest } from '../../core/digest.ts';
import { ArchivedCold, IntegrityError, NotFound, TooLarge } from '../../core/errors.ts';
import { createOnlyConflict, isCreateOnlyKey, type ObjectInfo, type PutResult, type StorageClass } from '../content-store.ts';
import { isConditionFailure } from './errors.ts';

/** The largest source CopyObject accepts (S3: 5 GiB; larger needs UploadPartCopy). */
export const MAX_COPY_OBJECT_BYTES = 5 * 1024 ** 3;

/** What the copy needs from the engine. */
export interface CopyHost {
  readonly client: S3Client;
  readonly bucket: string;
  fullKey(key: string): string;
  head(key: string): Promise<ObjectInfo | undefined>;
  /** Reads the whole object through the verifying path; rejects when it does not match. */
  verify(key: string, digest: Digest, size: number): Promise<void>;
  deleteQuietly(key: string): Promise<void>;
  mapError(e: unknown, key: string): Error;
  /** Whether the endpoint answered a copy with a checksum (undefined: not known yet). */
  copyChecksums: boolean | undefined;
}

/** The base64 of the 32 digest bytes: S3's ChecksumSHA256 spelling of a sha256 digest. */
export function checksumOfDigest(d: Digest): string {
  return Buffer.from(d.slice('sha256:'.length), 'hex').toString('base64');
}

/** A full-object ChecksumSHA256 as a digest; undefined for none or a composite (multipart, "…-N") one. */
export function digestOfChecksum(b64: string | undefined): Digest | undefined {
  if (b64 === undefined || b64.includes('-')) return undefined;
  const bytes = Buffer.from(b64, 'base64');
  return bytes.length === 32 ? `sha256:${bytes.toString('hex')}` : undefined;
}

/** The URL-encoded `bucket/key` CopySource names (S3 decodes it; '/' separators stay). */
function copySource(host: CopyHost, key: string): string {
  return `${host.bucket}/${host.fullKey(key).split('/').map(encodeURIComponent).join('/')}`;
}

export async function serverSideCopy(
  host: CopyHost,
  sourceKey: string,
  targetKey: string,
  opts: { expectedDigest: Digest; storageClass?: StorageClass },
): Promise<PutResult> {
  const digest = opts.expectedDigest;
  const source = await host.head(sourceKey);
  if (!source) throw new NotFound(`no object at ${sourceKey}`);
  if (source.size > MAX_COPY_OBJECT_BYTES) {
    throw new TooLarge(
      `${sourceKey} is ${source.size} bytes: S3 CopyObject copies at most 5 GiB and this engine does not do multipart UploadPartCopy; it cannot be copied server-side`,
      { key: sourceKey, size: source.size, limit: MAX_COPY_OBJECT_BYTES },
    );
  }
  if (source.sha256 !== undefined && source.sha256 !== digest) throw mismatch(sourceKey, digest, source.sha256);
  let sourceVerified = source.sha256 === digest;
  if (!sourceVerified && host.copyChecksums !== true) {
    await host.verify(sourceKey, digest, source.size);
    sourceVerified = true;
  }
  const createOnly = isCreateOnlyKey(targetKey);
  let out: CopyObjectCommandOutput;
  try {
    out = await host.client.send(
      new CopyObjectCommand({
        Bucket: host.bucket,
        Key: host.fullKey(targetKey),
        CopySource: copySource(host, sourceKey),
        ChecksumAlgorithm: 'SHA256',
        // REPLACE with our own (only) content type: the copy takes the request's storage class on S3
        // and on clones that otherwise copy the source's (s3rver keeps the source's metadata on COPY).
        MetadataDirective: 'REPLACE',
        ContentType: 'application/octet-stream',
        ...(opts.storageClass ? { StorageClass: opts.storageClass } : {}),
        ...(createOnly ? { IfNoneMatch: '*' } : {}),
      }),
    );
  } catch (e) {
    if (!(createOnly && isConditionFailure(e))) throw host.mapError(e, sourceKey);
    await sameCopyThere(host, targetKey, digest, source.size);
    return { digest, size: source.size };
  }
  const copied = digestOfChecksum(out.CopyObjectResult?.ChecksumSHA256);
  if (copied !== undefined) host.copyChecksums = true;
  else host.copyChecksums ??= false;
  if (copied !== undefined && copied !== digest) {
    await host.deleteQuietly(targetKey);
    throw mismatch(sourceKey, digest, copied);
  }
  if (copied === undefined && !sourceVerified) {
    try {
      await host.verify(sourceKey, digest, source.size);
    } catch (e) {
      await host.deleteQuietly(targetKey);
      throw e;
    }
  }
  return { digest, size: source.size };
}

/** A create-only target already there: success when it holds `digest`, CONFLICT otherwise. */
async function sameCopyThere(host: CopyHost, key: string, digest: Digest, size: number): Promise<void> {
  const there = await host.head(key);
  if (!there) throw createOnlyConflict(key);
  if (there.sha256 !== undefined) {
    if (there.sha256 === digest && there.size === size) return;
    throw createOnlyConflict(key);
  }
  try {
    await host.verify(key, digest, size);
  } catch (e) {
    if (e instanceof IntegrityError || e instanceof NotFound || e instanceof ArchivedCold) throw createOnlyConflict(key);
    throw e;
  }
}

function mismatch(key: string, expected: Digest, actual: Digest): IntegrityError {
  return new IntegrityError(`${key} does not match the expected digest ${expected} (S3 checksum ${actual}); nothing was copied`, {
    key,
    expected,
    actual,
  });
}
