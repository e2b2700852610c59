/**
 * An example exporter loop (seed 004's snippet, as a service): claim a batch, hand it to `send`, let
 * the other exporters settle it (`settle`: the webhook deliveries, so the dispatcher and this exporter
 * each get every record), acknowledge its records (acknowledgeAll: the same rules as acknowledge, fewer
 * transactions), repeat until nothing is available. Transport, credentials and collector
 * approval are the host's (the CLI offers stdout and a loopback HTTP POST); a batch whose send fails
 * is not acknowledged, so its leases expire and the records are retried (at least once, best effort).
 */
import type { Clock } from '../core/clock.ts';
import type { ClaimedRecord, ClaimOptions, TelemetryQueue } from './queue.ts';

export interface DrainOptions extends ClaimOptions {
  epoch: number;
  owner: string;
  clock: Clock;
  send: (batch: ClaimedRecord[]) => Promise<void>;
  /** Stop after this many batches (default: until a claim comes back empty). */
  maxBatches?: number;
  /**
   * The other exporters' part, after `send` and before the acknowledgement (the webhook deliveries,
   * webhooks/dispatcher.ts `settleForExporter`): the records it returns in `defer` are not acknowledged
   * but deferred by their delay (sent again to `send` on their next lease); `afterAck` runs once the
   * others are acknowledged.
   */
  settle?: (batch: ClaimedRecord[]) => Promise<Settled>;
}

export interface Settled {
  /** Record id → back-off delay (ms) of the records some other exporter still misses. */
  defer: Map<string, number>;
  afterAck?: (acknowledged: string[]) => Promise<void>;
}

export interface DrainReport {
  batches: number;
  claimed: number;
  delivered: number;
  /** Acknowledgements refused (a lease that expired while sending): those records are retried. */
  refused: number;
  /** Records sent but deferred because another exporter (a webhook endpoint) still misses them. */
  deferred: number;
}

export async function drainQueue(queue: TelemetryQueue, opts: DrainOptions): Promise<DrainReport> {
  const report: DrainReport = { batches: 0, claimed: 0, delivered: 0, refused: 0, deferred: 0 };
  const claimOpts: ClaimOptions = {
    ...(opts.maxRecords !== undefined ? { maxRecords: opts.maxRecords } : {}),
    ...(opts.maxBytes !== undefined ? { maxBytes: opts.maxBytes } : {}),
    ...(opts.leaseMs !== undefined ? { leaseMs: opts.leaseMs } : {}),
  };
  while (opts.maxBatches === undefined || report.batches < opts.maxBatches) {
    const batch = await queue.claim(opts.epoch, opts.owner, opts.clock.now(), claimOpts);
    if (batch.length === 0) break;
    report.batches++;
    report.claimed += batch.length;
    await opts.send(batch);
    const settled: Settled = opts.settle ? await opts.settle(batch) : { defer: new Map() };
    const acks = batch.filter((r) => !settled.defer.has(r.id));
    const results =
      acks.length === 0
        ? []
        : await queue.acknowledgeAll(
            opts.epoch,
            opts.owner,
            acks.map((r) => ({ id: r.id, leaseToken: r.leaseToken })),
            opts.clock.now(),
          );
    const acknowledged = results.filter((r) => r.acknowledged).map((r) => r.id);
    report.delivered += acknowledged.length;
    // A record whose lease was lost meanwhile (it expired and was reclaimed) is delivered again later.
    report.refused += results.length - acknowledged.length;
    await settled.afterAck?.(acknowledged);
    const defers = batch.flatMap((r) => {
      const delayMs = settled.defer.get(r.id);
      return delayMs === undefined ? [] : [{ id: r.id, leaseToken: r.leaseToken, delayMs }];
    });
    if (defers.length > 0) {
      const deferred = await queue.deferAll(opts.epoch, opts.owner, defers, opts.clock.now());
      report.deferred += deferred.filter((d) => d.deferred).length;
    }
  }
  return report;
}

/** One JSON line per record: what receivers see (id for deduplication, payload, attempt number). */
export function exportLine(r: ClaimedRecord): string {
  return JSON.stringify({ id: r.id, kind: r.kind, attempt: r.attempts, enqueued_at: r.enqueuedAt, payload: r.payload });
}
