import { markersEnabled } from '../audit/tlog/markers.ts';
import type { ServiceContext } from '../system/context.ts';
import { type TelemetryLimits, telemetryLimitsFromEnv } from '../telemetry/limits.ts';
import { TelemetryQueue } from '../telemetry/queue.ts';

/**
 * Turns the transparency log's pending markers off when ALP_TLOG_MARKERS=off (a benchmark's reference
 * run only; audit/tlog/markers.ts), and plugs the telemetry outbox into the audit transaction of
 * every entry point (CLI, HTTP server): each
 * audit insert also enqueues one record per event, or counts a drop when the event's shard is full
 * (the installation's layout.telemetry_shards, used when this process initialises the outbox).
 *
 * Attaching does no I/O (on DynamoDB the table may not exist before `alp init`): the queue is opened
 * on the first audit write of the process, one get, creating it with the stated or default limits if
 * it was never initialised. Limits stated by this process (`limits`, else ALP_TELEMETRY_MAX_RECORDS /
 * _MAX_BYTES / _MAX_ATTEMPTS) that differ from the persisted ones are refused at that point.
 */
export async function attachAuditSinks(ctx: ServiceContext, opts: { limits?: Partial<TelemetryLimits> } = {}): Promise<TelemetryQueue> {
  const queue = new TelemetryQueue(ctx.items, opts.limits ?? telemetryLimitsFromEnv(), {
    clock: ctx.clock,
    shards: ctx.layout.telemetry_shards,
  });
  if (!markersEnabled()) ctx.tlogMarkers = false;
  ctx.auditSinks.push(queue.auditSink());
  return queue;
}
