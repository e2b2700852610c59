/**
 * Search (issue 20 item 6): artifacts by name prefix, label key=value (several: all must match) and
 * state, paged with one opaque cursor. Two sources, both GSI1 listings (eventually consistent on
 * DynamoDB, never used for rules; docs/design.md "Aliases and search"):
 *
 * - with `state`: the state index `STATE#{state}{s}` (every index shard, merged newest first). A hit is
 *   a version in that state; the name prefix is checked on the version item, labels on its HEAD (read
 *   by key only when labels are asked for).
 * - without: the search index `NAMES{s}` (one `search_entry` per artifact, ARTNAME#{id} / SEARCH,
 *   written once at creation — core/search-entry.ts — and for older artifacts by the backfill,
 *   system/migrations/search-entries.ts; GSI1SK `#{name}#{created_at}#{id}`), merged in name order; a name
 *   prefix is a `begins_with` on the sort key of every shard, labels are checked on the entry.
 *
 * A filter the index cannot apply (labels; a name prefix with a state) is applied to what the index
 * reads: a page reads at most MAX_SCANNED_PER_PAGE index items and may come back with fewer hits than
 * asked and a cursor (`scanned` says how many were read). Nothing scans the base table.
 */
import { createHash } from 'node:crypto';
import { InvalidInput } from '../core/errors.ts';
import { artifactPk, HEAD_SK, indexPartitions, searchGsiPk, searchGsiSkPrefix, stateGsiPk } from '../core/keys.ts';
import type { HeadItem } from '../core/model.ts';
import type { Item } from '../store/item-store.ts';
import { getListed, queryMerged } from '../store/merge-query.ts';
import type { ServiceContext } from '../system/context.ts';
import { isVersionState, VERSION_STATES, type VersionState } from './state-machine.ts';
import { validateLabels, validateText } from './validation.ts';

/** Index items one page reads at most (the cost bound of a filtered page). */
export const MAX_SCANNED_PER_PAGE = 1000;
/** Index items read per round; a cursor resumes inside a round by skipping what was consumed. */
const ROUND = 100;

export interface SearchInput {
  namePrefix?: string | undefined;
  /** Every label must match (key=value). */
  labels?: Record<string, string> | undefined;
  state?: string | undefined;
  limit?: number | undefined;
  cursor?: string | undefined;
}

/** One hit: an artifact (no state asked), or one of its versions in the state asked for. */
export interface SearchHit {
  artifact_id: string;
  name: string;
  kind: string;
  created_at: string;
  labels?: Record<string, string>;
  version?: number;
  state?: string;
}

export interface SearchPage {
  items: SearchHit[];
  cursor?: string;
  /** Index items read for this page. */
  scanned: number;
}

interface Query {
  namePrefix: string | undefined;
  labels: Record<string, string>;
  state: VersionState | undefined;
  limit: number;
}

export async function searchArtifacts(ctx: ServiceContext, input: SearchInput): Promise<SearchPage> {
  const q = parseQuery(input);
  const fingerprint = fingerprintOf(q);
  let { inner, skip } = decodeCursor(input.cursor, fingerprint);
  const items: SearchHit[] = [];
  let scanned = 0;
  for (;;) {
    const page = await readRound(ctx, q, inner);
    const round = page.items;
    const hits = await hitsOf(ctx, q, round);
    for (let i = skip; i < round.length; i++) {
      scanned++;
      const hit = hits[i];
      if (hit) items.push(hit);
      if (items.length === q.limit || scanned >= MAX_SCANNED_PER_PAGE) {
        const rest = i + 1 < round.length || page.cursor !== undefined;
        return {
          items,
          scanned,
          ...(rest
            ? { cursor: encodeCursor(fingerprint, i + 1 < round.length ? inner : page.cursor, i + 1 < round.length ? i + 1 : 0) }
            : {}),
        };
      }
    }
    if (!page.cursor) return { items, scanned };
    inner = page.cursor;
    skip = 0;
  }
}

function parseQuery(input: SearchInput): Query {
  const limit = input.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidInput('limit must be 1–1000');
  const namePrefix = input.namePrefix === undefined ? undefined : validateText('name_prefix', input.namePrefix, { max: 200 });
  const labels = validateLabels(input.labels ?? {});
  let state: VersionState | undefined;
  if (input.state !== undefined) {
    const up = input.state.toUpperCase();
    if (!isVersionState(up)) throw new InvalidInput(`unknown state ${JSON.stringify(input.state)}; one of ${VERSION_STATES.join(', ')}`);
    state = up;
  }
  return { namePrefix, labels, state, limit };
}

/** One round of the index the query reads: the state index, or the search index (by name prefix). */
function readRound(ctx: ServiceContext, q: Query, cursor: string | undefined) {
  const shards = ctx.layout.index_shards;
  if (q.state)
    return queryMerged(ctx.items, {
      index: 'GSI1',
      pks: indexPartitions(stateGsiPk(q.state), shards),
      descending: true,
      limit: ROUND,
      ...(cursor ? { cursor } : {}),
    });
  return queryMerged(ctx.items, {
    index: 'GSI1',
    pks: indexPartitions(searchGsiPk(), shards),
    ...(q.namePrefix ? { sk: { beginsWith: searchGsiSkPrefix(q.namePrefix) } } : {}),
    limit: ROUND,
    ...(cursor ? { cursor } : {}),
  });
}

/** The hit each index item is, or undefined where a filter refuses it (same positions as `round`). */
async function hitsOf(ctx: ServiceContext, q: Query, round: Item[]): Promise<Array<SearchHit | undefined>> {
  const wantsLabels = Object.keys(q.labels).length > 0;
  if (!q.state) return round.map((e) => (labelsMatch(e.labels, q.labels) ? entryHit(e) : undefined));
  const named = round.filter((v) => q.namePrefix === undefined || String(v.name).startsWith(q.namePrefix));
  const heads = wantsLabels ? await headsOf(ctx, named) : new Map<string, HeadItem>();
  return round.map((v) => {
    if (!named.includes(v)) return undefined;
    const head = heads.get(v.artifact_id as string);
    if (wantsLabels && !(head && labelsMatch(head.labels, q.labels))) return undefined;
    return versionHit(v, head);
  });
}

async function headsOf(ctx: ServiceContext, versions: Item[]): Promise<Map<string, HeadItem>> {
  const ids = [...new Set(versions.map((v) => v.artifact_id as string))];
  const found = await getListed(
    ctx.items,
    ids.map((id) => ({ PK: artifactPk(id), SK: HEAD_SK })),
  );
  return new Map(found.flatMap((h) => (h ? [[h.artifact_id as string, h as HeadItem] as const] : [])));
}

function labelsMatch(labels: unknown, wanted: Record<string, string>): boolean {
  const have = (labels ?? {}) as Record<string, unknown>;
  return Object.entries(wanted).every(([k, v]) => have[k] === v);
}

function entryHit(e: Item): SearchHit {
  return {
    artifact_id: e.artifact_id as string,
    name: e.name as string,
    kind: e.kind as string,
    created_at: e.created_at as string,
    labels: (e.labels ?? {}) as Record<string, string>,
  };
}

function versionHit(v: Item, head: HeadItem | undefined): SearchHit {
  return {
    artifact_id: v.artifact_id as string,
    name: v.name as string,
    kind: v.kind as string,
    created_at: v.created_at as string,
    ...(head ? { labels: head.labels } : {}),
    version: v.version as number,
    state: v.state as string,
  };
}

function fingerprintOf(q: Query): string {
  const text = JSON.stringify([q.state ?? null, q.namePrefix ?? null, Object.entries(q.labels).sort()]);
  return createHash('sha256').update(text).digest('base64url').slice(0, 16);
}

function encodeCursor(fingerprint: string, inner: string | undefined, skip: number): string {
  return Buffer.from(JSON.stringify({ q: fingerprint, c: inner ?? null, k: skip })).toString('base64url');
}

function decodeCursor(cursor: string | undefined, fingerprint: string): { inner: string | undefined; skip: number } {
  if (!cursor) return { inner: undefined, skip: 0 };
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { q: unknown; c: unknown; k: unknown };
    if (v.q !== fingerprint) throw new Error('another query');
    if (v.c !== null && typeof v.c !== 'string') throw new Error('inner');
    if (typeof v.k !== 'number' || !Number.isInteger(v.k) || v.k < 0 || v.k >= ROUND) throw new Error('skip');
    return { inner: v.c ?? undefined, skip: v.k };
  } catch {
    throw new InvalidInput('invalid cursor (a cursor continues the search that returned it)');
  }
}
