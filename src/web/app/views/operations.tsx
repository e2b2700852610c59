/**
 * Operations, read-only: versions per state (the store's own counts), integrity failures split by
 * cause (a refused upload is not damage), the telemetry outbox explained, retention's observations
 * and recent runs, and what this server process saw since it started. No maintenance action is
 * reachable from the browser (retention, recovery and telemetry delivery are CLI-only).
 */

import type { Principal } from '../api.ts';
import { type OperationsStatus, STATES, type StateCounts } from '../api.ts';
import { Digest, ErrorBox, Loading, PageTitle, Time, useApi, Who } from '../components.tsx';
import { formatBytes, formatCount, plural } from '../lib/format.ts';
import { Link } from '../router.tsx';

export function Operations() {
  const ops = useApi<OperationsStatus>('/v1/status/operations');
  const counts = useApi<StateCounts>('/v1/status/states');
  return (
    <section>
      <PageTitle title="Operations" />
      <p class="muted">
        Read-only figures from <code>/v1/status</code>. Retention runs, recovery and telemetry delivery are performed with the{' '}
        <code>alp</code> CLI, never from the browser.
      </p>
      <p>
        <button
          type="button"
          onClick={() => {
            ops.reload();
            counts.reload();
          }}
        >
          Refresh
        </button>{' '}
        <span class="muted small">
          as of <Time iso={ops.data?.at} />
        </span>
      </p>
      <ErrorBox error={ops.error} />
      <ErrorBox error={counts.error} />
      {!ops.data && !ops.error ? <Loading what="Loading the operations status" /> : null}
      <div class="ops-grid">
        {counts.data ? <StoreStates counts={counts.data} /> : null}
        {ops.data ? <Integrity ops={ops.data} /> : null}
        {ops.data ? <Telemetry ops={ops.data} /> : null}
        {ops.data ? <ThisServer ops={ops.data} /> : null}
      </div>
      {ops.data ? <Retention ops={ops.data} /> : null}
    </section>
  );
}

function StoreStates({ counts }: { counts: StateCounts }) {
  return (
    <section class="panel" aria-labelledby="ops-states">
      <h2 id="ops-states">Versions by state</h2>
      <p class="muted small" data-testid="states-source">
        {counts.source === 'index'
          ? 'Counted from the state index (the per-state counters are not backfilled yet: run alp maintenance recount-states).'
          : 'Kept by the store in the transaction of every state change: the whole installation, whichever server or CLI made the change.'}
      </p>
      <dl class="counts" data-testid="store-states">
        {STATES.map((s) => (
          <div key={s}>
            <dt>
              <Link href={`/artifacts?state=${s}`}>{s}</Link>
            </dt>
            <dd>{formatCount(counts.states[s] ?? 0)}</dd>
          </div>
        ))}
        <div class="total">
          <dt>Total</dt>
          <dd>
            {formatCount(counts.total)}
            {counts.exact ? '' : '+'}
          </dd>
        </div>
      </dl>
    </section>
  );
}

function Integrity({ ops }: { ops: OperationsStatus }) {
  const cause = ops.integrity_failures.by_cause ?? {};
  const client = cause.client_digest ?? 0;
  const stored = cause.stored_bytes ?? 0;
  return (
    <section class="panel" aria-labelledby="ops-integrity">
      <h2 id="ops-integrity">Integrity</h2>
      <p class="muted small">
        Counted by this server since it started (<Time iso={ops.since} />
        ).
      </p>
      <dl class="counts">
        <div>
          <dt>Stored bytes failed verification</dt>
          <dd class={stored > 0 ? 'bad' : 'ok'} data-testid="integrity-stored">
            {formatCount(stored)}
          </dd>
        </div>
        <div>
          <dt>Client sent a wrong digest</dt>
          <dd data-testid="integrity-client">{formatCount(client)}</dd>
        </div>
      </dl>
      <p class="small">
        {stored > 0 ? (
          <strong class="bad">Damage: a stored object no longer matches its digest (its download was aborted). </strong>
        ) : (
          'No stored object failed verification. '
        )}
        Check every object with <code>alp verify --all</code>.
      </p>
      <p class="muted small">
        A wrong client digest is a refused upload (HTTP 400, nothing kept), not damage: the client’s <code>Repr-Digest</code> did not match
        the body it sent.
      </p>
    </section>
  );
}

function Meter({
  id,
  label,
  value,
  max,
  format,
}: {
  id: string;
  label: string;
  value: number;
  max: number;
  format: (n: number) => string;
}) {
  return (
    <div class="meter-row">
      <label for={id}>
        {label}: {format(value)} of {format(max)}
      </label>
      <meter id={id} min={0} max={Math.max(1, max)} value={value} high={max * 0.8} low={max * 0.5} optimum={0} />
    </div>
  );
}

function Telemetry({ ops }: { ops: OperationsStatus }) {
  const t = ops.telemetry;
  return (
    <section class="panel" aria-labelledby="ops-telemetry">
      <h2 id="ops-telemetry">Telemetry outbox</h2>
      <p class="small" data-testid="telemetry-explained">
        Every audit write also puts a record in this bounded, durable outbox (in the store, for the whole installation). Nothing in the
        server sends it anywhere: an exporter drains it — <code>alp telemetry drain --to stdout</code> (or{' '}
        <code>--to http://127.0.0.1:PORT/PATH</code>) claims records, sends them and acknowledges them; <code>alp telemetry stats</code>{' '}
        prints these counters.
      </p>
      {!t ? (
        <p class="empty">The outbox has not been used yet.</p>
      ) : (
        <>
          <dl class="counts">
            <div>
              <dt>Accepted</dt>
              <dd data-testid="telemetry-accepted">{formatCount(t.accepted)}</dd>
            </div>
            <div>
              <dt>Delivered (acknowledged by an exporter)</dt>
              <dd>{formatCount(t.delivered)}</dd>
            </div>
            <div>
              <dt>Dropped (outbox full)</dt>
              <dd class={t.dropped > 0 ? 'bad' : ''}>{formatCount(t.dropped)}</dd>
            </div>
            <div>
              <dt>Exhausted attempts</dt>
              <dd class={t.exhausted > 0 ? 'bad' : ''}>{formatCount(t.exhausted)}</dd>
            </div>
          </dl>
          <Meter id="tel-records" label="Waiting records" value={t.live_records} max={t.limits.maxRecords} format={formatCount} />
          <Meter id="tel-bytes" label="Waiting bytes" value={t.live_bytes} max={t.limits.maxBytes} format={formatBytes} />
          <p class="muted small">
            <strong>Dropped</strong>: records not kept because the outbox was at its limit when they arrived (the audited change itself was
            committed; only its telemetry record is lost) — drain more often or raise the limits. <strong>Exhausted</strong>: records given
            up after {plural(t.limits.maxAttempts, 'delivery attempt')} without an acknowledgement.
          </p>
        </>
      )}
    </section>
  );
}

function ThisServer({ ops }: { ops: OperationsStatus }) {
  const entries = Object.entries(ops.transitions.by_state).sort((a, b) => b[1] - a[1]);
  return (
    <section class="panel" aria-labelledby="ops-server">
      <h2 id="ops-server">This server process</h2>
      <p class="muted small">
        Since it started (<Time iso={ops.since} />
        ): {plural(ops.uploads_in_flight, 'upload')} in flight now, {plural(ops.transitions.total, 'transition')} committed through it.
        Other servers and the CLI are not counted here: the store’s figures are under “Versions by state”.
      </p>
      {entries.length > 0 ? (
        <details>
          <summary>Transitions through this process, by target state</summary>
          <dl class="counts">
            {entries.map(([k, v]) => (
              <div key={k}>
                <dt>to {k}</dt>
                <dd>{formatCount(v)}</dd>
              </div>
            ))}
          </dl>
        </details>
      ) : null}
    </section>
  );
}

function Retention({ ops }: { ops: OperationsStatus }) {
  const obs = Object.entries(ops.retention.observations);
  const runs = ops.retention.recent_runs;
  return (
    <section class="panel" aria-labelledby="ops-retention">
      <h2 id="ops-retention">Retention</h2>
      <p class="muted small">
        Unreferenced objects retention has observed (grace, quarantine, purge), and its latest runs. Nothing is deleted on a timer; runs are
        approved by a human and performed with <code>alp retention run</code>.
      </p>
      <h3>Observations</h3>
      {obs.length === 0 ? (
        <p class="empty">No unreferenced object has been observed.</p>
      ) : (
        <table class="list">
          <thead>
            <tr>
              <th scope="col">State</th>
              <th scope="col">Objects</th>
              <th scope="col">Bytes</th>
            </tr>
          </thead>
          <tbody>
            {obs.map(([state, o]) => (
              <tr key={state}>
                <td>{state}</td>
                <td>{formatCount(o.count)}</td>
                <td>{formatBytes(o.bytes)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Recent runs</h3>
      {runs.length === 0 ? (
        <p class="empty">No retention run yet.</p>
      ) : (
        <table class="list responsive">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Action</th>
              <th scope="col">Epoch</th>
              <th scope="col">Approved by</th>
              <th scope="col">Evidence</th>
              <th scope="col">Plan</th>
              <th scope="col">Outcome</th>
            </tr>
          </thead>
          <tbody>
            {runs.map((r, i) => (
              <tr key={i}>
                <td data-label="When">
                  <Time iso={r.at as string} />
                </td>
                <td data-label="Action">{String(r.action ?? '')}</td>
                <td data-label="Epoch">{String(r.epoch ?? '')}</td>
                <td data-label="Approved by">{r.approved_by ? <Who p={r.approved_by as Principal} /> : '—'}</td>
                <td data-label="Evidence">{r.evidence_ref ? <code>{String(r.evidence_ref)}</code> : '—'}</td>
                <td data-label="Plan">
                  <Digest value={r.plan_digest as string} />
                </td>
                <td data-label="Outcome">{outcome(r)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function outcome(r: Record<string, unknown>): string {
  const skip = new Set(['action', 'epoch', 'plan_digest', 'at', 'approved_by', 'evidence_ref', 'type']);
  const parts: string[] = [];
  for (const [k, v] of Object.entries(r)) {
    if (skip.has(k)) continue;
    if (Array.isArray(v)) parts.push(`${k.replace(/_/g, ' ')}: ${v.length}`);
    else if (typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') parts.push(`${k.replace(/_/g, ' ')}: ${String(v)}`);
  }
  return parts.join(', ') || '—';
}
