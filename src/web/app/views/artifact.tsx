/**
 * One artifact: its facts, and tabs for its versions (with compensations and archive keys), one
 * version (content and the approval flow), the merged history, approvals, executions, the provenance
 * graph and the diff between two versions.
 */
import type { ArtifactWithVersions, HistoryEntry, Principal } from '../api.ts';
import { Digest, ErrorBox, type Fact, Facts, Loading, PageTitle, problemOf, StateBadge, Time, useApi, Who } from '../components.tsx';
import { formatBytes } from '../lib/format.ts';
import { Link } from '../router.tsx';
import { ApprovalsTab } from './approvals.tsx';
import { DiffTab } from './diff.tsx';
import { ExecutionsTab } from './executions.tsx';
import { HistoryTab } from './history.tsx';
import { Labels } from './labels.tsx';
import { ProvenanceTab } from './provenance.tsx';
import { VersionView } from './version.tsx';

export type ArtifactTab = 'versions' | 'version' | 'history' | 'approvals' | 'executions' | 'provenance' | 'diff';

const TAB_LABELS: Array<[ArtifactTab, string, string]> = [
  ['versions', 'Versions', ''],
  ['history', 'History', '/history'],
  ['approvals', 'Approvals', '/approvals'],
  ['executions', 'Executions', '/executions'],
  ['provenance', 'Provenance', '/provenance'],
  ['diff', 'Diff', '/diff'],
];

export interface ArtifactPageProps {
  id: string;
  tab: ArtifactTab;
  version?: number;
  query: URLSearchParams;
  principal: Principal;
}

export function ArtifactPage({ id, tab, version, query, principal }: ArtifactPageProps) {
  const art = useApi<ArtifactWithVersions>(`/v1/artifacts/${encodeURIComponent(id)}`);
  if (art.error) {
    return (
      <section>
        <PageTitle title="Artifact not available" />
        <ErrorBox error={art.error} />
        <p>
          <Link href="/">Back to the artifacts</Link>
        </p>
      </section>
    );
  }
  if (!art.data) return <Loading what="Loading the artifact" />;
  const a = art.data;
  const tabTitle = tab === 'version' ? `v${version}` : (TAB_LABELS.find(([t]) => t === tab)?.[1] ?? '').toLowerCase() || 'versions';
  return (
    <article class="artifact">
      <nav aria-label="Breadcrumb" class="crumbs">
        <ol>
          <li>
            <Link href="/">Artifacts</Link>
          </li>
          <li>
            <Link href={`/artifacts/${a.artifact_id}`} aria-current={tab === 'versions' ? 'page' : undefined}>
              {a.name}
            </Link>
          </li>
          {tab === 'version' ? (
            <li>
              <span aria-current="page">v{version}</span>
            </li>
          ) : null}
        </ol>
      </nav>
      <PageTitle title={`${a.name} — ${tabTitle}`}>
        {a.name} {tab === 'version' ? <span class="muted">v{version}</span> : null}
      </PageTitle>
      <Facts
        items={[
          ['Artifact id', <code class="mono">{a.artifact_id}</code>, true],
          ['Kind', a.kind],
          ['Latest version', `v${a.latest_version}`],
          ['Quorum', `${a.quorum} human approval${a.quorum === 1 ? '' : 's'}`],
          ['Labels', <Labels labels={a.labels} />],
          [
            'Created',
            <span>
              <Time iso={a.created_at} /> by <Who p={a.created_by} />
            </span>,
            true,
          ],
          ...(a.compensates
            ? ([
                [
                  'Compensates',
                  <Link href={`/artifacts/${a.compensates.artifact_id}/versions/${a.compensates.version}`}>
                    {a.compensates.artifact_id} v{a.compensates.version}
                  </Link>,
                ],
              ] as Fact[])
            : []),
        ]}
      />
      <nav aria-label="Artifact views" class="tabs">
        <ul>
          {TAB_LABELS.map(([t, label, suffix]) => (
            <li key={t}>
              <Link
                href={`/artifacts/${a.artifact_id}${suffix}`}
                aria-current={tab === t || (t === 'versions' && tab === 'version') ? 'page' : undefined}
              >
                {label}
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <div class="tab-body">
        {tab === 'versions' ? <VersionsTab art={a} /> : null}
        {tab === 'version' && version !== undefined ? (
          <VersionView art={a} version={version} principal={principal} onChanged={art.reload} />
        ) : null}
        {tab === 'history' ? <HistoryTab art={a} /> : null}
        {tab === 'approvals' ? <ApprovalsTab art={a} /> : null}
        {tab === 'executions' ? <ExecutionsTab art={a} /> : null}
        {tab === 'provenance' ? <ProvenanceTab art={a} /> : null}
        {tab === 'diff' ? <DiffTab art={a} query={query} /> : null}
      </div>
    </article>
  );
}

function VersionsTab({ art }: { art: ArtifactWithVersions }) {
  const versions = [...art.versions].sort((x, y) => y.version - x.version);
  return (
    <>
      <section aria-labelledby="versions-h">
        <h2 id="versions-h">Versions</h2>
        <table class="list responsive">
          <thead>
            <tr>
              <th scope="col">Version</th>
              <th scope="col">State</th>
              <th scope="col">File</th>
              <th scope="col">Size</th>
              <th scope="col">Digest</th>
              <th scope="col">Created</th>
              <th scope="col">State since</th>
            </tr>
          </thead>
          <tbody>
            {versions.map((v) => (
              <tr key={v.version}>
                <td data-label="Version">
                  <Link href={`/artifacts/${art.artifact_id}/versions/${v.version}`} class="strong-link">
                    v{v.version}
                  </Link>
                </td>
                <td data-label="State">
                  <StateBadge state={v.state} />
                </td>
                <td data-label="File">{v.filename}</td>
                <td data-label="Size">{formatBytes(v.size)}</td>
                <td data-label="Digest">
                  <Digest value={v.content_hash} />
                </td>
                <td data-label="Created">
                  <Time iso={v.created_at} /> <span class="muted">by</span> <Who p={v.created_by} />
                </td>
                <td data-label="State since">
                  <Time iso={v.state_changed_at ?? v.created_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
      <Compensations art={art} />
      <ArchiveKeys art={art} />
    </>
  );
}

function Compensations({ art }: { art: ArtifactWithVersions }) {
  const history = useApi<{ entries: HistoryEntry[] }>(`/v1/artifacts/${art.artifact_id}/history`);
  const comps = (history.data?.entries ?? []).filter((e) => e.type === 'compensation');
  return (
    <section aria-labelledby="comp-h">
      <h2 id="comp-h">Compensations</h2>
      {art.compensates ? (
        <p>
          This artifact is the compensation (rollback) of{' '}
          <Link href={`/artifacts/${art.compensates.artifact_id}/versions/${art.compensates.version}`}>
            version {art.compensates.version} of artifact {art.compensates.artifact_id}
          </Link>
          .
        </p>
      ) : null}
      <ErrorBox error={history.error} />
      {history.loading && !history.data ? <Loading what="Loading compensations" /> : null}
      {history.data && comps.length === 0 ? <p class="empty">No version of this artifact was compensated.</p> : null}
      {comps.length > 0 ? (
        <table class="list responsive">
          <thead>
            <tr>
              <th scope="col">Compensated version</th>
              <th scope="col">Compensation artifact</th>
              <th scope="col">Its state</th>
              <th scope="col">Rollback file</th>
              <th scope="col">Digest</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {comps.map((c) => (
              <tr key={c.seq}>
                <td data-label="Compensated version">v{String(c.version)}</td>
                <td data-label="Compensation artifact">
                  <Link href={`/artifacts/${String(c.comp_artifact_id)}`} class="mono">
                    {String(c.comp_artifact_id)}
                  </Link>
                </td>
                <td data-label="Its state">
                  <CompensationState id={String(c.comp_artifact_id)} />
                </td>
                <td data-label="Rollback file">
                  {String(c.filename ?? '')} <span class="muted">({formatBytes(c.size as number)})</span>
                </td>
                <td data-label="Digest">
                  <Digest value={c.content_hash as string} />
                </td>
                <td data-label="Created">
                  <Time iso={c.timestamp} /> <span class="muted">by</span> <Who p={c.created_by as Principal} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

/** The compensation artifact's latest version and its state. */
function CompensationState({ id }: { id: string }) {
  const comp = useApi<ArtifactWithVersions>(`/v1/artifacts/${encodeURIComponent(id)}`);
  if (comp.error) return <span class="bad small">{problemOf(comp.error).code}</span>;
  const latest = comp.data?.versions.find((v) => v.version === comp.data?.latest_version);
  if (!latest) return <span class="muted">…</span>;
  return (
    <span>
      v{latest.version} <StateBadge state={latest.state} />
    </span>
  );
}

function ArchiveKeys({ art }: { art: ArtifactWithVersions }) {
  const objects = art.archived?.objects ?? [];
  return (
    <section aria-labelledby="archive-h">
      <h2 id="archive-h">Archive</h2>
      {!art.archived ? (
        <p class="empty">Not archived. Archiving (a human, once every version is settled) copies every object under archive/.</p>
      ) : (
        <>
          <p>
            Archived <Time iso={art.archived.at} />: {objects.length} object{objects.length === 1 ? '' : 's'} copied and verified.
          </p>
          <table class="list responsive">
            <thead>
              <tr>
                <th scope="col">Archive key</th>
                <th scope="col">Original key</th>
                <th scope="col">Digest</th>
                <th scope="col">Size</th>
              </tr>
            </thead>
            <tbody>
              {objects.map((o) => (
                <tr key={o.archive_key}>
                  <td data-label="Archive key">
                    <code class="key">{o.archive_key}</code>
                  </td>
                  <td data-label="Original key">
                    <code class="key">{o.original_key}</code>
                  </td>
                  <td data-label="Digest">
                    <Digest value={o.digest} />
                  </td>
                  <td data-label="Size">{formatBytes(o.size)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}
