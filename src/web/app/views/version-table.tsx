/** A table of listed versions, sortable by its columns (the rows loaded), with the artifacts' labels as filter chips. */
import type { ComponentChildren } from 'preact';
import { type Columns, SortTh, useSort } from '../actions.tsx';
import type { Version } from '../api.ts';
import { Digest, StateBadge, Time, Who } from '../components.tsx';
import { formatBytes } from '../lib/format.ts';
import { Link } from '../router.tsx';
import { Labels } from './labels.tsx';

const COLUMNS: Columns<Version> = {
  name: (v) => v.name,
  version: (v) => v.version,
  state: (v) => v.state,
  kind: (v) => v.kind,
  size: (v) => v.size,
  by: (v) => v.created_by.id,
  created: (v) => v.created_at,
};

export function VersionTable({
  items,
  caption,
  labels,
}: {
  items: Version[];
  caption: ComponentChildren;
  labels: Map<string, Record<string, string>>;
}) {
  const { sort, rows, onSort } = useSort(items, COLUMNS);
  const th = (id: string, text: string) => (
    <SortTh id={id} sort={sort} onSort={onSort}>
      {text}
    </SortTh>
  );
  return (
    <table class="list responsive sortable" data-testid="versions-table">
      <caption class="sr-only">{caption}</caption>
      <thead>
        <tr>
          {th('name', 'Artifact')}
          {th('version', 'Version')}
          {th('state', 'State')}
          {th('kind', 'Kind')}
          {th('size', 'Size')}
          <th scope="col">Labels</th>
          <th scope="col">Digest</th>
          {th('by', 'Created by')}
          {th('created', 'Created')}
        </tr>
      </thead>
      <tbody>
        {rows.map((v) => (
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
            <td data-label="Labels">
              {labels.has(v.artifact_id) ? <Labels labels={labels.get(v.artifact_id)} /> : <span class="muted">…</span>}
            </td>
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
  );
}
