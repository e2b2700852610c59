/**
 * The artifacts view's search, as the server runs it (`GET /v1/search`: name prefix, labels key=value —
 * every one must match — and state; paged with an opaque cursor; docs/design.md "Aliases and search").
 * The query lives in the page's URL (`/artifacts?prefix=…&label=k=v&label=…&state=…`) so a search can
 * be shared or bookmarked; these functions map the URL to the query, the query to the URL and to the
 * API request, and the search form's label text to labels. Pure: tested in test/web/search.test.ts.
 */
import type { Static } from '@sinclair/typebox';
import type * as S from '../../../api/schemas.ts';
import { VERSION_STATES } from '../../../lifecycle/states.ts';

export type SearchPage = Static<typeof S.SearchPage>;
export type SearchHit = SearchPage['items'][number];

export interface SearchQuery {
  /** Case-sensitive start of the name; '' for any. */
  prefix: string;
  /** key=value pairs, every one must match; in the order given. */
  labels: Array<[string, string]>;
  /** A version state (hits are versions in it), or undefined (hits are artifacts). */
  state: string | undefined;
}

/** A label key (the server's rule, lifecycle/validation.ts); a separator is a comma before one and `=`. */
const KEY = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$/;
const SEPARATOR = /,\s*(?=[A-Za-z0-9][A-Za-z0-9._/-]{0,62}=)/;

/** One `key=value` taken exactly (as the API does); undefined when the text has no `=` after a key. */
export function parseLabel(text: string): [string, string] | undefined {
  const eq = text.indexOf('=');
  if (eq <= 0) return undefined;
  const key = text.slice(0, eq);
  return KEY.test(key) ? [key, text.slice(eq + 1)] : undefined;
}

/**
 * The search form's label text: `key=value`, several separated by commas (`team=data, risk=high`). A
 * value may hold a comma unless what follows it looks like another `key=`. Unreadable parts are returned
 * as `invalid` (the server matches exact values only: a bare key is not a label search).
 */
export function parseLabelsText(text: string): { labels: Array<[string, string]>; invalid: string[] } {
  const labels: Array<[string, string]> = [];
  const invalid: string[] = [];
  for (const part of text.trim() === '' ? [] : text.split(SEPARATOR)) {
    const eq = part.indexOf('=');
    const label = eq > 0 ? parseLabel(`${part.slice(0, eq).trim()}=${part.slice(eq + 1).trim()}`) : undefined;
    if (label) labels.push(label);
    else invalid.push(part.trim());
  }
  return { labels, invalid };
}

export function labelsText(labels: ReadonlyArray<readonly [string, string]>): string {
  return labels.map(([k, v]) => `${k}=${v}`).join(', ');
}

/**
 * The search a URL holds, or undefined when it holds none (no prefix, no label: the view lists by
 * state or exact name instead). Labels that are not key=value are returned as `invalid`.
 */
export function searchOf(query: URLSearchParams): (SearchQuery & { invalid: string[] }) | undefined {
  const prefix = query.get('prefix') ?? '';
  const raw = query.getAll('label').filter((l) => l.trim() !== '');
  if (prefix === '' && raw.length === 0) return undefined;
  const labels: Array<[string, string]> = [];
  const invalid: string[] = [];
  for (const text of raw) {
    const label = parseLabel(text);
    if (label) labels.push(label);
    else invalid.push(text);
  }
  const state = (query.get('state') ?? '').toUpperCase();
  return { prefix, labels, state: (VERSION_STATES as readonly string[]).includes(state) ? state : undefined, invalid };
}

/** The view's URL for a search (the inverse of searchOf). */
export function searchHref(q: SearchQuery): string {
  const params = new URLSearchParams();
  if (q.prefix) params.set('prefix', q.prefix);
  for (const [k, v] of q.labels) params.append('label', `${k}=${v}`);
  if (q.state) params.set('state', q.state);
  const qs = params.toString();
  return qs ? `/artifacts?${qs}` : '/artifacts';
}

/** The API request for one page of a search. */
export function searchApiPath(q: SearchQuery, limit: number, cursor?: string): string {
  const params = new URLSearchParams();
  if (q.prefix) params.set('name_prefix', q.prefix);
  for (const [k, v] of q.labels) params.append('label', `${k}=${v}`);
  if (q.state) params.set('state', q.state);
  params.set('limit', String(limit));
  if (cursor) params.set('cursor', cursor);
  return `/v1/search?${params}`;
}

/** The heading of a search. */
export function searchTitle(q: SearchQuery): string {
  const where = q.state ? `${q.state.charAt(0)}${q.state.slice(1).toLowerCase()} versions` : 'Artifacts';
  const parts = [q.prefix ? `named “${q.prefix}…”` : '', q.labels.length ? `labelled ${labelsText(q.labels)}` : ''].filter(Boolean);
  return `${where} ${parts.join(' and ')}`;
}
