/**
 * Prometheus metrics of one server (its own registry, so several servers can live in one process):
 * requests and latencies by route and status, body bytes in and out, integrity failures, transitions
 * by target state, uploads in flight, Node's process metrics, and the telemetry outbox counters
 * (server.ts registers them; other services can add collectors through `ServerOptions.metricsCollectors`).
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { ServiceContext } from '../lifecycle/context.ts';
import type { TransactOp } from '../store/item-store.ts';

export type MetricsCollector = (registry: Registry, ctx: ServiceContext) => void;

export class ApiMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<'method' | 'route' | 'status'>;
  readonly duration: Histogram<'method' | 'route' | 'status'>;
  readonly bytesIn: Counter<'route'>;
  readonly bytesOut: Counter<'route'>;
  readonly integrityFailures: Counter<'operation'>;
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
      help: 'Bytes that did not match their digest: download (stored object corrupt, response aborted) or upload (client digest mismatch, nothing kept)',
      labelNames: ['operation'],
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

  /** Counts the transitions of a committed transaction (every Transition audit item it put). */
  observeCommit(ops: readonly TransactOp[]): void {
    for (const op of ops) {
      if (op.op === 'put' && op.item.type === 'transition' && typeof op.item.to === 'string') this.transitions.inc({ to: op.item.to });
    }
  }
}

/**
 * The context the server hands to services: the same stores, with committed transactions reported to
 * `onCommit` (for the transitions metric). Observation only: the operations pass through unchanged.
 */
export function observedContext(ctx: ServiceContext, onCommit: (ops: readonly TransactOp[]) => void): ServiceContext {
  const target = ctx.items;
  const transactWrite = async (ops: TransactOp[], ...rest: unknown[]) => {
    const result = await (target.transactWrite as (...a: unknown[]) => Promise<unknown>).call(target, ops, ...rest);
    try {
      onCommit(ops);
    } catch {
      // metrics never fail a write
    }
    return result;
  };
  const bound = new Map<PropertyKey, unknown>([['transactWrite', transactWrite]]);
  const items = new Proxy(target, {
    get(obj, prop) {
      const cached = bound.get(prop);
      if (cached !== undefined) return cached;
      const value = Reflect.get(obj, prop, obj);
      if (typeof value !== 'function') return value;
      const fn = value.bind(obj);
      bound.set(prop, fn);
      return fn;
    },
  });
  return { ...ctx, items };
}
