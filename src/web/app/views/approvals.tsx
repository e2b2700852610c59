/** Every approval and rejection of the artifact: who, evidence, bound digest, expiry, counted or not and why. */
import type { Approval, ArtifactWithVersions } from '../api.ts';
import { Digest, ErrorBox, Loading, Time, useApi, Who } from '../components.tsx';
import { approvalStanding, latestRounds, type Standing, splitDigests } from '../lib/approvals.ts';
import { Link } from '../router.tsx';

/** A text with the digests it names shown short (each with its full value in the title). */
export function TextWithDigests({ text }: { text: string }) {
  return <>{splitDigests(text).map((p, i) => ('digest' in p ? <Digest key={i} value={p.digest} /> : <span key={i}>{p.text}</span>))}</>;
}

/** Counted, not counted (and why), no longer counted (and why), or a rejection. */
export function StandingNote({ standing }: { standing: Standing }) {
  return (
    <span class={`standing standing-${standing.kind}`} data-testid="standing">
      <strong>{standing.label}</strong>
      {'reason' in standing ? (
        <>
          : <TextWithDigests text={standing.reason} />
        </>
      ) : null}
    </span>
  );
}

/** "Approved" in green only for an approval that counts; one that does not is "Approval", in grey. */
export function DecisionWord({ decision, standing, verb = true }: { decision: string; standing: Standing; verb?: boolean }) {
  if (decision !== 'APPROVE') return <span class="decision decision-reject">{verb ? 'Rejected' : 'Reject'}</span>;
  const counts = standing.kind === 'counted';
  return (
    <span class={`decision ${counts ? 'decision-approve' : 'decision-void'}`}>
      {counts && verb ? 'Approved' : verb ? 'Approval' : 'Approve'}
    </span>
  );
}

export function ApprovalsTab({ art }: { art: ArtifactWithVersions }) {
  const list = useApi<{ approvals: Approval[] }>(`/v1/artifacts/${art.artifact_id}/approvals`);
  const now = Date.now();
  const digestOf = new Map(art.versions.map((v) => [v.version, v.content_hash]));
  const rounds = latestRounds(list.data?.approvals ?? []);
  return (
    <section aria-labelledby="approvals-h">
      <h2 id="approvals-h">Approvals</h2>
      <p class="muted">
        Quorum: {art.quorum} distinct human approval{art.quorum === 1 ? '' : 's'} of the current proposal, each bound to the version’s
        digest and unexpired. An approval that binds another digest, or had expired when given, is recorded but not counted. A rejection
        moves the version to REJECTED.
      </p>
      <ErrorBox error={list.error} />
      {!list.data && !list.error ? <Loading what="Loading approvals" /> : null}
      {list.data && list.data.approvals.length === 0 ? <p class="empty">No decision has been given on this artifact.</p> : null}
      {list.data && list.data.approvals.length > 0 ? (
        <table class="list responsive approvals">
          <thead>
            <tr>
              <th scope="col">Version</th>
              <th scope="col">Decision</th>
              <th scope="col">Who</th>
              <th scope="col">Evidence</th>
              <th scope="col">Bound digest</th>
              <th scope="col">Expires</th>
              <th scope="col">Counted</th>
              <th scope="col">When</th>
            </tr>
          </thead>
          <tbody>
            {[...list.data.approvals].reverse().map((a) => {
              const expired = Date.parse(a.expires_at) <= now;
              const matches = digestOf.get(a.version) === a.content_hash;
              const standing = approvalStanding(a, now, rounds.get(a.version));
              return (
                <tr key={a.seq} class={`decision-row standing-row-${standing.kind}`}>
                  <td data-label="Version">
                    <Link href={`/artifacts/${art.artifact_id}/versions/${a.version}`}>v{a.version}</Link>{' '}
                    <span class="muted small">round {a.round}</span>
                  </td>
                  <td data-label="Decision">
                    <DecisionWord decision={a.decision} standing={standing} verb={false} />
                  </td>
                  <td data-label="Who">
                    <Who p={a.actor} />
                  </td>
                  <td data-label="Evidence">
                    <code class="wrap">{a.evidence_ref}</code>
                    {a.comment ? <div class="muted small">“{a.comment}”</div> : null}
                  </td>
                  <td data-label="Bound digest">
                    <Digest value={a.content_hash} copy />
                    <div class={`small ${matches ? 'muted' : 'bad'}`}>
                      {matches ? 'the version’s content' : 'not the version’s content'}
                    </div>
                  </td>
                  <td data-label="Expires">
                    <Time iso={a.expires_at} />
                    {expired ? <div class="bad small">expired</div> : null}
                  </td>
                  <td data-label="Counted">
                    <StandingNote standing={standing} />
                  </td>
                  <td data-label="When">
                    <Time iso={a.timestamp} />
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
