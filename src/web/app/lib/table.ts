/**
 * Sorting and filtering of the rows a view has loaded (the API lists by state or exact name only: a
 * name prefix or a label is matched here, over the loaded pages).
 */

export type SortDir = 'asc' | 'desc';
export interface SortState {
  key: string;
  dir: SortDir;
}

export type SortValue = string | number | undefined;

const collator = new Intl.Collator('en', { numeric: true, sensitivity: 'base' });

/** A stable sort by one column; missing values last in either direction. */
export function sortRows<T>(rows: readonly T[], value: (row: T) => SortValue, dir: SortDir): T[] {
  const sign = dir === 'asc' ? 1 : -1;
  return rows
    .map((row, i) => ({ row, i, v: value(row) }))
    .sort((a, b) => {
      if (a.v === undefined || b.v === undefined) return a.v === b.v ? a.i - b.i : a.v === undefined ? 1 : -1;
      const c = typeof a.v === 'number' && typeof b.v === 'number' ? a.v - b.v : collator.compare(String(a.v), String(b.v));
      return c === 0 ? a.i - b.i : sign * c;
    })
    .map((x) => x.row);
}

/** The next sort after a click on a column's header: a new column ascending, the same one reversed. */
export function nextSort(current: SortState | undefined, key: string): SortState {
  if (current?.key === key) return { key, dir: current.dir === 'asc' ? 'desc' : 'asc' };
  return { key, dir: 'asc' };
}

export interface LabelFilter {
  key: string;
  /** Absent: any value of the key. */
  value?: string;
}

/** "team=data" (that value) or "team" (any value); undefined for an empty text. */
export function parseLabelFilter(text: string): LabelFilter | undefined {
  const t = text.trim();
  if (t === '') return undefined;
  const eq = t.indexOf('=');
  if (eq === -1) return { key: t };
  return { key: t.slice(0, eq).trim(), value: t.slice(eq + 1).trim() };
}

export function labelText(f: LabelFilter): string {
  return f.value === undefined ? f.key : `${f.key}=${f.value}`;
}

export function matchesLabel(labels: Record<string, string> | undefined, f: LabelFilter | undefined): boolean {
  if (!f) return true;
  if (!labels || !Object.hasOwn(labels, f.key)) return false;
  return f.value === undefined || labels[f.key] === f.value;
}

/** Case-sensitive, as the API's exact-name listing is. */
export function matchesPrefix(name: string, prefix: string): boolean {
  return prefix === '' || name.startsWith(prefix);
}
