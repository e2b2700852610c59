/**
 * The shapes of the items the lifecycle writes (DESIGN §3). Items are plain attribute maps in the
 * store; these types name their attributes.
 */
import type { Digest } from '../core/digest.ts';
import type { VersionState } from './state-machine.ts';

export const PRINCIPAL_KINDS = ['human', 'agent', 'service'] as const;
export type PrincipalKind = (typeof PRINCIPAL_KINDS)[number];

export interface Principal {
  id: string;
  kind: PrincipalKind;
}

export interface HeadItem {
  PK: string;
  SK: 'HEAD';
  GSI1PK: string;
  GSI1SK: string;
  type: 'head';
  artifact_id: string;
  name: string;
  kind: string;
  labels: Record<string, string>;
  quorum: number;
  latest_version: number;
  audit_seq: number;
  audit_head_hash: Digest | null;
  created_at: string;
  created_by: Principal;
  /** Set on compensation artifacts: what they compensate. */
  compensates?: { artifact_id: string; version: number };
  archived?: { at: string; objects: ArchivedObject[] };
  [k: string]: unknown;
}

export interface ArchivedObject {
  original_key: string;
  archive_key: string;
  digest: Digest;
  size: number;
}

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
  /** The state a COMPENSATING version returns to if its compensation fails. */
  compensating_from?: VersionState;
  [k: string]: unknown;
}

export function isVersionItem(item: Record<string, unknown>): item is VersionItem {
  return item.type === 'version';
}
