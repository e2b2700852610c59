/**
 * The audit hash (docs/design.md, audit hash format): every audit item's `hash` is the sha256 of the
 * canonical JSON of the item without `hash`, without its declared view fields and without upload
 * reservations. Kept apart from the chain writer (chain.ts) so the policy and verification code can
 * hash without importing the writer.
 */
import { canonicalDigest } from '../core/canonical-json.ts';
import type { Digest } from '../core/digest.ts';
import { MOVED_FROM_SK, movedExecutionSk } from '../core/keys.ts';

export const AUDIT_TYPES = [
  'transition',
  'approval',
  'execution',
  'execution_output',
  'execution_finish',
  'provenance',
  'compensation',
  'alias',
] as const;
export type AuditType = (typeof AUDIT_TYPES)[number];

/** Attributes an audit item may change after it was written (read views), excluded from its hash. */
export const VIEW_FIELDS: Record<AuditType, readonly string[]> = {
  transition: [],
  approval: [],
  execution: ['status', 'exit_code', 'signal', 'finished_at', 'outputs', 'archive_objects'],
  execution_output: [],
  execution_finish: [],
  provenance: [],
  compensation: ['state', 'GSI1PK', 'GSI1SK', 'updated_at'],
  alias: [],
};
/** Upload reservations on execution items (`reserved:{name}`) are views too. */
export const RESERVATION_PREFIX = 'reserved:';

export function isAuditType(t: unknown): t is AuditType {
  return typeof t === 'string' && (AUDIT_TYPES as readonly string[]).includes(t);
}

/**
 * Set by a key migration on an entry it moved: the SK the entry was written (and hashed) under
 * (docs/audit-format.md §2, "Moved entries"). The hash is computed with `SK` = `moved_from_sk` and
 * without `moved_from_sk`, but only when the current SK is exactly the registered new key of that old
 * one (`movedExecutionSk`); otherwise the item is hashed as stored, so a moved entry whose key was
 * changed again fails verification.
 */
export { MOVED_FROM_SK };

export function hashedPart(item: Record<string, unknown>): Record<string, unknown> {
  const type = item.type;
  const copy: Record<string, unknown> = {};
  const view = isAuditType(type) ? VIEW_FIELDS[type] : [];
  for (const [k, v] of Object.entries(item)) {
    if (k === 'hash' || view.includes(k) || k.startsWith(RESERVATION_PREFIX)) continue;
    copy[k] = v;
  }
  const from = item[MOVED_FROM_SK];
  if (typeof from === 'string' && movedExecutionSk(from) === item.SK) {
    copy.SK = from;
    delete copy[MOVED_FROM_SK];
  }
  return copy;
}

export function auditHash(item: Record<string, unknown>): Digest {
  return canonicalDigest(hashedPart(item));
}
