/**
 * Which objects the metadata names: the single answer to "what must exist, with which digest" used by
 * verify, backup manifests, reconciliation and retention. Reads the base table only.
 */
import type { Digest } from '../core/digest.ts';
import { artifactPk } from '../core/keys.ts';
import { type Item, type ItemStore, queryAll } from '../store/item-store.ts';

export interface ObjectRef {
  key: string;
  digest: Digest;
  size?: number;
  /** Which item names it, for reports: "ART#id V#0000000001 content". */
  source: string;
  /**
   * Named only because retention keeps it in logical quarantine (seed 004: quarantined bytes stay
   * readable and in ordinary backups). Not a reference: it may be purged later, so its absence is not
   * a finding and it never protects itself from retention.
   */
  retained?: true;
  /**
   * An original whose verified archive copy the same item records (archive_objects): the copy is the
   * reference now (issue 17 B13), so retention may reclaim the original through its protocol and reads
   * fall back to the copy (archived-read.ts). Still listed so that consumers that want the original
   * while it exists (a backup reading a cold copy's bytes) can; its absence is not a finding.
   */
  superseded?: true;
  /** For an archive copy: the key of the original it was copied from. */
  original?: string;
}

/** An original object an archive copy replaces: the copy's key and the one digest both hold. */
export interface ArchivedOriginal {
  original: string;
  copy: string;
  digest: string;
}

/**
 * The originals an item's verified archive copies replace (version and execution items with
 * `archive_objects`, written only once the copy was made and verified: lifecycle/archive.ts).
 */
export function archivedOriginals(item: Item): ArchivedOriginal[] {
  if (item.type !== 'version' && item.type !== 'execution') return [];
  const out: ArchivedOriginal[] = [];
  for (const a of (item.archive_objects as Array<Record<string, unknown>> | undefined) ?? []) {
    if (typeof a.original_key === 'string' && typeof a.archive_key === 'string' && typeof a.digest === 'string')
      out.push({ original: a.original_key, copy: a.archive_key, digest: a.digest });
  }
  return out;
}

/** The object references one item names (any type); unknown item types name none. */
export function refsOfItem(item: Item): ObjectRef[] {
  const where = `${item.PK} ${item.SK}`;
  const refs: ObjectRef[] = [];
  const copies = archivedOriginals(item);
  const add = (key: unknown, digest: unknown, size: unknown, what: string, original?: unknown) => {
    if (typeof key === 'string' && typeof digest === 'string') {
      refs.push({
        key,
        digest: digest as Digest,
        ...(typeof size === 'number' ? { size } : {}),
        source: `${where} ${what}`,
        ...(copies.some((c) => c.original === key && c.digest === digest) ? { superseded: true as const } : {}),
        ...(typeof original === 'string' ? { original } : {}),
      });
    }
  };
  switch (item.type) {
    case 'version':
      add(item.content_key, item.content_hash, item.size, 'content');
      add(item.metadata_key, item.metadata_hash, undefined, 'metadata');
      for (const a of (item.archive_objects as Array<Record<string, unknown>> | undefined) ?? [])
        add(a.archive_key, a.digest, a.size, 'archive copy', a.original_key);
      break;
    case 'execution':
      for (const [name, o] of Object.entries((item.outputs as Record<string, Record<string, unknown>> | undefined) ?? {})) {
        add(o.key, o.digest, o.size, `output ${name}`);
      }
      for (const a of (item.archive_objects as Array<Record<string, unknown>> | undefined) ?? [])
        add(a.archive_key, a.digest, a.size, 'archive copy', a.original_key);
      break;
    case 'execution_output':
      add(item.key, item.digest, item.size, `output ${String(item.name)}`);
      break;
    case 'retention_observation':
      if (item.state === 'QUARANTINED' && typeof item.key === 'string' && typeof item.digest === 'string') {
        refs.push({
          key: item.key,
          digest: item.digest as Digest,
          ...(typeof item.size === 'number' ? { size: item.size } : {}),
          source: `${where} quarantine`,
          retained: true,
        });
      }
      break;
    case 'head':
      add(item.provenance_key, item.provenance_hash, undefined, 'provenance document');
      break;
    case 'history_segment':
      // A packed audit history segment (src/audit/compaction.ts): an immutable digest file whose
      // contents (the packed audit items) name further digests.
      add(item.key, item.digest, item.size, `history segment ${String(item.first_seq)}–${String(item.last_seq)}`);
      break;
  }
  return refs;
}

export async function refsOfArtifact(store: ItemStore, artifactId: string): Promise<ObjectRef[]> {
  const items = await queryAll(store, { pk: artifactPk(artifactId), consistent: true });
  return dedupeRefs(items.flatMap(refsOfItem));
}

/** One entry per key; the first source wins (the same key named twice must carry the same digest). */
export function dedupeRefs(refs: ObjectRef[]): ObjectRef[] {
  const seen = new Map<string, ObjectRef>();
  for (const r of refs) if (!seen.has(r.key)) seen.set(r.key, r);
  return [...seen.values()];
}
