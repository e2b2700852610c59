/**
 * Artifacts by state, with the number of versions in each state; search by exact name (the API's
 * query), by name prefix and by label (matched in the page over the versions it has loaded: the API
 * lists by state or exact name only); cursor pagination (the API's opaque cursors, kept as a stack
 * so "Previous" works); sortable columns over the rows shown.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { type Artifact, api, type Page, STATES, type StateCounts, type Version } from '../api.ts';
import { ErrorBox, Loading, PageTitle, Time, useApi, Who } from '../components.tsx';
import { formatCount, plural } from '../lib/format.ts';
import { type LabelFilter, labelText, matchesLabel, matchesPrefix, parseLabelFilter } from '../lib/table.ts';
import { Link, navigate } from '../router.tsx';
import { Labels, useLabels } from './labels.tsx';
import { VersionTable } from './version-table.tsx';

export const PAGE_SIZE = 20;
/** Versions loaded per step when searching by prefix or label. */
export const SEARCH_PAGE = 200;

const label = (s: string) => s.charAt(0) + s.slice(1).toLowerCase();

interface Search {
  name: string;
  prefix: string;
  label: LabelFilter | undefined;
  state: string;
}

function searchOf(query: URLSearchParams): Search {
  const name = query.get('name') ?? '';
  const prefix = query.get('prefix') ?? '';
  const labelFilter = parseLabelFilter(query.get('label') ?? '');
  const filtering = Boolean(name || prefix || labelFilter);
  return { name, prefix, label: labelFilter, state: (query.get('state') ?? (filtering ? 'ALL' : 'PROPOSED')).toUpperCase() };
}

function titleOf(s: Search): string {
  if (s.name) return `Artifacts named “${s.name}”`;
  const where = s.state === 'ALL' ? 'Versions' : `${label(s.state)} versions`;
  if (s.prefix || s.label) {
    const parts = [s.prefix ? `named “${s.prefix}…”` : '', s.label ? `labelled ${labelText(s.label)}` : ''].filter(Boolean);
    return `${where} ${parts.join(' and ')}`;
  }
  return s.state === 'ALL' ? 'All versions' : where;
}

export function ArtifactsList({ query }: { query: URLSearchParams }) {
  const search = searchOf(query);
  const counts = useApi<StateCounts>('/v1/status/states');
  const filtering = Boolean(search.prefix || search.label);
  return (
    <section>
      <PageTitle title={titleOf(search)} />
      <SearchForm key={query.toString()} search={search} />
      <nav aria-label="Versions by state" class="state-tabs">
        <ul>
          <li>
            <Link href="/artifacts?state=ALL" aria-current={!search.name && !filtering && search.state === 'ALL' ? 'page' : undefined}>
              All <span class="count">{counts.data ? formatCount(counts.data.total) : '…'}</span>
            </Link>
          </li>
          {STATES.map((s) => (
            <li key={s}>
              <Link
                href={`/artifacts?state=${s}`}
                aria-current={!search.name && !filtering && search.state === s ? 'page' : undefined}
                class={`tab-${s.toLowerCase()}`}
              >
                {label(s)} <span class="count">{counts.data ? formatCount(counts.data.states[s] ?? 0) : '…'}</span>
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <ErrorBox error={counts.error} what="Counts" />
      {search.name ? (
        <ByName key={`n:${search.name}`} name={search.name} />
      ) : filtering ? (
        <Filtered key={query.toString()} search={search} />
      ) : (
        <ByState key={`s:${search.state}`} state={search.state} />
      )}
    </section>
  );
}

function SearchForm({ search }: { search: Search }) {
  const [name, setName] = useState(search.name || search.prefix);
  const [mode, setMode] = useState(search.prefix ? 'prefix' : 'exact');
  const [labelDraft, setLabelDraft] = useState(search.label ? labelText(search.label) : '');
  const active = Boolean(search.name || search.prefix || search.label);
  return (
    // biome-ignore lint/a11y/useSemanticElements: <search> is not in Preact's JSX types yet; the role says the same
    <form
      class="search"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        const params = new URLSearchParams();
        const n = name.trim();
        const l = labelDraft.trim();
        if (n && mode === 'exact' && !l) params.set('name', n);
        else if (n) params.set('prefix', n);
        if (l) params.set('label', l);
        const qs = params.toString();
        navigate(qs ? `/artifacts?${qs}` : '/artifacts');
      }}
    >
      <div class="search-fields">
        <div class="field">
          <label for="name-search">Artifact name</label>
          <input id="name-search" type="search" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        </div>
        <div class="field">
          <label for="name-mode">Match the name</label>
          <select id="name-mode" value={mode} onChange={(e) => setMode((e.target as HTMLSelectElement).value)}>
            <option value="exact">exactly</option>
            <option value="prefix">by its start (prefix)</option>
          </select>
        </div>
        <div class="field">
          <label for="label-search">Label</label>
          <input
            id="label-search"
            type="search"
            placeholder="key=value or key"
            aria-describedby="search-help"
            value={labelDraft}
            onInput={(e) => setLabelDraft((e.target as HTMLInputElement).value)}
          />
        </div>
        <div class="search-buttons">
          <button type="submit">Search</button>
          {active ? (
            <Link href="/artifacts" class="button-like">
              Clear
            </Link>
          ) : null}
        </div>
      </div>
      <p id="search-help" class="help">
        An exact name is looked up by the API. A name prefix or a label is matched here, over the versions loaded page by page (the API has
        no such query); names match case-sensitively.
      </p>
    </form>
  );
}

function usePages() {
  const [stack, setStack] = useState<string[]>([]);
  const cursor = stack[stack.length - 1];
  return {
    cursor,
    page: stack.length + 1,
    next: (c: string) => setStack((s) => [...s, c]),
    prev: () => setStack((s) => s.slice(0, -1)),
  };
}

function Pager({ page, hasNext, onPrev, onNext }: { page: number; hasNext: boolean; onPrev(): void; onNext(): void }) {
  if (page === 1 && !hasNext) return null;
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" onClick={onPrev} disabled={page === 1}>
        ← Previous page
      </button>
      <span aria-live="polite">Page {page}</span>
      <button type="button" onClick={onNext} disabled={!hasNext}>
        Next page →
      </button>
    </nav>
  );
}

/** One page of `/v1/artifacts` at a time (the API's cursors kept as a stack), rendered by `children`. */
function PagedArtifacts<T>(props: {
  query: Record<string, string>;
  loading: string;
  empty: ComponentChildren;
  children: (items: T[]) => ComponentChildren;
}) {
  const pages = usePages();
  const params = new URLSearchParams({ ...props.query, limit: String(PAGE_SIZE) });
  if (pages.cursor) params.set('cursor', pages.cursor);
  const list = useApi<Page<T>>(`/v1/artifacts?${params}`);
  if (list.error) return <ErrorBox error={list.error} />;
  if (!list.data) return <Loading what={props.loading} />;
  const { items, cursor } = list.data;
  return (
    <>
      {items.length === 0 ? props.empty : props.children(items)}
      <Pager page={pages.page} hasNext={Boolean(cursor)} onPrev={pages.prev} onNext={() => pages.next(cursor ?? '')} />
    </>
  );
}

function ByState({ state }: { state: string }) {
  return (
    <PagedArtifacts<Version>
      query={state === 'ALL' ? {} : { state }}
      loading="Loading versions"
      empty={<p class="empty">No versions {state === 'ALL' ? '' : `in state ${state}`}.</p>}
    >
      {(items) => <StatePage items={items} state={state} />}
    </PagedArtifacts>
  );
}

function StatePage({ items, state }: { items: Version[]; state: string }) {
  const labels = useLabels(items.map((v) => v.artifact_id));
  return <VersionTable items={items} labels={labels} caption={`Versions${state === 'ALL' ? '' : ` in state ${state}`}, newest first`} />;
}

function ByName({ name }: { name: string }) {
  return (
    <PagedArtifacts<Artifact>
      query={{ name }}
      loading="Searching"
      empty={<p class="empty">No artifact is named exactly “{name}”. Names are matched exactly, including case.</p>}
    >
      {(items) => (
        <table class="list responsive">
          <caption class="sr-only">Artifacts named {name}</caption>
          <thead>
            <tr>
              <th scope="col">Artifact</th>
              <th scope="col">Kind</th>
              <th scope="col">Latest version</th>
              <th scope="col">Labels</th>
              <th scope="col">Created by</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {items.map((a) => (
              <tr key={a.artifact_id}>
                <td data-label="Artifact">
                  <Link href={`/artifacts/${a.artifact_id}`} class="strong-link">
                    {a.name}
                  </Link>
                  <div class="muted small mono">{a.artifact_id}</div>
                </td>
                <td data-label="Kind">{a.kind}</td>
                <td data-label="Latest version">v{a.latest_version}</td>
                <td data-label="Labels">
                  <Labels labels={a.labels} />
                </td>
                <td data-label="Created by">
                  <Who p={a.created_by} />
                </td>
                <td data-label="Created">
                  <Time iso={a.created_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </PagedArtifacts>
  );
}

/**
 * Versions matching a name prefix and/or a label, matched here over the versions loaded so far (the
 * API lists by state or exact name only): SEARCH_PAGE versions at a time, more on request.
 */
function Filtered({ search }: { search: Search }) {
  const [loaded, setLoaded] = useState<{ items: Version[]; cursor: string | undefined; done: boolean }>({
    items: [],
    cursor: undefined,
    done: false,
  });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const more = async (cursor: string | undefined) => {
    setBusy(true);
    setError(undefined);
    try {
      const params = new URLSearchParams({ limit: String(SEARCH_PAGE) });
      if (search.state !== 'ALL') params.set('state', search.state);
      if (cursor) params.set('cursor', cursor);
      const page = await api<Page<Version>>(`/v1/artifacts?${params}`);
      setLoaded((l) => ({ items: [...l.items, ...page.items], cursor: page.cursor, done: !page.cursor }));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => {
    void more(undefined);
  }, []);
  const byPrefix = loaded.items.filter((v) => matchesPrefix(v.name, search.prefix));
  const labels = useLabels(byPrefix.map((v) => v.artifact_id));
  const waiting = search.label ? new Set(byPrefix.filter((v) => !labels.has(v.artifact_id)).map((v) => v.artifact_id)).size : 0;
  const matches = search.label ? byPrefix.filter((v) => matchesLabel(labels.get(v.artifact_id), search.label)) : byPrefix;
  return (
    <>
      <p class="muted" role="status" data-testid="filter-status">
        {plural(matches.length, 'version')} of the {formatCount(loaded.items.length)} loaded match
        {waiting > 0 ? ` (reading the labels of ${plural(waiting, 'artifact')}…)` : ''}
        {loaded.done ? ' — every version was searched.' : '.'}
      </p>
      <ErrorBox error={error} />
      {busy && loaded.items.length === 0 ? <Loading what="Searching" /> : null}
      {matches.length > 0 ? <VersionTable items={matches} labels={labels} caption={titleOf(search)} /> : null}
      {!busy && loaded.items.length > 0 && matches.length === 0 ? <p class="empty">No loaded version matches.</p> : null}
      {!loaded.done && loaded.items.length > 0 ? (
        <p>
          <button type="button" onClick={() => void more(loaded.cursor)} disabled={busy}>
            {busy ? 'Searching…' : `Search the next ${SEARCH_PAGE} versions`}
          </button>
        </p>
      ) : null}
    </>
  );
}
