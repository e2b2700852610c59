/** Every approval and rejection of the artifact: who, evidence, bound digest, expiry, counted or not and why. */
import type { Approval, ArtifactWithVersions } from '../api.ts';
import { Digest, ErrorBox, Loading, Time, useApi, Who } from '../components.tsx';
import { Link } from '../router.tsx';

export function ApprovalsTab({ art }: { art: ArtifactWithVersions }) {
  const list = useApi<{ approvals: Approval[] }>(`/v1/artifacts/${art.artifact_id}/approvals`);
  const now = Date.now();
  const digestOf = new Map(art.versions.map((v) => [v.version, v.content_hash]));
  return (
    <section aria-labelledby="approvals-h">
      <h2 id="approvals-h">Approvals</h2>
      <p class="muted">
        Quorum: {art.quorum} distinct human approval{art.quorum === 1 ? '' : 's'} of the current proposal, each bound to the version’s
        digest and unexpired. A rejection moves the version to REJECTED.
      </p>
      <ErrorBox error={list.error} />
      {!list.data && !list.error ? <Loading what="Loading approvals" /> : null}
      {list.data && list.data.approvals.length === 0 ? <p class="empty">No decision has been given on this artifact.</p> : null}
      {list.data && list.data.approvals.length > 0 ? (
        <table class="list responsive">
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
              return (
                <tr key={a.seq}>
                  <td data-label="Version">
                    <Link href={`/artifacts/${art.artifact_id}/versions/${a.version}`}>v{a.version}</Link>{' '}
                    <span class="muted small">round {a.round}</span>
                  </td>
                  <td data-label="Decision">
                    <span class={`decision decision-${a.decision.toLowerCase()}`}>{a.decision === 'APPROVE' ? 'Approve' : 'Reject'}</span>
                  </td>
                  <td data-label="Who">
                    <Who p={a.actor} />
                  </td>
                  <td data-label="Evidence">
                    <code>{a.evidence_ref}</code>
                    {a.comment ? <div class="muted small">“{a.comment}”</div> : null}
                  </td>
                  <td data-label="Bound digest">
                    <Digest value={a.content_hash} />
                    <div class={`small ${matches ? 'muted' : 'bad'}`}>
                      {matches ? 'the version’s content' : 'not the version’s content'}
                    </div>
                  </td>
                  <td data-label="Expires">
                    <Time iso={a.expires_at} />
                    {expired ? <div class="bad small">expired</div> : null}
                  </td>
                  <td data-label="Counted">
                    {a.decision === 'REJECT' ? (
                      <span>rejection</span>
                    ) : a.counted ? (
                      <span class="ok">yes{expired ? ' (until it expired)' : ''}</span>
                    ) : (
                      <span class="bad">no — {a.not_counted_reason ?? 'no reason recorded'}</span>
                    )}
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
