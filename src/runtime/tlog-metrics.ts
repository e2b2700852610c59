/**
 * The transparency log's sequencer on `/metrics` (Prometheus), from this node's loop (tlog-loop.ts):
 * whether it holds the lease, its rounds and failed rounds, when its last round ended and the log's
 * size then. An alert on `time() - alp_tlog_last_round_timestamp_seconds` of the node that holds the
 * lease (a few intervals) catches a stuck sequencer; `alp_tlog_round_failures_total` rising, a failing one.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { LogLoopStatus } from './tlog-loop.ts';

/** Registers the alp_tlog_* metrics on `registry`; `status` is read at scrape time (undefined: no loop yet). */
export function registerLogLoopMetrics(registry: Registry, status: () => LogLoopStatus | undefined): void {
  const counters: Array<[string, string, (s: LogLoopStatus) => number]> = [
    ['alp_tlog_rounds_total', 'Transparency-log rounds this node ran holding the sequencer lease', (s) => s.rounds],
    ['alp_tlog_round_failures_total', 'Transparency-log rounds that failed on this node (the next one retries)', (s) => s.failures],
  ];
  for (const [name, help, pick] of counters)
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        const s = status();
        this.reset();
        if (s) this.inc(pick(s));
      },
    });
  const gauges: Array<[string, string, (s: LogLoopStatus) => number]> = [
    ['alp_tlog_sequencer_holding', '1 while this node holds the sequencer lease (it sequences), else 0', (s) => (s.holding ? 1 : 0)],
    [
      'alp_tlog_last_round_timestamp_seconds',
      "When this node's last transparency-log round ended without an error (unix seconds; 0 before the first)",
      (s) => (s.lastRoundAt ?? 0) / 1000,
    ],
    ['alp_tlog_leaves', "The transparency log's size after this node's last round", (s) => s.size ?? 0],
  ];
  for (const [name, help, pick] of gauges)
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        const s = status();
        this.set(s ? pick(s) : 0);
      },
    });
}
