/**
 * The item shapes shared by the audit chain and the lifecycle (and the entry points): principals and
 * the artifact HEAD. They sit below both services so neither imports the other for a type; the
 * lifecycle's own item shapes are in lifecycle/model.ts.
 */
import type { Digest } from './digest.ts';

export const PRINCIPAL_KINDS = ['human', 'agent', 'service'] as const;
export type PrincipalKind = (typeof PRINCIPAL_KINDS)[number];

export interface Principal {
  id: string;
  kind: PrincipalKind;
}

export interface HeadItem {
  PK: string;
  SK: 'HEAD';
  /** NAME#{name} on HEADs written before issue 16 only; newer ones have no GSI1 keys (the NAME item has them). */
  GSI1PK?: string;
  GSI1SK?: string;
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
