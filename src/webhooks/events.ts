/**
 * What an endpoint receives for one outbox record: a Standard Webhooks payload `{type, timestamp,
 * data}` whose data is the event's identity (event id, artifact, version, run, step…), who acted, and
 * links to the API resources. Built from an allowlist of the audit entry's identity fields: never
 * content bytes, reasons, comments, evidence or secrets.
 */
import { readAuditEntry } from '../audit/entry.ts';
import type { Item } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import type { ClaimedRecord } from '../telemetry/queue.ts';

export interface WebhookEvent {
  /** The outbox record id (`{artifact_id}:{seq}` for a chain entry): the `webhook-id` receivers dedupe by. */
  id: string;
  type: string;
  /** When the event happened (the audit entry's time). */
  timestamp: string;
  /** The JSON body, signed as is. */
  body: string;
}

interface AuditRecordPayload {
  aggregate_id: string;
  event_id: string;
  timestamp: string;
  type: string;
}

/** Entry fields copied into `data` (identity and outcome only), renamed where the entry's name is vague. */
const DATA_FIELDS: Record<string, string> = {
  version: 'version',
  from: 'from',
  to: 'to',
  decision: 'decision',
  content_hash: 'content_hash',
  expires_at: 'expires_at',
  run_id: 'run_id',
  status: 'status',
  exit_code: 'exit_code',
  step: 'step',
  alias: 'alias',
  action: 'action',
  previous_version: 'previous_version',
  comp_artifact_id: 'compensation_artifact_id',
  compensation_artifact_id: 'compensation_artifact_id',
};
const ACTOR_FIELDS = ['actor', 'started_by', 'uploaded_by', 'finished_by', 'created_by'];

const CHAIN_TYPES: Record<string, (entry: Item) => string> = {
  transition: (e) => (e.from === null || e.from === undefined ? 'version.created' : `version.${String(e.to).toLowerCase()}`),
  approval: () => 'approval.recorded',
  execution: () => 'execution.started',
  execution_output: () => 'execution.output_uploaded',
  execution_finish: () => 'execution.finished',
  provenance: () => 'provenance.added',
  compensation: () => 'compensation.created',
  alias: (e) => `alias.${String(e.action)}`,
};

function isAuditPayload(p: unknown): p is AuditRecordPayload {
  const o = p as Record<string, unknown> | null;
  return (
    typeof o?.event_id === 'string' && typeof o.type === 'string' && typeof o.aggregate_id === 'string' && typeof o.timestamp === 'string'
  );
}

function entryData(entry: Item): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  for (const [from, to] of Object.entries(DATA_FIELDS)) if (entry[from] !== undefined) data[to] = entry[from];
  if (entry.type === 'execution_output' && typeof entry.name === 'string') data.output = entry.name;
  const actor = ACTOR_FIELDS.map((f) => entry[f] as { id?: unknown; kind?: unknown } | undefined).find((a) => typeof a?.id === 'string');
  if (actor) data.actor = { id: actor.id, kind: actor.kind };
  return data;
}

function links(base: string, artifactId: string, data: Record<string, unknown>): Record<string, string> {
  const artifact = `${base}/v1/artifacts/${encodeURIComponent(artifactId)}`;
  const out: Record<string, string> = { artifact, history: `${artifact}/history` };
  if (typeof data.version === 'number') out.version = `${artifact}/versions/${data.version}`;
  if (typeof data.run_id === 'string') out.run = `${base}/v1/executions/${encodeURIComponent(data.run_id)}`;
  if (typeof data.compensation_artifact_id === 'string')
    out.compensation_artifact = `${base}/v1/artifacts/${encodeURIComponent(data.compensation_artifact_id)}`;
  return out;
}

function message(id: string, type: string, timestamp: string, data: Record<string, unknown>): WebhookEvent {
  return { id, type, timestamp, body: JSON.stringify({ type, timestamp, data }) };
}

/** An installation event (not a chain entry): a pin change or a retired backup. */
function installationEvent(p: AuditRecordPayload): WebhookEvent | undefined {
  const base = { event_id: p.event_id, timestamp: p.timestamp };
  if ((p.type === 'pin_added' || p.type === 'pin_removed') && p.aggregate_id.startsWith('pin:'))
    return message(p.event_id, p.type.replace('_', '.'), p.timestamp, { ...base, digest: `sha256:${p.aggregate_id.slice(4)}` });
  if (p.type === 'backup_retired' && p.aggregate_id.startsWith('backup:'))
    return message(p.event_id, 'backup.retired', p.timestamp, { ...base, backup_id: p.aggregate_id.slice(7) });
  return undefined;
}

/**
 * The webhook message of an outbox record, or undefined for a record that is no webhook event (a
 * trusted host's custom record, an unknown type, an entry that no longer exists). `apiBase` prefixes
 * the links (`ALP_PUBLIC_URL` or the server's URL; '' gives root-relative paths).
 */
export async function webhookEventOf(ctx: ServiceContext, record: ClaimedRecord, apiBase: string): Promise<WebhookEvent | undefined> {
  if (record.kind !== 'audit' || !isAuditPayload(record.payload)) return undefined;
  const p = record.payload;
  const typeOf = CHAIN_TYPES[p.type];
  if (!typeOf) return installationEvent(p);
  const seq = Number(p.event_id.slice(p.event_id.lastIndexOf(':') + 1));
  const entry = await readAuditEntry(ctx, p.aggregate_id, seq, p.type, p.timestamp);
  if (!entry) return undefined;
  const data = { event_id: p.event_id, artifact_id: p.aggregate_id, seq, ...entryData(entry) };
  return message(p.event_id, typeOf(entry), p.timestamp, { ...data, links: links(apiBase, p.aggregate_id, data) });
}
