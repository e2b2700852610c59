/**
 * Aliases as the chain records them (issue 20 item 6): every set, move and removal of an alias is an
 * `alias` audit entry, and the HEAD's `aliases` map is what replaying those entries in sequence gives.
 * Lives beside the chain (not in lifecycle/aliases.ts, which writes them) so `audit verify` can
 * replay it without importing the lifecycle.
 */
import type { Principal } from '../core/model.ts';
import type { Item } from '../store/item-store.ts';

/** One alias on the HEAD: the version it names, that version's content hash, who set it, and the entry that did (its seq). */
export interface AliasRecord {
  version: number;
  content_hash: string;
  set_by: Principal;
  seq: number;
}

export type AliasMap = Record<string, AliasRecord>;

/** The HEAD's aliases (none on an artifact that never had one). */
export function aliasesOf(head: { readonly [k: string]: unknown }): AliasMap {
  const a = head.aliases;
  return a && typeof a === 'object' && !Array.isArray(a) ? (a as AliasMap) : {};
}

/** The record an `alias` entry that sets an alias puts on the HEAD. */
export function aliasRecordOf(entry: Item): AliasRecord {
  return {
    version: entry.version as number,
    content_hash: entry.content_hash as string,
    set_by: entry.actor as Principal,
    seq: entry.seq as number,
  };
}

/** The aliases the chain's `alias` entries leave, replayed in sequence order. */
export function replayAliases(entries: readonly Item[]): AliasMap {
  const out: AliasMap = {};
  for (const e of entries) {
    if (e.type !== 'alias') continue;
    const name = e.alias as string;
    if (e.action === 'removed') delete out[name];
    else out[name] = aliasRecordOf(e);
  }
  return out;
}

/** Where the HEAD's aliases differ from the chain's (each alias named once). */
export function aliasDifferences(head: { readonly [k: string]: unknown }, entries: readonly Item[]): string[] {
  const onHead = aliasesOf(head);
  const chained = replayAliases(entries);
  const names = [...new Set([...Object.keys(onHead), ...Object.keys(chained)])].sort();
  const out: string[] = [];
  for (const name of names) {
    const h = onHead[name];
    const c = chained[name];
    if (!c) out.push(`alias @${name} is on the HEAD but no alias entry sets it`);
    else if (!h) out.push(`alias @${name} (v${c.version}) was set by the chain but is missing from the HEAD`);
    else if (!sameRecord(h, c)) out.push(`alias @${name} on the HEAD (v${String(h.version)}) differs from the chain (v${c.version})`);
  }
  return out;
}

function sameRecord(a: AliasRecord, b: AliasRecord): boolean {
  return (
    a.version === b.version &&
    a.content_hash === b.content_hash &&
    a.seq === b.seq &&
    a.set_by?.id === b.set_by.id &&
    a.set_by?.kind === b.set_by.kind
  );
}

/**
 * Alias entries that name what the chain does not hold: a version no creation entry records before
 * it, or a content hash other than that version's.
 */
export function aliasEntryProblems(entries: readonly Item[]): Array<{ entry: Item; problem: string }> {
  const created = new Map<unknown, unknown>();
  const out: Array<{ entry: Item; problem: string }> = [];
  for (const e of entries) {
    if (e.type === 'transition' && e.from === null) created.set(e.version, e.content_hash);
    if (e.type !== 'alias' || e.action === 'removed') continue;
    if (!created.has(e.version))
      out.push({ entry: e, problem: `alias @${String(e.alias)} names v${String(e.version)}, which the chain never created` });
    else if (created.get(e.version) !== e.content_hash)
      out.push({ entry: e, problem: `alias @${String(e.alias)} binds a content hash other than v${String(e.version)}'s` });
  }
  return out;
}
