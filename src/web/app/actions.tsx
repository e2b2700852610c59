/**
 * Actions shared by the views: download verified bytes (re-hashed in the browser before they are
 * saved) and sortable column headers.
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { fetchAll } from './api.ts';
import { ErrorBox } from './components.tsx';
import { formatBytes } from './lib/format.ts';
import { nextSort, type SortState, type SortValue, sortRows } from './lib/table.ts';

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const h = await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(h)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

function save(bytes: Uint8Array, filename: string): void {
  const url = URL.createObjectURL(new Blob([bytes as Uint8Array<ArrayBuffer>], { type: 'application/octet-stream' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  a.className = 'offscreen';
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/**
 * Downloads verified bytes with the session's token (a plain link could not send it), re-hashes them
 * in the browser and saves them only when they match the digest the API reported.
 */
export function DownloadButton({ path, filename, digest, size }: { path: string; filename: string; digest?: string; size?: number }) {
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState<string | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const run = async () => {
    setBusy(true);
    setError(undefined);
    setDone(undefined);
    try {
      const bytes = await fetchAll(path);
      if (digest && crypto.subtle) {
        const got = `sha256:${await sha256Hex(bytes)}`;
        if (got !== digest) throw new Error(`the bytes received hash to ${got}, not ${digest}: nothing was saved`);
      }
      save(bytes, filename);
      setDone(`${filename} saved (${formatBytes(bytes.length)}${digest && crypto.subtle ? ', sha256 verified' : ''})`);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <span class="download">
      <button type="button" onClick={() => void run()} disabled={busy} data-testid="download">
        {busy ? 'Downloading…' : `Download ${filename}`}
        {size !== undefined && !busy ? <span class="muted small"> ({formatBytes(size)})</span> : null}
      </button>
      <span role="status" class="small ok">
        {done ?? ''}
      </span>
      <ErrorBox error={error} what={`Download of ${filename}`} />
    </span>
  );
}

export type Columns<T> = Record<string, (row: T) => SortValue>;

/** Rows sorted by the column last chosen (none chosen: as the API returned them). */
export function useSort<T>(rows: readonly T[], columns: Columns<T>) {
  const [sort, setSort] = useState<SortState | undefined>(undefined);
  const by = sort ? columns[sort.key] : undefined;
  return {
    sort,
    rows: sort && by ? sortRows(rows, by, sort.dir) : [...rows],
    onSort: (key: string) => setSort((s) => nextSort(s, key)),
  };
}

/** A column header that sorts the table (aria-sort says how it is sorted now). */
export function SortTh({
  id,
  sort,
  onSort,
  children,
}: {
  id: string;
  sort: SortState | undefined;
  onSort: (key: string) => void;
  children: ComponentChildren;
}) {
  const active = sort?.key === id;
  const dir = active ? sort.dir : undefined;
  return (
    <th scope="col" aria-sort={dir === 'asc' ? 'ascending' : dir === 'desc' ? 'descending' : undefined}>
      <button type="button" class="sort" onClick={() => onSort(id)}>
        {children}
        <span aria-hidden="true" class="sort-mark">
          {dir === 'asc' ? '▲' : dir === 'desc' ? '▼' : '↕'}
        </span>
      </button>
    </th>
  );
}
