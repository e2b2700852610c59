/**
 * The provenance of an artifact drawn as a graph: input digests → step → output digests, left to
 * right. A digest is named when it is known: a version of this artifact, an output of one of its
 * runs, or a version of another artifact (from the newest versions of the listing); named digests
 * link to their version or output. Steps show the action, the actor, model and tool.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, type ArtifactWithVersions, api, type Execution, type Page, type ProvenanceStep, type Version } from '../api.ts';
import { ErrorBox, Loading, Time, useApi } from '../components.tsx';
import { formatTime, shortDigest } from '../lib/format.ts';
import { arcDepth, DEFAULT_LAYOUT, type Layout, layoutProvenance, stepId } from '../lib/graph.ts';
import { Link, navigate } from '../router.tsx';

export interface DigestInfo {
  label: string;
  detail: string;
  href: string;
  kind: 'own' | 'other' | 'output';
}

/** Versions named in the listing, newest first: at most this many are looked at to name digests. */
const INDEX_PAGES = 3;
const INDEX_PAGE_SIZE = 1000;
let globalIndex: { at: number; map: Map<string, DigestInfo> } | undefined;

async function listingIndex(): Promise<Map<string, DigestInfo>> {
  if (globalIndex && Date.now() - globalIndex.at < 60_000) return globalIndex.map;
  const map = new Map<string, DigestInfo>();
  let cursor: string | undefined;
  for (let i = 0; i < INDEX_PAGES; i++) {
    const params = new URLSearchParams({ limit: String(INDEX_PAGE_SIZE) });
    if (cursor) params.set('cursor', cursor);
    const page = await api<Page<Version>>(`/v1/artifacts?${params}`);
    for (const v of page.items) {
      if (!map.has(v.content_hash))
        map.set(v.content_hash, {
          label: `${v.name} v${v.version}`,
          detail: v.filename,
          href: `/artifacts/${v.artifact_id}/versions/${v.version}`,
          kind: 'other',
        });
    }
    cursor = page.cursor;
    if (!cursor) break;
  }
  globalIndex = { at: Date.now(), map };
  return map;
}

export function useDigestIndex(art: ArtifactWithVersions, runs: Execution[] | undefined) {
  const [index, setIndex] = useState<Map<string, DigestInfo> | undefined>(undefined);
  useEffect(() => {
    let live = true;
    const own = new Map<string, DigestInfo>();
    for (const v of art.versions)
      own.set(v.content_hash, {
        label: `this artifact, v${v.version}`,
        detail: `${v.filename} · ${v.state}`,
        href: `/artifacts/${art.artifact_id}/versions/${v.version}`,
        kind: 'own',
      });
    for (const r of runs ?? [])
      for (const [name, o] of Object.entries(r.outputs))
        if (!own.has(o.digest))
          own.set(o.digest, {
            label: `${name}`,
            detail: `run ${r.run_id.slice(-6)} of v${r.version}`,
            href: `/runs/${r.run_id}/${name}`,
            kind: 'output',
          });
    setIndex(own);
    listingIndex().then(
      (global) => {
        if (!live) return;
        const merged = new Map(global);
        for (const [k, v] of own) merged.set(k, v);
        setIndex(merged);
      },
      () => {
        // Names from the listing are a convenience: without them the graph shows digests only.
      },
    );
    return () => {
      live = false;
    };
  }, [art, runs]);
  return index;
}

/** The authenticated principal that recorded a step (always shown). */
export function recorder(s: ProvenanceStep): string {
  return s.recorded_by ? `${s.recorded_by.id} (${s.recorded_by.kind})` : '—';
}

/** A stated actor that is not the recorder is only a claim (issue 14 item 8). */
export function isClaimed(s: ProvenanceStep): boolean {
  return s.actor_claimed ?? (s.actor !== undefined && s.actor !== s.recorded_by?.id);
}

export function ProvenanceTab({ art }: { art: ArtifactWithVersions }) {
  const prov = useApi<{ steps: ProvenanceStep[] }>(`/v1/artifacts/${art.artifact_id}/provenance`);
  const runs = useApi<{ executions: Execution[] }>(`/v1/artifacts/${art.artifact_id}/executions`);
  const index = useDigestIndex(art, runs.data?.executions);
  const [statement, setStatement] = useState<string | undefined>(undefined);
  const steps = prov.data?.steps ?? [];
  return (
    <section aria-labelledby="prov-h">
      <h2 id="prov-h">Provenance</h2>
      <ErrorBox error={prov.error} />
      {!prov.data && !prov.error ? <Loading what="Loading provenance" /> : null}
      {prov.data && steps.length === 0 ? <p class="empty">No provenance step has been recorded for this artifact.</p> : null}
      {steps.length > 0 ? (
        <>
          <p class="muted">
            {steps.length} step{steps.length === 1 ? '' : 's'}, hash-chained. Each step takes the digests above it and produces the ones
            below; named digests link to their version or run output.
          </p>
          <Legend />
          <Graph steps={steps} index={index ?? new Map()} />
          <details class="as-text">
            <summary>The steps as text</summary>
            <ol>
              {steps.map((st) => (
                <li key={st.step}>
                  <strong>
                    Step {st.step}: {st.action}
                  </strong>{' '}
                  recorded by {recorder(st)}
                  {isClaimed(st) ? (
                    <span class="claimed" title="the recorder states this actor; it is not the authenticated principal">
                      {' '}
                      (claimed actor: {st.actor})
                    </span>
                  ) : null}
                  {st.model ? `, model ${st.model}` : ''}
                  {st.tool ? `, tool ${st.tool}` : ''}, <Time iso={st.timestamp} />
                  {st.note ? <div class="muted">{st.note}</div> : null}
                  <div>inputs: {st.inputs.length ? st.inputs.map((d) => <DigestName key={d} d={d} index={index} />) : 'none'}</div>
                  <div>outputs: {st.outputs.length ? st.outputs.map((d) => <DigestName key={d} d={d} index={index} />) : 'none'}</div>
                </li>
              ))}
            </ol>
          </details>
          <details
            class="as-text"
            onToggle={(e) => {
              if ((e.target as HTMLDetailsElement).open && statement === undefined)
                api(`/v1/artifacts/${art.artifact_id}/provenance?format=in-toto`).then(
                  (doc) => setStatement(JSON.stringify(doc, null, 2)),
                  // No statement without steps that produced something (NOT_FOUND): the server's sentence says why.
                  (err: unknown) =>
                    setStatement(
                      err instanceof ApiError && err.problem.detail ? err.problem.detail : `could not load: ${(err as Error).message}`,
                    ),
                );
            }}
          >
            <summary>in-toto statement (SLSA provenance)</summary>
            {statement === undefined ? <Loading /> : <pre class="json">{statement}</pre>}
          </details>
        </>
      ) : null}
    </section>
  );
}

export function DigestName({ d, index }: { d: string; index: Map<string, DigestInfo> | undefined }) {
  const info = index?.get(d);
  return (
    <span class="digest-name">
      {info ? <Link href={info.href}>{info.label}</Link> : null} <code title={d}>{shortDigest(d, 10)}</code>{' '}
    </span>
  );
}

function Legend() {
  return (
    <ul class="legend" aria-label="Legend">
      <li>
        <span class="swatch step" aria-hidden="true" /> step
      </li>
      <li>
        <span class="swatch own" aria-hidden="true" /> a version of this artifact
      </li>
      <li>
        <span class="swatch other" aria-hidden="true" /> a version of another artifact
      </li>
      <li>
        <span class="swatch output" aria-hidden="true" /> a run output
      </li>
      <li>
        <span class="swatch unknown" aria-hidden="true" /> a digest not found in this installation’s newest versions
      </li>
    </ul>
  );
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

function Graph({ steps, index }: { steps: ProvenanceStep[]; index: Map<string, DigestInfo> }) {
  const layout: Layout = layoutProvenance(steps);
  const { nodeWidth: w, nodeHeight: h } = DEFAULT_LAYOUT;
  const byId = new Map(layout.nodes.map((n) => [n.id, n]));
  const stepOf = new Map(steps.map((s) => [stepId(s.step), s]));
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must take the focus so keyboard users can scroll it
    <section class="graph-scroll" aria-label="Provenance graph" tabIndex={0}>
      <svg
        class="graph"
        width={layout.width}
        height={layout.height}
        viewBox={`0 0 ${layout.width} ${layout.height}`}
        aria-labelledby="graph-title"
        data-testid="provenance-graph"
      >
        <title id="graph-title">
          Provenance graph: {steps.length} steps, {layout.nodes.length - steps.length} digests
        </title>
        <defs>
          <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
            <path d="M 0 0 L 10 5 L 0 10 z" class="arrow-head" />
          </marker>
        </defs>
        <g class="edges">
          {layout.edges.map((e) => {
            const a = byId.get(e.from);
            const b = byId.get(e.to);
            if (!a || !b) return null;
            let d: string;
            if (e.arc) {
              // Past the layers in between: an arc on the right of the nodes.
              const x1 = a.x + w;
              const y1 = a.y + h / 2;
              const x2 = b.x + w + 2;
              const y2 = b.y + h / 2;
              const out = Math.max(x1, x2) + arcDepth(e.span);
              d = `M ${x1} ${y1} C ${out} ${y1}, ${out} ${y2}, ${x2} ${y2}`;
            } else {
              const x1 = a.x + w / 2;
              const y1 = a.y + h;
              const x2 = b.x + w / 2;
              const y2 = b.y - 2;
              const dy = Math.max(14, (y2 - y1) / 2);
              d = `M ${x1} ${y1} C ${x1} ${y1 + dy}, ${x2} ${y2 - dy}, ${x2} ${y2}`;
            }
            return <path key={`${e.from}>${e.to}`} class={`edge edge-${e.role}`} d={d} marker-end="url(#arrow)" />;
          })}
        </g>
        <g class="nodes">
          {layout.nodes.map((n) => {
            if (n.kind === 'step') {
              const s = stepOf.get(n.id) as ProvenanceStep;
              const who = [recorder(s), isClaimed(s) ? `claims ${s.actor}` : undefined, s.model].filter(Boolean).join(' · ');
              return (
                <g key={n.id} class="node step" transform={`translate(${n.x},${n.y})`} data-step={s.step}>
                  <title>
                    {`Step ${s.step}: ${s.action} recorded by ${recorder(s)}${isClaimed(s) ? ` (claimed actor: ${s.actor})` : ''}${s.model ? `, model ${s.model}` : ''}${s.tool ? `, tool ${s.tool}` : ''}, ${formatTime(s.timestamp)}`}
                  </title>
                  <rect width={w} height={h} rx={10} />
                  <text x={10} y={19} class="t1">
                    {clip(`${s.step}. ${s.action}`, 26)}
                  </text>
                  <text x={10} y={35} class="t2">
                    {clip(who || '—', 30)}
                  </text>
                  <text x={10} y={50} class="t3">
                    {clip(s.tool ? `tool ${s.tool}` : formatTime(s.timestamp), 32)}
                  </text>
                </g>
              );
            }
            const d = String(n.key);
            const info = index.get(d);
            const body = (
              <>
                <title>{info ? `${info.label} (${info.detail}): ${d}` : `unknown digest ${d}`}</title>
                <rect width={w} height={h} rx={h / 2} />
                <text x={18} y={19} class="t1">
                  {clip(info ? info.label : 'unknown digest', 29)}
                </text>
                <text x={18} y={34} class="t2">
                  {clip(info ? info.detail : 'not among the newest versions', 32)}
                </text>
                <text x={18} y={49} class="t3 mono">
                  {shortDigest(d, 20)}
                </text>
              </>
            );
            const cls = `node digest ${info ? info.kind : 'unknown'}`;
            return info ? (
              <g key={n.id} class={cls} transform={`translate(${n.x},${n.y})`} data-digest={d}>
                <a
                  href={info.href}
                  onClick={(ev) => {
                    if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
                    ev.preventDefault();
                    navigate(info.href);
                  }}
                >
                  {body}
                </a>
              </g>
            ) : (
              <g key={n.id} class={cls} transform={`translate(${n.x},${n.y})`} data-digest={d}>
                {body}
              </g>
            );
          })}
        </g>
      </svg>
    </section>
  );
}
