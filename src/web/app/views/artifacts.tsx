/**
 * Artifacts by state, with the number of versions in each state; an exact name (the API's listing by
 * name); a name prefix, labels and a state searched by the server (views/search.tsx, `GET /v1/search`,
 * the query in the URL); cursor pagination (the API's opaque cursors, kept as a stack so "Previous"
 * works); sortable columns over the rows shown.
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { type Artifact, type Page, STATES, type StateCounts, type Version } from '../api.ts';
import { ErrorBox, Loading, PageTitle, Time, useApi, Who } from '../components.tsx';
import { formatCount } from '../lib/format.ts';
import { type SearchQuery, searchOf, searchTitle } from '../lib/search.ts';
import { Link } from '../router.tsx';
import { Labels, useLabels } from './labels.tsx';
import { SearchForm, SearchResults } from './search.tsx';
import { VersionTable } from './version-table.tsx';

export const PAGE_SIZE = 20;

const label = (s: string) => s.charAt(0) + s.slice(1).toLowerCase();

interface View {
  name: string;
  search: (SearchQuery & { invalid: string[] }) | undefined;
  state: string;
}

function viewOf(query: URLSearchParams): View {
  const name = query.get('name') ?? '';
  return { name, search: name ? undefined : searchOf(query), state: (query.get('state') ?? 'PROPOSED').toUpperCase() };
}

function titleOf(v: View): string {
  if (v.name) return `Artifacts named “${v.name}”`;
  if (v.search) return searchTitle(v.search);
  return v.state === 'ALL' ? 'All versions' : `${label(v.state)} versions`;
}

export function ArtifactsList({ query }: { query: URLSearchParams }) {
  const view = viewOf(query);
  const counts = useApi<StateCounts>('/v1/status/states');
  const listing = !view.name && !view.search;
  const form = { name: view.name, prefix: view.search?.prefix ?? '', labels: view.search?.labels ?? [], state: view.search?.state };
  return (
    <section>
      <PageTitle title={titleOf(view)} />
      <SearchForm key={query.toString()} values={form} />
      <nav aria-label="Versions by state" class="state-tabs">
        <ul>
          <li>
            <Link href="/artifacts?state=ALL" aria-current={listing && view.state === 'ALL' ? 'page' : undefined}>
              All <span class="count">{counts.data ? formatCount(counts.data.total) : '…'}</span>
            </Link>
          </li>
          {STATES.map((s) => (
            <li key={s}>
              <Link
                href={`/artifacts?state=${s}`}
                aria-current={listing && view.state === s ? 'page' : undefined}
                class={`tab-${s.toLowerCase()}`}
              >
                {label(s)} <span class="count">{counts.data ? formatCount(counts.data.states[s] ?? 0) : '…'}</span>
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <ErrorBox error={counts.error} what="Counts" />
      {view.name ? (
        <ByName key={`n:${view.name}`} name={view.name} />
      ) : view.search && view.search.invalid.length > 0 ? (
        <p class="bad" role="alert">
          A label is searched as key=value: {view.search.invalid.map((t) => `“${t}”`).join(', ')}
        </p>
      ) : view.search ? (
        <SearchResults key={query.toString()} q={view.search} />
      ) : (
        <ByState key={`s:${view.state}`} state={view.state} />
      )}
    </section>
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
