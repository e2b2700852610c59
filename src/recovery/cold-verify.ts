/**
 * Reconcile's check of cold objects (content/cold.ts): archive copies in S3 GLACIER are never read
 * (a GetObject answers 403 InvalidObjectState until restored). Each is checked by HeadObject instead:
 * S3's SHA-256 checksum (CopyObject computed it when archive wrote the copy) must equal the digest the
 * items record, and the size the recorded size. A cold copy without a checksum (written before copies
 * carried one) cannot be checked unread: it is reported (problem 'error', saying so), not passed.
 */
import { forEachLimited } from '../core/limit.ts';
import type { ObjectRef } from '../lifecycle/references.ts';
import type { VerifyReport } from '../lifecycle/verify-content.ts';
import type { ServiceContext } from '../system/context.ts';

const ARCHIVE_PREFIX = 'archive/';
const HEAD_CONCURRENCY = 16;

/** Splits off the cold references and checks them by checksum; the rest are verified by reading. */
export async function verifyColdByChecksum(ctx: ServiceContext, refs: ObjectRef[]): Promise<{ rest: ObjectRef[]; cold: VerifyReport }> {
  const cold: VerifyReport = { objects: 0, bytes: 0, ok: 0, findings: [], stale: [] };
  if (!ctx.content.hasStorageClasses) return { rest: refs, cold };
  const handled = new Set<ObjectRef>();
  await forEachLimited(
    refs.filter((r) => r.key.startsWith(ARCHIVE_PREFIX)),
    HEAD_CONCURRENCY,
    async (r) => {
      const info = await ctx.content.head(r.key);
      if (info?.storageClass !== 'GLACIER') return;
      handled.add(r);
      cold.objects++;
      const sizeOk = r.size === undefined || r.size < 0 || info.size === r.size;
      if (info.sha256 === r.digest && sizeOk) {
        cold.ok++;
        return;
      }
      const detail =
        info.sha256 === undefined
          ? 'cold (GLACIER) and S3 has no checksum for it: it cannot be verified without a restore (aws s3api restore-object), then reconcile again'
          : `cold (GLACIER): S3's checksum ${info.sha256} (${info.size} bytes) is not the recorded ${r.digest}${r.size === undefined ? '' : ` (${r.size} bytes)`}`;
      cold.findings.push({
        key: r.key,
        digest: r.digest,
        source: r.source,
        problem: info.sha256 === undefined ? 'error' : 'corrupt',
        detail,
      });
    },
  );
  return { rest: refs.filter((r) => !handled.has(r)), cold };
}
