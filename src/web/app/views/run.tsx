/** A run and its outputs (stdout, stderr, output.json), each in an incremental viewer; and one output on its own page. */
import type { ComponentChildren } from 'preact';
import { DownloadButton } from '../actions.tsx';
import type { Artifact, Execution } from '../api.ts';
import { Digest, ErrorBox, type Fact, Facts, Loading, PageTitle, Time, useApi, Who } from '../components.tsx';
import { formatBytes } from '../lib/format.ts';
import { Link } from '../router.tsx';
import { isOutputName, outputOrder, RunStatus } from './executions.tsx';
import { ByteViewer } from './viewer.tsx';

/** Loads a run (and its artifact, for the breadcrumb) and renders it; says why while it cannot. */
function WithRun({ run, children }: { run: string; children: (e: Execution, a: Artifact | undefined) => ComponentChildren }) {
  const exec = useApi<Execution>(`/v1/executions/${encodeURIComponent(run)}`);
  const art = useApi<Artifact>(exec.data ? `/v1/artifacts/${exec.data.artifact_id}` : null);
  if (exec.error) {
    return (
      <section>
        <PageTitle title="Run not available" />
        <ErrorBox error={exec.error} />
      </section>
    );
  }
  if (!exec.data) return <Loading what="Loading the run" />;
  return <>{children(exec.data, art.data)}</>;
}

function Crumbs({ e, a, output }: { e: Execution; a: Artifact | undefined; output?: string }) {
  return (
    <nav aria-label="Breadcrumb" class="crumbs">
      <ol>
        <li>
          <Link href="/">Artifacts</Link>
        </li>
        <li>
          <Link href={`/artifacts/${e.artifact_id}/executions`}>{a?.name ?? e.artifact_id}</Link>
        </li>
        <li>
          {output ? (
            <Link href={`/runs/${e.run_id}`}>run {e.run_id.slice(-6)}</Link>
          ) : (
            <span aria-current="page">run {e.run_id.slice(-6)}</span>
          )}
        </li>
        {output ? (
          <li>
            <span aria-current="page">{output}</span>
          </li>
        ) : null}
      </ol>
    </nav>
  );
}

export function RunPage({ run }: { run: string }) {
  return <WithRun run={run}>{(e, a) => <RunView e={e} a={a} />}</WithRun>;
}

function RunView({ e, a }: { e: Execution; a: Artifact | undefined }) {
  const names = outputOrder(e);
  const failed = e.status === 'FAILED';
  return (
    <article>
      <Crumbs e={e} a={a} />
      <PageTitle title={`Run ${e.run_id}`}>
        Run <span class="mono break">{e.run_id}</span> <RunStatus status={e.status} />
      </PageTitle>
      <Facts
        items={[
          [
            'Artifact',
            <Link href={`/artifacts/${e.artifact_id}/versions/${e.version}`}>{`${a?.name ?? e.artifact_id} v${e.version}`}</Link>,
          ],
          ['Executed digest', <Digest value={e.content_hash} full copy />, true],
          [
            'Started',
            <span>
              <Time iso={e.started_at} /> by <Who p={e.started_by} />
            </span>,
          ],
          ['Finished', <Time iso={e.finished_at} />],
          ['Exit code', e.exit_code === undefined ? '—' : String(e.exit_code)],
          ...(e.signal ? ([['Signal', e.signal]] as Fact[]) : []),
        ]}
      />
      {failed && names[0] === 'stderr.log' ? <p class="muted">The run failed: its stderr.log comes first, opened at its end.</p> : null}
      {names.length === 0 ? <p class="empty">No outputs uploaded.</p> : null}
      {names.map((n) => {
        const o = e.outputs[n];
        if (!o) return null;
        return (
          <section key={n} aria-labelledby={`out-${n.replace('.', '-')}`}>
            <h2 id={`out-${n.replace('.', '-')}`}>
              <Link href={`/runs/${e.run_id}/${n}`}>{n}</Link>
            </h2>
            <p class="muted small">
              {formatBytes(o.size)}, <Digest value={o.digest} copy />
            </p>
            <p>
              <DownloadButton path={`/v1/executions/${e.run_id}/${n}`} filename={n} digest={o.digest} size={o.size} />
            </p>
            <ByteViewer
              path={`/v1/executions/${e.run_id}/${n}`}
              size={o.size}
              digest={o.digest}
              label={n}
              json={n === 'output.json'}
              atEnd={failed && n === 'stderr.log'}
            />
          </section>
        );
      })}
    </article>
  );
}

export function OutputPage({ run, output }: { run: string; output: string }) {
  return <WithRun run={run}>{(e, a) => <OutputView e={e} a={a} output={output} />}</WithRun>;
}

function OutputView({ e, a, output }: { e: Execution; a: Artifact | undefined; output: string }) {
  const o = isOutputName(output) ? e.outputs[output] : undefined;
  return (
    <article>
      <Crumbs e={e} a={a} output={output} />
      <PageTitle title={`${output} of run ${e.run_id}`}>
        {output} <span class="muted">of run {e.run_id.slice(-6)}</span>
      </PageTitle>
      {!o ? (
        <p class="empty">This run has no {output}.</p>
      ) : (
        <>
          <Facts
            items={[
              ['Size', `${formatBytes(o.size)} (${o.size.toLocaleString('en-US')} bytes)`],
              ['Digest', <Digest value={o.digest} full copy />, true],
              ['Run', <RunStatus status={e.status} />],
            ]}
          />
          <p>
            <DownloadButton path={`/v1/executions/${e.run_id}/${output}`} filename={output} digest={o.digest} size={o.size} />
          </p>
          <ByteViewer
            path={`/v1/executions/${e.run_id}/${output}`}
            size={o.size}
            digest={o.digest}
            label={output}
            json={output === 'output.json'}
            atEnd={e.status === 'FAILED' && output === 'stderr.log'}
            tall
          />
        </>
      )}
    </article>
  );
}
