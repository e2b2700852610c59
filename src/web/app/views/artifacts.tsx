/**
 * Artifacts by state, with the number of versions in each state, search by exact name, and
 * cursor pagination (the API's opaque cursors, kept as a stack so "Previous" works).
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { type Artifact, enc, type Page, STATES, type StateCounts, type Version } from '../api.ts';
import { Digest, ErrorBox, Loading, PageTitle, StateBadge, Time, useApi, Who } from '../components.tsx';
import { formatBytes, formatCount } from '../lib/format.ts';
import { Link, navigate } from '../router.tsx';

export const PAGE_SIZE = 20;

const label = (s: string) => s.charAt(0) + s.slice(1).toLowerCase();

export function ArtifactsList({ query }: { query: URLSearchParams }) {
  const name = query.get('name') ?? '';
  const state = (query.get('state') ?? (name ? 'ALL' : 'PROPOSED')).toUpperCase();
  const counts = useApi<StateCounts>('/v1/status/states');
  const [draft, setDraft] = useState(name);
  const title = name ? `Artifacts named “${name}”` : state === 'ALL' ? 'All versions' : `${label(state)} versions`;
  return (
    <section>
      <PageTitle title={title} />
      {/* biome-ignore lint/a11y/useSemanticElements: <search> is not in Preact's JSX types yet; the role says the same */}
      <form
        class="search"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          const v = draft.trim();
          navigate(v ? `/artifacts?name=${enc(v)}` : '/artifacts');
        }}
      >
        <label for="name-search">Artifact name (exact)</label>
        <div class="search-row">
          <input id="name-search" type="search" value={draft} onInput={(e) => setDraft((e.target as HTMLInputElement).value)} />
          <button type="submit">Search</button>
          {name ? (
            <Link href="/artifacts" class="button-like" onClick={() => setDraft('')}>
              Clear
            </Link>
          ) : null}
        </div>
      </form>
      <nav aria-label="Versions by state" class="state-tabs">
        <ul>
          <li>
            <Link href="/artifacts?state=ALL" aria-current={!name && state === 'ALL' ? 'page' : undefined}>
              All <span class="count">{counts.data ? formatCount(counts.data.total) : '…'}</span>
            </Link>
          </li>
          {STATES.map((s) => (
            <li key={s}>
              <Link
                href={`/artifacts?state=${s}`}
                aria-current={!name && state === s ? 'page' : undefined}
                class={`tab-${s.toLowerCase()}`}
              >
                {label(s)} <span class="count">{counts.data ? formatCount(counts.data.states[s] ?? 0) : '…'}</span>
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <ErrorBox error={counts.error} what="Counts" />
      {name ? <ByName key={`n:${name}`} name={name} /> : <ByState key={`s:${state}`} state={state} />}
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
      {(items) => (
        <table class="list responsive">
          <caption class="sr-only">Versions{state === 'ALL' ? '' : ` in state ${state}`}, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Artifact</th>
              <th scope="col">Version</th>
              <th scope="col">State</th>
              <th scope="col">Kind</th>
              <th scope="col">Size</th>
              <th scope="col">Digest</th>
              <th scope="col">Created by</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {items.map((v) => (
              <tr key={`${v.artifact_id}/${v.version}`}>
                <td data-label="Artifact">
                  <Link href={`/artifacts/${v.artifact_id}/versions/${v.version}`} class="strong-link">
                    {v.name}
                  </Link>
                  <div class="muted small">{v.filename}</div>
                </td>
                <td data-label="Version">v{v.version}</td>
                <td data-label="State">
                  <StateBadge state={v.state} />
                </td>
                <td data-label="Kind">{v.kind}</td>
                <td data-label="Size">{formatBytes(v.size)}</td>
                <td data-label="Digest">
                  <Digest value={v.content_hash} />
                </td>
                <td data-label="Created by">
                  <Who p={v.created_by} />
                </td>
                <td data-label="Created">
                  <Time iso={v.created_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </PagedArtifacts>
  );
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

export function Labels({ labels }: { labels: Record<string, string> }) {
  const entries = Object.entries(labels ?? {});
  if (entries.length === 0) return <span class="muted">none</span>;
  return (
    <ul class="labels">
      {entries.map(([k, v]) => (
        <li key={k}>
          <code>
            {k}={v}
          </code>
        </li>
      ))}
    </ul>
  );
}
