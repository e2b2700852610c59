/**
 * The artifacts view's search form and results. An exact name is listed by `/v1/artifacts?name=`; a
 * name prefix, labels and a state are searched by the server (`GET /v1/search`), over the whole
 * installation, a page at a time ("Load more" follows the API's cursor). The query is in the URL
 * (lib/search.ts), so a search can be shared.
 */
import { useEffect, useState } from 'preact/hooks';
import { type Columns, SortTh, useSort } from '../actions.tsx';
import { api, STATES } from '../api.ts';
import { ErrorBox, Loading, StateBadge, Time } from '../components.tsx';
import { formatCount, plural } from '../lib/format.ts';
import {
  labelsText,
  parseLabelsText,
  type SearchHit,
  type SearchPage,
  type SearchQuery,
  searchApiPath,
  searchHref,
  searchTitle,
} from '../lib/search.ts';
import { Link, navigate } from '../router.tsx';
import { Labels, useLabels } from './labels.tsx';

/** Hits asked for per page of a search (a filtered page may hold fewer: the server reads at most 1,000 index items). */
export const SEARCH_LIMIT = 20;

export interface FormValues {
  name: string;
  prefix: string;
  labels: Array<[string, string]>;
  state: string | undefined;
}

const stateLabel = (s: string) => s.charAt(0) + s.slice(1).toLowerCase();

export function SearchForm({ values }: { values: FormValues }) {
  const [name, setName] = useState(values.name || values.prefix);
  const [mode, setMode] = useState(values.prefix ? 'prefix' : 'exact');
  const [labelDraft, setLabelDraft] = useState(labelsText(values.labels));
  const [state, setState] = useState(values.state ?? '');
  const [invalid, setInvalid] = useState<string[]>([]);
  const active = Boolean(values.name || values.prefix || values.labels.length);
  const submit = () => {
    const parsed = parseLabelsText(labelDraft);
    setInvalid(parsed.invalid);
    if (parsed.invalid.length > 0) return;
    const n = name.trim();
    if (n && mode === 'exact' && parsed.labels.length === 0 && !state) navigate(`/artifacts?name=${encodeURIComponent(n)}`);
    else if (n || parsed.labels.length > 0) navigate(searchHref({ prefix: n, labels: parsed.labels, state: state || undefined }));
    else navigate(state ? `/artifacts?state=${state}` : '/artifacts');
  };
  return (
    // biome-ignore lint/a11y/useSemanticElements: <search> is not in Preact's JSX types yet; the role says the same
    <form
      class="search"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        submit();
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
          <label for="label-search">Labels</label>
          <input
            id="label-search"
            type="search"
            placeholder="key=value, key=value"
            aria-describedby="search-help"
            aria-invalid={invalid.length > 0 ? 'true' : undefined}
            value={labelDraft}
            onInput={(e) => setLabelDraft((e.target as HTMLInputElement).value)}
          />
        </div>
        <div class="field">
          <label for="state-search">State</label>
          <select id="state-search" value={state} onChange={(e) => setState((e.target as HTMLSelectElement).value)}>
            <option value="">any (artifacts)</option>
            {STATES.map((s) => (
              <option key={s} value={s}>
                {stateLabel(s)} versions
              </option>
            ))}
          </select>
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
      {invalid.length > 0 ? (
        <p class="bad small" role="alert" data-testid="label-error">
          A label is searched as key=value (the exact value): {invalid.map((t) => `“${t}”`).join(', ')}
        </p>
      ) : null}
      <p id="search-help" class="help">
        The server searches every artifact: by the start of its name (case-sensitive), by labels (every one must match) and, with a state,
        lists the versions in that state. An exact name alone is looked up by name.
      </p>
    </form>
  );
}

const COLUMNS: Columns<SearchHit> = {
  name: (h) => h.name,
  version: (h) => h.version,
  state: (h) => h.state,
  kind: (h) => h.kind,
  created: (h) => h.created_at,
};

function HitTable({ items, q, labels }: { items: SearchHit[]; q: SearchQuery; labels: Map<string, Record<string, string>> }) {
  const { sort, rows, onSort } = useSort(items, COLUMNS);
  const th = (id: string, text: string) => (
    <SortTh id={id} sort={sort} onSort={onSort}>
      {text}
    </SortTh>
  );
  const versions = Boolean(q.state);
  return (
    <table class="list responsive sortable" data-testid="search-table">
      <caption class="sr-only">{searchTitle(q)}</caption>
      <thead>
        <tr>
          {th('name', 'Artifact')}
          {versions ? th('version', 'Version') : null}
          {versions ? th('state', 'State') : null}
          {th('kind', 'Kind')}
          <th scope="col">Labels</th>
          {th('created', 'Created')}
        </tr>
      </thead>
      <tbody>
        {rows.map((h) => (
          <tr key={`${h.artifact_id}/${h.version ?? ''}`}>
            <td data-label="Artifact">
              <Link href={`/artifacts/${h.artifact_id}${h.version ? `/versions/${h.version}` : ''}`} class="strong-link">
                {h.name}
              </Link>
              <div class="muted small mono">{h.artifact_id}</div>
            </td>
            {versions ? <td data-label="Version">v{h.version}</td> : null}
            {versions ? (
              <td data-label="State">
                <StateBadge state={h.state ?? ''} />
              </td>
            ) : null}
            <td data-label="Kind">{h.kind}</td>
            <td data-label="Labels">
              {h.labels || labels.has(h.artifact_id) ? (
                <Labels labels={h.labels ?? labels.get(h.artifact_id)} />
              ) : (
                <span class="muted">…</span>
              )}
            </td>
            <td data-label="Created">
              <Time iso={h.created_at} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

interface Loaded {
  items: SearchHit[];
  cursor: string | undefined;
  scanned: number;
  pages: number;
}

/** A server search, a page at a time: "Load more" follows the cursor until the index is read. */
export function SearchResults({ q }: { q: SearchQuery }) {
  const [loaded, setLoaded] = useState<Loaded>({ items: [], cursor: undefined, scanned: 0, pages: 0 });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const more = async (cursor: string | undefined) => {
    setBusy(true);
    setError(undefined);
    try {
      const page = await api<SearchPage>(searchApiPath(q, SEARCH_LIMIT, cursor));
      setLoaded((l) => ({
        items: [...l.items, ...page.items],
        cursor: page.cursor,
        scanned: l.scanned + page.scanned,
        pages: l.pages + 1,
      }));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => {
    void more(undefined);
  }, []);
  // Hits of a state search carry no labels unless labels were asked for: read them from the artifacts.
  const labels = useLabels(loaded.items.filter((h) => !h.labels).map((h) => h.artifact_id));
  const what = q.state ? 'version' : 'artifact';
  const done = loaded.pages > 0 && !loaded.cursor;
  return (
    <>
      {loaded.pages > 0 ? (
        <p class="muted" role="status" data-testid="search-status">
          {plural(loaded.items.length, what)} found
          {done
            ? ' — the whole installation was searched.'
            : ` so far (${formatCount(loaded.scanned)} index entries read); more may follow.`}
        </p>
      ) : null}
      <ErrorBox error={error} />
      {busy && loaded.pages === 0 ? <Loading what="Searching" /> : null}
      {loaded.items.length > 0 ? <HitTable items={loaded.items} q={q} labels={labels} /> : null}
      {done && loaded.items.length === 0 ? <p class="empty">No {what} matches.</p> : null}
      {loaded.cursor ? (
        <p>
          <button type="button" onClick={() => void more(loaded.cursor)} disabled={busy}>
            {busy ? 'Searching…' : 'Load more'}
          </button>
        </p>
      ) : null}
    </>
  );
}
