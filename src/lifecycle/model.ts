/**
 * The shapes of the items the lifecycle writes (docs/data-model.md). Items are plain attribute maps in the
 * store; these types name their attributes.
 */
import type { Digest } from '../core/digest.ts';
import type { Principal } from '../core/model.ts';
import type { VersionState } from './state-machine.ts';

export { type ArchivedObject, type HeadItem, PRINCIPAL_KINDS, type Principal, type PrincipalKind } from '../core/model.ts';

/** A POSIX signal name as Node reports it (`SIGTERM`, `SIGRTMIN`…): what a run ended by a signal records. */
export const SIGNAL_NAME_PATTERN = '^SIG[A-Z0-9+]{1,12}$';

/** An alias name (lifecycle/aliases.ts): lowercase only, a letter first, 1–32 characters. */
export const ALIAS_NAME_PATTERN = '^[a-z][a-z0-9_-]{0,31}$';
/** Where a version is named: its number, or `@` and an alias name. */
export const ALIAS_REF_PATTERN = '^@[a-z][a-z0-9_-]{0,31}$';

export interface VersionItem {
  PK: string;
  SK: string;
  GSI1PK: string;
  GSI1SK: string;
  type: 'version';
  artifact_id: string;
  version: number;
  state: VersionState;
  name: string;
  kind: string;
  filename: string;
  content_key: string;
  content_hash: Digest;
  size: number;
  metadata_key: string;
  metadata_hash: Digest;
  created_at: string;
  created_by: Principal;
  state_changed_at: string;
  row_version: number;
  /** Incremented each time the version enters PROPOSED; approvals count only for the current round. */
  proposal_round: number;
  /** Who proposed the current round (absent on versions proposed before issue 20 item 4): the self-approval rule. */
  proposed_by?: Principal;
  /** The state a COMPENSATING version returns to if its compensation fails. */
  compensating_from?: VersionState;
  [k: string]: unknown;
}

export function isVersionItem(item: Record<string, unknown>): item is VersionItem {
  return item.type === 'version';
}
