/**
 * What a reviewer needs beside a version's content: the change against the previous version (the
 * diff view's line diff, inline) and a provenance summary — the steps that made this content and the
 * steps that used it, with their inputs and outputs named where they are known.
 */
import type { ArtifactWithVersions, ProvenanceStep, Version } from '../api.ts';
import { ErrorBox, Loading, Time, useApi } from '../components.tsx';
import { Link } from '../router.tsx';
import { DiffBody } from './diff.tsx';
import { DigestName, isClaimed, recorder, useDigestIndex } from './provenance.tsx';

export function ChangesSincePrevious({ art, prev, v }: { art: ArtifactWithVersions; prev: Version; v: Version }) {
  return (
    <section aria-labelledby="changes-h" data-testid="changes">
      <h2 id="changes-h">
        Changes since v{prev.version} <span class="muted small">({prev.state})</span>
      </h2>
      <DiffBody key={`${prev.version}-${v.version}`} art={art} va={prev} vb={v} />
      <p class="small">
        <Link href={`/artifacts/${art.artifact_id}/diff?a=${prev.version}&b=${v.version}`}>Compare other versions</Link>
      </p>
    </section>
  );
}

function StepLine({ st, index, kind }: { st: ProvenanceStep; index: ReturnType<typeof useDigestIndex>; kind: 'made' | 'used' }) {
  const others = kind === 'made' ? st.inputs : st.outputs;
  return (
    <li data-testid={`provenance-${kind}`}>
      <strong>
        Step {st.step}: {st.action}
      </strong>{' '}
      recorded by {recorder(st)}
      {isClaimed(st) ? <span class="claimed"> (claimed actor: {st.actor})</span> : null}
      {st.model ? `, model ${st.model}` : ''}
      {st.tool ? `, tool ${st.tool}` : ''}, <Time iso={st.timestamp} />
      {st.note ? <div class="muted">{st.note}</div> : null}
      <div>
        {kind === 'made' ? 'from ' : 'producing '}
        {others.length ? others.map((d) => <DigestName key={d} d={d} index={index} />) : 'nothing named'}
      </div>
    </li>
  );
}

export function ProvenanceSummary({ art, v }: { art: ArtifactWithVersions; v: Version }) {
  const prov = useApi<{ steps: ProvenanceStep[] }>(`/v1/artifacts/${art.artifact_id}/provenance`);
  const index = useDigestIndex(art, undefined);
  const steps = prov.data?.steps ?? [];
  const made = steps.filter((st) => st.outputs.includes(v.content_hash));
  const used = steps.filter((st) => st.inputs.includes(v.content_hash));
  return (
    <section aria-labelledby="prov-summary-h" data-testid="provenance-summary">
      <h2 id="prov-summary-h">Provenance of this content</h2>
      <ErrorBox error={prov.error} />
      {!prov.data && !prov.error ? <Loading what="Loading provenance" /> : null}
      {prov.data && made.length === 0 ? (
        <p class="empty">No provenance step names this content as its output: where it came from is not recorded.</p>
      ) : null}
      {made.length > 0 ? (
        <>
          <h3>Made by</h3>
          <ul class="prov-summary">
            {made.map((st) => (
              <StepLine key={st.step} st={st} index={index} kind="made" />
            ))}
          </ul>
        </>
      ) : null}
      {used.length > 0 ? (
        <>
          <h3>Used by</h3>
          <ul class="prov-summary">
            {used.map((st) => (
              <StepLine key={st.step} st={st} index={index} kind="used" />
            ))}
          </ul>
        </>
      ) : null}
      {steps.length > 0 ? (
        <p class="small">
          <Link href={`/artifacts/${art.artifact_id}/provenance`}>
            The artifact’s provenance graph ({steps.length} step{steps.length === 1 ? '' : 's'})
          </Link>
        </p>
      ) : null}
    </section>
  );
}
