/**
 * The chains whose entries are leaves of the transparency log (issue 20 item 1: every audit entry):
 * every artifact's audit chain (chain id = the artifact id, partition `ART#{id}`, head `HEAD` with
 * `audit_seq`) and the installation's hash-chained logs (audit/chained-log.ts: the key, token, webhook
 * and approval-policy logs; chain id = their partition, head `LOG_HEAD` with `seq`, entries `LOG#…`).
 * An artifact id is a 26-character ULID, so it is never one of these partition names.
 */
import {
  APPROVAL_POLICY_LOG_HEAD_SK,
  APPROVAL_POLICY_LOG_SK_PREFIX,
  APPROVAL_POLICY_PK,
  artifactPk,
  HEAD_SK,
  KEY_LOG_HEAD_SK,
  KEY_LOG_SK_PREFIX,
  KEYS_PK,
  TOKEN_LOG_HEAD_SK,
  TOKEN_LOG_SK_PREFIX,
  TOKENS_PK,
  WEBHOOK_LOG_HEAD_SK,
  WEBHOOK_LOG_SK_PREFIX,
  WEBHOOKS_PK,
} from '../../core/keys.ts';
import type { Item } from '../../store/item-store.ts';

export interface ChainRef {
  id: string;
  pk: string;
  headSk: string;
  /** The head's attribute that holds the chain's last seq. */
  seqAttr: 'audit_seq' | 'seq';
  /** An installation log's entries' sort-key prefix; undefined for an artifact chain (audit/history.ts loadChain reads those). */
  entryPrefix?: string;
  installation: boolean;
}

/** The installation logs' partitions, their heads and their entries' prefix. */
const INSTALLATION_LOGS: ReadonlyMap<string, { headSk: string; entryPrefix: string }> = new Map([
  [KEYS_PK, { headSk: KEY_LOG_HEAD_SK, entryPrefix: KEY_LOG_SK_PREFIX }],
  [TOKENS_PK, { headSk: TOKEN_LOG_HEAD_SK, entryPrefix: TOKEN_LOG_SK_PREFIX }],
  [WEBHOOKS_PK, { headSk: WEBHOOK_LOG_HEAD_SK, entryPrefix: WEBHOOK_LOG_SK_PREFIX }],
  [APPROVAL_POLICY_PK, { headSk: APPROVAL_POLICY_LOG_HEAD_SK, entryPrefix: APPROVAL_POLICY_LOG_SK_PREFIX }],
]);

export function chainRef(id: string): ChainRef {
  const log = INSTALLATION_LOGS.get(id);
  if (log) return { id, pk: id, ...log, seqAttr: 'seq', installation: true };
  return { id, pk: artifactPk(id), headSk: HEAD_SK, seqAttr: 'audit_seq', installation: false };
}

/**
 * The chain id of an installation log named on the command line (`keys`, `tokens`, `webhooks`,
 * `approval-policy`, or its partition in any case); undefined for any other name.
 */
export function installationLogNamed(name: string): string | undefined {
  const id = name.toUpperCase().replace(/-/g, '_');
  return INSTALLATION_LOGS.has(id) ? id : undefined;
}

/** The installation logs' chain ids. */
export const installationLogIds = (): string[] => [...INSTALLATION_LOGS.keys()];

/** The chain an item heads, with its last seq; undefined for any other item. */
export function chainOfHead(item: Item | undefined): { ref: ChainRef; seq: number } | undefined {
  if (!item) return undefined;
  if (item.type === 'head' && item.SK === HEAD_SK && typeof item.artifact_id === 'string') {
    const ref = chainRef(item.artifact_id);
    return ref.installation ? undefined : { ref, seq: typeof item.audit_seq === 'number' ? item.audit_seq : 0 };
  }
  if (INSTALLATION_LOGS.get(item.PK)?.headSk === item.SK)
    return { ref: chainRef(item.PK), seq: typeof item.seq === 'number' ? item.seq : 0 };
  return undefined;
}
