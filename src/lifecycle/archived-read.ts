/**
 * Verified reads of archived content. Archive copies are GLACIER on S3 (RFC-012 §9.3), which real S3
 * refuses to serve until the object is restored, while archive leaves the originals in place until
 * retention reclaims them. So a read of archived content tries the original first (the same bytes:
 * both are checked against the one recorded digest) and falls back to the archive copy only once the
 * original is gone; a cold copy then fails with ARCHIVED_COLD, which says how to restore it.
 */
import type { Readable } from 'node:stream';
import type { ContentStore, GetOptions } from '../content/content-store.ts';
import type { Digest } from '../core/digest.ts';
import { NotFound } from '../core/errors.ts';

export async function getOriginalOrArchived(
  content: ContentStore,
  keys: { original: string; archive?: string | undefined },
  digest: Digest,
  opts: GetOptions,
): Promise<Readable> {
  if (keys.archive === undefined) return content.get(keys.original, digest, opts);
  try {
    return await content.get(keys.original, digest, opts);
  } catch (e) {
    if (!(e instanceof NotFound)) throw e;
    return content.get(keys.archive, digest, opts);
  }
}
