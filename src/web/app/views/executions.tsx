/** The runs of an artifact's versions with their outputs (each opens in an incremental viewer). */
import type { ArtifactWithVersions, Execution } from '../api.ts';
import { Digest, ErrorBox, Loading, Time, useApi, Who } from '../components.tsx';
import { formatBytes } from '../lib/format.ts';
import { Link } from '../router.tsx';

export const OUTPUTS = ['stdout.log', 'stderr.log', 'output.json'] as const;
export type OutputName = (typeof OUTPUTS)[number];

export function isOutputName(name: string): name is OutputName {
  return (OUTPUTS as readonly string[]).includes(name);
}

/** The outputs in the order to read them: a failed run's stderr first (where it says why). */
export function outputOrder(e: Execution): OutputName[] {
  const names: OutputName[] = OUTPUTS.filter((n) => e.outputs[n]);
  if (e.status !== 'FAILED' || !names.includes('stderr.log')) return names;
  return ['stderr.log', ...names.filter((n) => n !== 'stderr.log')];
}

export function RunStatus({ status }: { status: string }) {
  return <span class={`badge run-${status.toLowerCase()}`}>{status}</span>;
}

export function ExecutionsTab({ art }: { art: ArtifactWithVersions }) {
  const list = useApi<{ executions: Execution[] }>(`/v1/artifacts/${art.artifact_id}/executions`);
  return (
    <section aria-labelledby="executions-h">
      <h2 id="executions-h">Executions</h2>
      <ErrorBox error={list.error} />
      {!list.data && !list.error ? <Loading what="Loading executions" /> : null}
      {list.data && list.data.executions.length === 0 ? <p class="empty">No version of this artifact has run.</p> : null}
      <ul class="cards">
        {(list.data?.executions ?? [])
          .slice()
          .reverse()
          .map((e) => (
            <li key={e.run_id} class="card">
              <h3>
                <Link href={`/runs/${e.run_id}`}>
                  Run <span class="mono">{e.run_id}</span>
                </Link>{' '}
                <RunStatus status={e.status} />
              </h3>
              <p>
                v{e.version} (<Digest value={e.content_hash} />) started <Time iso={e.started_at} /> by <Who p={e.started_by} />
                {e.finished_at ? (
                  <>
                    , finished <Time iso={e.finished_at} />
                  </>
                ) : null}
                {e.exit_code !== undefined ? `, exit code ${e.exit_code}` : ''}
              </p>
              <OutputLinks run={e} />
            </li>
          ))}
      </ul>
    </section>
  );
}

export function OutputLinks({ run }: { run: Execution }) {
  const names = outputOrder(run);
  if (names.length === 0) return <p class="muted">No outputs uploaded.</p>;
  return (
    <ul class="outputs">
      {names.map((n) => {
        const o = run.outputs[n];
        return (
          <li key={n}>
            <Link href={`/runs/${run.run_id}/${n}`}>{n}</Link> <span class="muted">{formatBytes(o?.size)}</span>{' '}
            <Digest value={o?.digest} />
          </li>
        );
      })}
    </ul>
  );
}
