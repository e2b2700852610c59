/**
 * The merged audit history of an artifact as a timeline (transitions, decisions, runs and their
 * outputs, compensations, provenance steps, archive), each entry with its chain hash; and an on-demand
 * verification (re-hash every object, recompute the chain).
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { type ArtifactWithVersions, api, type HistoryEntry, type Principal } from '../api.ts';
import { Digest, ErrorBox, Loading, StateBadge, Time, useApi, Who } from '../components.tsx';
import { approvalStanding, type DecisionLike, latestRounds, type Standing } from '../lib/approvals.ts';
import { formatBytes } from '../lib/format.ts';
import { Link } from '../router.tsx';
import { StandingNote } from './approvals.tsx';

const s = (v: unknown) => (v === undefined || v === null ? '' : String(v));

interface Described {
  title: string;
  body: ComponentChildren;
  who?: Principal;
  /** A class beside `entry-{type}` (an approval that does not count is not drawn as one that does). */
  variant?: string;
}

function decisionTitle(e: HistoryEntry, st: Standing): string {
  if (st.kind === 'rejection') return `v${s(e.version)} rejected`;
  if (st.kind === 'counted') return `v${s(e.version)} approved (counted)`;
  if (st.kind === 'lapsed') return `v${s(e.version)} approved (no longer counted)`;
  return `v${s(e.version)} approval not counted`;
}

function describeDecision(e: HistoryEntry, st: Standing): Described {
  return {
    title: decisionTitle(e, st),
    who: e.actor as Principal,
    variant: `standing-${st.kind}`,
    body: (
      <>
        evidence <code class="wrap">{s(e.evidence_ref)}</code>, bound to <Digest value={s(e.content_hash)} />, expires{' '}
        <Time iso={s(e.expires_at)} /> — <StandingNote standing={st} />
        {e.comment ? <span class="muted"> — “{s(e.comment)}”</span> : null}
      </>
    ),
  };
}

function describe(e: HistoryEntry, art: ArtifactWithVersions, standing: (e: HistoryEntry) => Standing): Described {
  switch (e.type) {
    case 'transition':
      return {
        title: e.from ? `v${s(e.version)}: ${s(e.from)} → ${s(e.to)}` : `v${s(e.version)} created`,
        who: e.actor as Principal,
        body: (
          <>
            {e.from ? <StateBadge state={s(e.from)} /> : null}
            {e.from ? ' → ' : null}
            <StateBadge state={s(e.to)} />
            {e.reason ? <span class="muted"> — {s(e.reason)}</span> : null}
            {e.content_hash ? (
              <span>
                {' '}
                {s(e.filename)}, {formatBytes(e.size as number)}, <Digest value={s(e.content_hash)} />
              </span>
            ) : null}
          </>
        ),
      };
    case 'approval':
      return describeDecision(e, standing(e));
    case 'execution':
      return {
        title: `run started on v${s(e.version)}`,
        who: e.started_by as Principal,
        body: (
          <>
            <Link href={`/runs/${s(e.run_id)}`} class="mono">
              {s(e.run_id)}
            </Link>{' '}
            executing <Digest value={s(e.content_hash)} />
          </>
        ),
      };
    case 'execution_output':
      return {
        title: `${s(e.name)} uploaded`,
        who: e.uploaded_by as Principal,
        body: (
          <>
            <Link href={`/runs/${s(e.run_id)}/${s(e.name)}`}>
              {s(e.name)} of run {s(e.run_id).slice(-6)}
            </Link>
            , {formatBytes(e.size as number)}, <Digest value={s(e.digest)} />
          </>
        ),
      };
    case 'execution_finish':
      return {
        title: `run ${e.status === 'SUCCEEDED' ? 'succeeded' : 'failed'} (exit code ${s(e.exit_code)})`,
        who: e.finished_by as Principal,
        body: (
          <Link href={`/runs/${s(e.run_id)}`} class="mono">
            {s(e.run_id)}
          </Link>
        ),
      };
    case 'compensation':
      return {
        title: `compensation of v${s(e.version)} created`,
        who: e.created_by as Principal,
        body: (
          <>
            <Link href={`/artifacts/${s(e.comp_artifact_id)}`} class="mono">
              {s(e.comp_artifact_id)}
            </Link>{' '}
            {s(e.filename)}, <Digest value={s(e.content_hash)} />
          </>
        ),
      };
    case 'provenance':
      return {
        title: `provenance step ${s(e.step)}: ${s(e.action)}`,
        who: e.recorded_by as Principal,
        body: (
          <>
            by {s(e.actor)}
            {e.model ? `, model ${s(e.model)}` : ''}
            {e.tool ? `, tool ${s(e.tool)}` : ''} — {(e.inputs as string[] | undefined)?.length ?? 0} input(s),{' '}
            {(e.outputs as string[] | undefined)?.length ?? 0} output(s) (
            <Link href={`/artifacts/${art.artifact_id}/provenance`}>graph</Link>)
          </>
        ),
      };
    default: {
      const { type: _t, seq: _s, timestamp: _ts, hash: _h, prev_hash: _p, ...rest } = e;
      const who = (rest.actor ?? rest.by ?? rest.created_by) as Principal | undefined;
      return {
        title: e.type.replace(/_/g, ' '),
        ...(who && typeof who === 'object' ? { who } : {}),
        body: <code class="small wrap">{JSON.stringify(rest)}</code>,
      };
    }
  }
}

export function HistoryTab({ art }: { art: ArtifactWithVersions }) {
  const history = useApi<{ entries: HistoryEntry[] }>(`/v1/artifacts/${art.artifact_id}/history`);
  const entries = history.data?.entries ?? [];
  const rounds = latestRounds(entries.filter((e) => e.type === 'approval') as unknown as DecisionLike[]);
  const now = Date.now();
  const standing = (e: HistoryEntry) => {
    const d = e as unknown as DecisionLike;
    return approvalStanding(d, now, rounds.get(d.version));
  };
  return (
    <>
      <section aria-labelledby="history-h">
        <h2 id="history-h">History</h2>
        <p class="muted">
          Every entry of the artifact’s audit chain, oldest first; each names the hash that chains it to the one before. Head:{' '}
          <Digest value={art.audit_head_hash} /> ({art.audit_seq} entries).
        </p>
        <ErrorBox error={history.error} />
        {!history.data && !history.error ? <Loading what="Loading the history" /> : null}
        {history.data ? (
          <ol class="timeline">
            {history.data.entries.map((e) => {
              const d = describe(e, art, standing);
              return (
                <li key={e.seq} class={`entry entry-${e.type}${d.variant ? ` ${d.variant}` : ''}`}>
                  <div class="entry-head">
                    <span class="seq">
                      <span class="sr-only">entry </span>#{e.seq}
                    </span>{' '}
                    <strong>{d.title}</strong>
                    <span class="entry-meta">
                      <Time iso={e.timestamp} />
                      {d.who ? (
                        <>
                          {' '}
                          by <Who p={d.who} />
                        </>
                      ) : null}
                    </span>
                  </div>
                  <div class="entry-body">{d.body}</div>
                  {e.hash ? (
                    <div class="entry-hash muted small">
                      chain hash <Digest value={e.hash} />
                    </div>
                  ) : null}
                </li>
              );
            })}
          </ol>
        ) : null}
      </section>
      <Verify art={art} />
    </>
  );
}

interface VerificationResult {
  ok: boolean;
  content: { objects: number; bytes: number; ok: number; findings: Array<Record<string, unknown>> };
  audit: { entries: number; ok: boolean; findings: Array<Record<string, unknown>> };
}

function Verify({ art }: { art: ArtifactWithVersions }) {
  const [result, setResult] = useState<VerificationResult | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      setResult(await api<VerificationResult>(`/v1/artifacts/${art.artifact_id}/verification`));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby="verify-h">
      <h2 id="verify-h">Integrity</h2>
      <p>Re-hash every object this artifact names and recompute its audit chain (read-only).</p>
      <button type="button" onClick={() => void run()} disabled={busy}>
        {busy ? 'Verifying…' : 'Verify now'}
      </button>
      <ErrorBox error={error} />
      {result ? (
        <div role="status" class={result.ok ? 'ok' : 'bad'}>
          <p>
            <strong>{result.ok ? '✓ Verified' : '✗ Integrity failures found'}</strong>: {result.content.ok} of {result.content.objects}{' '}
            objects ({formatBytes(result.content.bytes)}) match their digests; audit chain of {result.audit.entries} entries{' '}
            {result.audit.ok ? 'intact' : 'broken'}.
          </p>
          {[...result.content.findings, ...result.audit.findings].map((f, i) => (
            <p key={i} class="small">
              <code class="wrap">{JSON.stringify(f)}</code>
            </p>
          ))}
        </div>
      ) : null}
    </section>
  );
}
