/**
 * One version: its facts, the approval flow for humans (the exact digest being approved is shown and
 * sent as `content_hash`), the decisions already given on it, and its verified content.
 */
import { useState } from 'preact/hooks';
import { DownloadButton } from '../actions.tsx';
import { ApiError, type Approval, type ArtifactWithVersions, api, type Principal, type Version } from '../api.ts';
import { CopyButton, Digest, ErrorBox, type Fact, Facts, Loading, StateBadge, Time, useApi, Who } from '../components.tsx';
import { approvalStanding, latestRounds, standingText } from '../lib/approvals.ts';
import { formatBytes, formatTime, shortDigest } from '../lib/format.ts';
import { Link } from '../router.tsx';
import { DecisionWord, StandingNote } from './approvals.tsx';
import { ChangesSincePrevious, ProvenanceSummary } from './review.tsx';
import { PolicyNote } from './review-policy.tsx';
import { ByteViewer } from './viewer.tsx';

export function VersionView({
  art,
  version,
  principal,
  onChanged,
}: {
  art: ArtifactWithVersions;
  version: number;
  principal: Principal;
  onChanged: () => void;
}) {
  const v = art.versions.find((x) => x.version === version);
  const [done, setDone] = useState<string | undefined>(undefined);
  const approvals = useApi<{ approvals: Approval[] }>(`/v1/artifacts/${art.artifact_id}/approvals`);
  if (!v) {
    return (
      <ErrorBox
        error={new ApiError({ status: 404, title: 'Not found', code: 'NOT_FOUND', detail: `${art.name} has no version ${version}` })}
      />
    );
  }
  const mine = (approvals.data?.approvals ?? []).filter((a) => a.version === v.version);
  const prev = art.versions.filter((x) => x.version < v.version).sort((a, b) => b.version - a.version)[0];
  return (
    <>
      <section aria-labelledby="version-h">
        <h2 id="version-h">
          Version {v.version} <StateBadge state={v.state} />
        </h2>
        <Facts
          items={[
            ['State', <span data-testid="version-state">{v.state}</span>],
            ['File', v.filename],
            ['Size', `${formatBytes(v.size)} (${v.size.toLocaleString('en-US')} bytes)`],
            ['Digest', <Digest value={v.content_hash} full copy />, true],
            [
              'Created',
              <span>
                <Time iso={v.created_at} /> by <Who p={v.created_by} />
              </span>,
              true,
            ],
            ['State since', <Time iso={v.state_changed_at ?? v.created_at} />],
            ...(v.archive_key ? ([['Archive key', <code class="key">{v.archive_key}</code>, true]] as Fact[]) : []),
          ]}
        />
        <p class="links">
          {prev ? (
            <Link href={`/artifacts/${art.artifact_id}/diff?a=${prev.version}&b=${v.version}`}>Compare with v{prev.version}</Link>
          ) : null}
          {v.state === 'PROPOSED' && principal.kind === 'human' ? <a href="#decide-h">Go to the review decision</a> : null}
        </p>
      </section>
      <section aria-labelledby="content-h">
        <h2 id="content-h">Content</h2>
        <p class="links">
          <DownloadButton
            path={`/v1/artifacts/${art.artifact_id}/versions/${v.version}/content`}
            filename={v.filename}
            digest={v.content_hash}
            size={v.size}
          />
        </p>
        <ByteViewer
          key={`${art.artifact_id}/${v.version}`}
          path={`/v1/artifacts/${art.artifact_id}/versions/${v.version}/content`}
          size={v.size}
          digest={v.content_hash}
          label={`${v.filename} (v${v.version})`}
          json={v.filename.endsWith('.json')}
        />
      </section>
      {prev ? <ChangesSincePrevious art={art} prev={prev} v={v} /> : null}
      <ProvenanceSummary art={art} v={v} />
      {v.state === 'PROPOSED' ? (
        <DecisionPanel
          art={art}
          v={v}
          principal={principal}
          counted={countedNow(mine, v)}
          onDecided={(message) => {
            setDone(message);
            approvals.reload();
            onChanged();
          }}
        />
      ) : null}
      {done ? (
        <p class="ok panel" role="status" data-testid="decision-done">
          {done} <span class="muted small">({formatTime(new Date().toISOString())})</span>
        </p>
      ) : null}
      <section aria-labelledby="decisions-h">
        <h2 id="decisions-h">Decisions on this version</h2>
        <ErrorBox error={approvals.error} />
        {!approvals.data && !approvals.error ? <Loading /> : null}
        {approvals.data && mine.length === 0 ? <p class="empty">No approval or rejection yet.</p> : null}
        {mine.length > 0 ? <DecisionList decisions={mine} /> : null}
      </section>
    </>
  );
}

/** The decisions given on one version: who, when, evidence, bound digest, counted or not, and the comment. */
function DecisionList({ decisions }: { decisions: Approval[] }) {
  const now = Date.now();
  const rounds = latestRounds(decisions);
  return (
    <ul class="decisions">
      {decisions.map((a) => {
        const standing = approvalStanding(a, now, rounds.get(a.version));
        return (
          <li key={a.seq} data-testid="decision">
            <DecisionWord decision={a.decision} standing={standing} /> by <Who p={a.actor} /> <Time iso={a.timestamp} /> — evidence{' '}
            <code class="wrap">{a.evidence_ref}</code>, bound to <Digest value={a.content_hash} />
            {a.decision === 'APPROVE' ? (
              <>
                {' '}
                — <StandingNote standing={standing} />
              </>
            ) : null}
            {a.comment ? (
              <blockquote class="comment" data-testid="decision-comment">
                <span class="sr-only">Comment: </span>
                {a.comment}
              </blockquote>
            ) : null}
          </li>
        );
      })}
    </ul>
  );
}

/** Distinct humans whose approval of this content counts now. */
function countedNow(approvals: Approval[], v: Version): number {
  const now = Date.now();
  const rounds = latestRounds(approvals);
  const who = new Set<string>();
  for (const a of approvals) {
    if (a.content_hash !== v.content_hash) continue;
    if (approvalStanding(a, now, rounds.get(a.version)).kind === 'counted') who.add(a.actor.id.toLowerCase());
  }
  return who.size;
}

const EXPIRIES: Array<[string, string]> = [
  ['1d', '1 day'],
  ['7d', '7 days'],
  ['30d', '30 days'],
  ['90d', '90 days'],
];

function DecisionPanel({
  art,
  v,
  principal,
  counted,
  onDecided,
}: {
  art: ArtifactWithVersions;
  v: Version;
  principal: Principal;
  counted: number;
  onDecided: (message: string) => void;
}) {
  const [evidence, setEvidence] = useState('');
  const [expires, setExpires] = useState('7d');
  const [comment, setComment] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);

  if (principal.kind !== 'human') {
    return (
      <section aria-labelledby="decide-h" class="panel decide" data-testid="decision-panel">
        <h2 id="decide-h">Review decision</h2>
        <p data-testid="not-human">
          Only <strong>human</strong> principals can approve or reject a version. You are signed in as <Who p={principal} />, so no decision
          can be made here; a human has to review this version.
        </p>
      </section>
    );
  }

  const submit = async (e: Event) => {
    e.preventDefault();
    const submitter = (e as SubmitEvent).submitter as HTMLButtonElement | null;
    const decision = submitter?.value === 'REJECT' ? 'REJECT' : 'APPROVE';
    setBusy(true);
    setError(undefined);
    try {
      const body: Record<string, string> = {
        decision,
        evidence_ref: evidence.trim(),
        expires_in: expires,
        content_hash: v.content_hash,
      };
      if (comment.trim()) body.comment = comment.trim();
      const r = await api<{ approval: Approval; version: Version }>(`/v1/artifacts/${art.artifact_id}/versions/${v.version}/approvals`, {
        method: 'POST',
        json: body,
      });
      const a = r.approval;
      setEvidence('');
      setComment('');
      onDecided(
        `${a.decision === 'APPROVE' ? 'Approval' : 'Rejection'} recorded for ${shortDigest(a.content_hash)}` +
          `${a.decision === 'APPROVE' ? ` (${standingText(approvalStanding(a, Date.now()))})` : ''}. ` +
          `Version ${r.version.version} is now ${r.version.state}.`,
      );
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="decide-h" class="panel decide" data-testid="decision-panel">
      <h2 id="decide-h">Review decision</h2>
      <p>
        You are deciding on exactly this content of {art.name} v{v.version}:
      </p>
      <p class="approve-digest">
        <code class="digest digest-full" data-testid="approve-digest">
          {v.content_hash}
        </code>{' '}
        <CopyButton value={v.content_hash} />
      </p>
      <p class="muted">
        {v.filename}, {formatBytes(v.size)}. The decision is bound to this digest: if the content were different, the approval would not
        count.
      </p>
      <PolicyNote key={`${v.state}-${counted}`} artifactId={art.artifact_id} version={v.version} />
      <form onSubmit={submit} class="decide-form">
        <div class="field">
          <label for="evidence">Evidence reference</label>
          <input
            id="evidence"
            required
            maxLength={2000}
            value={evidence}
            aria-describedby="evidence-help"
            onInput={(e) => setEvidence((e.target as HTMLInputElement).value)}
          />
          <p id="evidence-help" class="help">
            A ticket, review or test run that supports the decision (required).
          </p>
        </div>
        <div class="field">
          <label for="expires">Approval expires after</label>
          <select id="expires" value={expires} onChange={(e) => setExpires((e.target as HTMLSelectElement).value)}>
            {EXPIRIES.map(([value, text]) => (
              <option key={value} value={value}>
                {text}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="comment">Comment (optional)</label>
          <textarea
            id="comment"
            rows={2}
            maxLength={4000}
            value={comment}
            onInput={(e) => setComment((e.target as HTMLTextAreaElement).value)}
          />
        </div>
        <div class="actions">
          <button type="submit" name="decision" value="APPROVE" class="primary" disabled={busy}>
            Approve {shortDigest(v.content_hash, 8)}
          </button>
          <button type="submit" name="decision" value="REJECT" class="danger" disabled={busy}>
            Reject
          </button>
        </div>
      </form>
      <ErrorBox error={error} what="Decision refused" />
    </section>
  );
}
