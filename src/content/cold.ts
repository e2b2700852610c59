/**
 * Cold objects (S3 GLACIER / DEEP_ARCHIVE: content-store.ts ArchivedCold) are never read by
 * maintenance. Retention and reconcile instead trust the digest the items record for the object
 * together with the SHA-256 S3 computed over it when it was written (archive copies are made by
 * CopyObject with ChecksumAlgorithm SHA256; HeadObject with ChecksumMode ENABLED answers it): an
 * object whose checksum equals its recorded digest holds those bytes, without a byte being read.
 */
import type { Digest } from '../core/digest.ts';
import { ArchivedCold } from '../core/errors.ts';
import type { ContentStore } from './content-store.ts';

export function isColdError(e: unknown): e is ArchivedCold {
  return e instanceof ArchivedCold;
}

/** The digest S3 recorded for a cold object, or undefined when it has none (or is gone). */
export async function coldDigest(content: ContentStore, key: string): Promise<Digest | undefined> {
  return (await content.head(key))?.sha256;
}
