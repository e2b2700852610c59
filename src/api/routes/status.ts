/**
 * Read-only status for dashboards and the web UI: how many versions are in each state, and the
 * operations figures (the telemetry outbox counters, retention's observations and recent runs, this
 * server's integrity failures and transitions). Nothing here changes anything: retention and the
 * telemetry claim stay CLI-only.
 */
import { Type } from '@sinclair/typebox';
import { countVersionsByState, MAX_COUNTED_PER_STATE } from '../../lifecycle/queries.ts';
import { retentionStatus } from '../../retention/report.ts';
import { telemetryCounters } from '../../telemetry/metrics.ts';
import { type AnyRouteDef, type Api, defineRoute } from '../define.ts';

const open = { additionalProperties: true } as const;
const Count = Type.Integer({ minimum: 0 });
export const StateCounts = Type.Object(
  {
    states: Type.Record(Type.String(), Count, { description: 'versions per state' }),
    total: Count,
    exact: Type.Boolean({
      description: 'true from the per-state counters; from the index fallback, false when a state holds more versions than are counted',
    }),
    source: Type.Optional(
      Type.Union([Type.Literal('counters'), Type.Literal('index')], {
        description: '`counters`: kept with every state change; `index`: paged from the state index (counters not backfilled yet)',
      }),
    ),
    at: Type.String(),
  },
  open,
);
export const OperationsStatus = Type.Object(
  {
    at: Type.String(),
    since: Type.String({ description: 'when this server process started (its own counters start there)' }),
    telemetry: Type.Union([Type.Object({}, open), Type.Null()], {
      description: 'the outbox counters and limits; null before its first use',
    }),
    retention: Type.Object(
      {
        observations: Type.Record(Type.String(), Type.Object({ count: Count, bytes: Count }, open)),
        recent_runs: Type.Array(Type.Object({}, open)),
      },
      open,
    ),
    integrity_failures: Type.Object(
      {
        total: Count,
        by_operation: Type.Record(Type.String(), Count),
        by_cause: Type.Record(Type.String(), Count, {
          description:
            '`client_digest`: uploads refused because the body did not match the client’s digest (nothing kept, no damage); `stored_bytes`: stored objects that failed verification while served',
        }),
      },
      open,
    ),
    transitions: Type.Object({ total: Count, by_state: Type.Record(Type.String(), Count) }, open),
    uploads_in_flight: Count,
  },
  open,
);

async function counterValues(metric: { get(): Promise<{ values: Array<{ value: number; labels: object }> }> }, label: string) {
  const out: Record<string, number> = {};
  for (const v of (await metric.get()).values) {
    const key = String((v.labels as Record<string, unknown>)[label] ?? '');
    out[key] = (out[key] ?? 0) + v.value;
  }
  return out;
}

export function statusRoutes(api: Api): AnyRouteDef[] {
  const started = api.ctx.clock.now().toISOString();
  return [
    defineRoute({
      id: 'statusStates',
      summary: 'How many versions are in each state (read-only)',
      description: `From the per-state counters kept in the transaction of every state change (exact; one read of the counter shards). An installation whose counters were not backfilled yet counts from the state index (eventually consistent on DynamoDB), at most ${MAX_COUNTED_PER_STATE} per state; \`exact\` is false when a state has more.`,
      tags: ['status'],
      schema: { response: { 200: StateCounts } },
      handler: async () => ({ ...(await countVersionsByState(api.ctx)), at: api.ctx.clock.now().toISOString() }),
    }),
    defineRoute({
      id: 'statusOperations',
      summary: 'Operations status (read-only): telemetry outbox counters, retention observations and runs, integrity failures',
      description:
        'The telemetry counters and retention figures are persisted (the whole installation); integrity failures, transitions and uploads in flight are this server process’s since `since`. No maintenance action is reachable over HTTP.',
      tags: ['status'],
      schema: { response: { 200: OperationsStatus } },
      handler: async () => {
        const telemetry = await telemetryCounters(api.ctx.items);
        const retention = await retentionStatus(api.ctx);
        const runs = (retention.recent_runs as Array<Record<string, unknown>>).map(({ restore: _r, ...run }) => run);
        const integrity = await counterValues(api.metrics.integrityFailures, 'operation');
        const integrityCauses = await counterValues(api.metrics.integrityFailures, 'cause');
        const transitions = await counterValues(api.metrics.transitions, 'to');
        const inFlight = (await api.metrics.uploadsInFlight.get()).values[0]?.value ?? 0;
        return {
          at: api.ctx.clock.now().toISOString(),
          since: started,
          telemetry: telemetry ?? null,
          retention: { observations: retention.observations, recent_runs: runs },
          integrity_failures: {
            total: Object.values(integrity).reduce((a, b) => a + b, 0),
            by_operation: integrity,
            by_cause: integrityCauses,
          },
          transitions: { total: Object.values(transitions).reduce((a, b) => a + b, 0), by_state: transitions },
          uploads_in_flight: inFlight,
        };
      },
    }),
  ];
}
