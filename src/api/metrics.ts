/**
 * Why bytes failed their digest: the client's claim was wrong (a refused upload, not damage), or the
 * stored bytes no longer match (damage, found while serving them).
 */
export type IntegrityCause = 'client_digest' | 'stored_bytes';

/**
 * Prometheus metrics of one server (its own registry, so several servers can live in one process):
 * requests and latencies by route and status, body bytes in and out, integrity failures, transitions
 * by target state, uploads in flight, Node's process metrics, and the telemetry outbox counters
 * (server.ts registers them; other services can add collectors through `ServerOptions.metricsCollectors`).
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { AuditSink, ServiceContext } from '../system/context.ts';

export type MetricsCollector = (registry: Registry, ctx: ServiceContext) => void;

export class ApiMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<'method' | 'route' | 'status'>;
  readonly duration: Histogram<'method' | 'route' | 'status'>;
  readonly bytesIn: Counter<'route'>;
  readonly bytesOut: Counter<'route'>;
  readonly integrityFailures: Counter<'operation' | 'cause'>;
  readonly transitions: Counter<'to'>;
  readonly uploadsInFlight: Gauge;

  constructor(opts: { processMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'alp_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.duration = new Histogram({
      name: 'alp_http_request_duration_seconds',
      help: 'HTTP request latency from the first byte received to the last byte sent',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.bytesIn = new Counter({
      name: 'alp_http_request_body_bytes_total',
      help: 'Request body bytes read, by route pattern',
      labelNames: ['route'],
      registers,
    });
    this.bytesOut = new Counter({
      name: 'alp_http_response_body_bytes_total',
      help: 'Response body bytes sent, by route pattern',
      labelNames: ['route'],
      registers,
    });
    this.integrityFailures = new Counter({
      name: 'alp_integrity_failures_total',
      help: 'Bytes that did not match their digest, by cause: client_digest (an upload whose body did not match the digest the client sent: refused, nothing kept, no damage) or stored_bytes (a stored object that failed verification while served: the response was aborted)',
      labelNames: ['operation', 'cause'],
      registers,
    });
    this.transitions = new Counter({
      name: 'alp_transitions_total',
      help: 'Version state transitions committed through this server, by target state',
      labelNames: ['to'],
      registers,
    });
    this.uploadsInFlight = new Gauge({ name: 'alp_uploads_in_flight', help: 'Uploads being streamed to the content store', registers });
    if (opts.processMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  /**
   * The audit sink of this server's transitions metric: adds nothing to the audit transaction, and
   * counts the Transition entries of every transaction that committed through the server's context.
   */
  auditSink(): AuditSink {
    return {
      opsFor: async () => ({ ops: [], fallback: [] }),
      committed: (entries) => {
        for (const e of entries) if (e.type === 'transition' && typeof e.to === 'string') this.transitions.inc({ to: e.to });
      },
    };
  }
}

/**
 * The context the server hands to services: the same stores and sinks, plus the server's metrics
 * sink (its own array, so the sink counts only what is written through this server).
 */
export function withMetricsSink(ctx: ServiceContext, metrics: ApiMetrics): ServiceContext {
  return { ...ctx, auditSinks: [...ctx.auditSinks, metrics.auditSink()] };
}
