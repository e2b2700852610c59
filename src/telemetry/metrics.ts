/**
 * The telemetry queue's persisted counters for `/metrics` (Prometheus) and status pages, summed over
 * its shards. One strongly consistent read per shard per scrape (the root get, then batchGets), shared
 * by every metric of that scrape.
 *
 * The HTTP server calls `registerTelemetryMetrics(registry, ctx.items)` once at start-up with the
 * prom-client Registry it serves on /metrics (or passes `telemetryMetricsCollector` as a metrics
 * collector); nothing else is needed.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ItemStore } from '../store/item-store.ts';
import type { TelemetryLimits } from './limits.ts';
import { readQueueStates, type TelemetryCounters, totalCounters } from './shards.ts';

export interface TelemetrySnapshot extends TelemetryCounters {
  limits: TelemetryLimits;
}

/** The counters and limits as persisted, or undefined when the queue was never initialised. */
export async function telemetryCounters(items: ItemStore): Promise<TelemetrySnapshot | undefined> {
  const states = await readQueueStates(items);
  if (!states) return undefined;
  const n = (k: string) => (typeof states.root[k] === 'number' ? (states.root[k] as number) : 0);
  return {
    ...totalCounters(states),
    limits: { maxRecords: n('max_records'), maxBytes: n('max_bytes'), maxAttempts: n('max_attempts') },
  };
}

/** Registers the telemetry metrics (alp_telemetry_*) on `registry`; values are read at scrape time. */
export function registerTelemetryMetrics(registry: Registry, items: ItemStore): void {
  let pending: Promise<TelemetrySnapshot | undefined> | undefined;
  // Every metric of one scrape starts collecting synchronously, so they share one read.
  const read = () => {
    pending ??= telemetryCounters(items).finally(() => {
      pending = undefined;
    });
    return pending;
  };
  const counters: Array<[keyof TelemetryCounters, string]> = [
    ['accepted', 'Telemetry records admitted to the outbox'],
    ['delivered', 'Telemetry records acknowledged as delivered'],
    ['dropped', 'Telemetry records dropped because the outbox was full (the audit writes committed)'],
    ['exhausted', 'Telemetry records that ran out of delivery attempts'],
  ];
  for (const [name, help] of counters) {
    new Counter({
      name: `alp_telemetry_${name}_total`,
      help,
      registers: [registry],
      async collect() {
        const s = await read();
        this.reset();
        if (s) this.inc(s[name]);
      },
    });
  }
  const gauges: Array<[string, string, (s: TelemetrySnapshot) => number]> = [
    ['alp_telemetry_live_records', 'Telemetry records queued or leased', (s) => s.live_records],
    ['alp_telemetry_live_bytes', 'Payload bytes of the telemetry records queued or leased', (s) => s.live_bytes],
    ['alp_telemetry_max_records', 'Persisted limit: live telemetry records', (s) => s.limits.maxRecords],
    ['alp_telemetry_max_bytes', 'Persisted limit: live telemetry payload bytes', (s) => s.limits.maxBytes],
    ['alp_telemetry_max_attempts', 'Persisted limit: delivery attempts per record', (s) => s.limits.maxAttempts],
  ];
  for (const [name, help, pick] of gauges) {
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const s = await read();
        this.set(s ? pick(s) : 0);
      },
    });
  }
}

/**
 * The same, shaped as the HTTP server's metrics collector hook (`(registry, ctx) => void`, see
 * src/api/metrics.ts `ServerOptions.metricsCollectors`).
 */
export function telemetryMetricsCollector(registry: Registry, ctx: { items: ItemStore }): void {
  registerTelemetryMetrics(registry, ctx.items);
}
