/**
 * The webhook dispatcher: an exporter of the telemetry outbox (docs/design.md "Webhooks"). One sink
 * fanned out: it claims outbox records like any exporter, turns each into its webhook message
 * (events.ts), and POSTs it, signed, to every ACTIVE endpoint whose filter matches and that existed
 * when the event happened. A record is acknowledged only when each of those endpoints has answered
 * 2xx for it (now or on an earlier lease: the `OK#` markers, delivery-log.ts) or was disabled; else
 * its lease is deferred by the back-off (the queue's deferAll), and the next lease retries only the
 * endpoints still missing it, with the same `webhook-id`. Every attempt is logged; an endpoint is
 * disabled (and the disable recorded in the webhook log) after `disableAfter` consecutive failures.
 *
 * While no endpoint is ACTIVE nothing is claimed, so an installation without webhooks keeps its
 * outbox for other exporters. While a pull exporter is registered (`alp telemetry drain`,
 * telemetry/exporters.ts) nothing is claimed either: that exporter consumes the outbox and settles each
 * record's webhooks first (`settleForExporter`), so both get every record.
 */
import { hostname } from 'node:os';
import type { ServiceContext } from '../system/context.ts';
import { readEpoch } from '../system/state.ts';
import type { Settled } from '../telemetry/drain.ts';
import { registeredExporters } from '../telemetry/exporters.ts';
import type { AckInput, ClaimedRecord, DeferInput, TelemetryQueue } from '../telemetry/queue.ts';
import { backoffDelay } from './backoff.ts';
import type { WebhookSettings } from './config.ts';
import { clearDelivered, deliveredPairs, pruneAttempts, recordAttempt } from './delivery-log.ts';
import { activeEndpoints, countFailure, disableAfterFailures, resetFailures, type SigningEndpoint } from './endpoints.ts';
import { matchesFilter } from './event-types.ts';
import { type WebhookEvent, webhookEventOf } from './events.ts';
import { postSigned } from './send.ts';
import { signedHeaders } from './signing.ts';

export interface DeliveryReport {
  /** Outbox records claimed. */
  claimed: number;
  /** Attempts answered 2xx. */
  delivered: number;
  /** Attempts that failed (status, timeout, network). */
  failed: number;
  /** Records acknowledged: delivered everywhere they go (or going nowhere). */
  acknowledged: number;
  /** Records whose lease was deferred by the back-off. */
  deferred: number;
  /** Records that are no webhook event (custom records) or match no endpoint, acknowledged undelivered. */
  skipped: number;
  /** Endpoints this pass disabled. */
  disabled: string[];
  /** A pull exporter is registered (telemetry/exporters.ts): it consumes the outbox, this pass claimed nothing for itself. */
  yielded: boolean;
}

export interface DispatchOptions {
  queue: TelemetryQueue;
  settings: WebhookSettings;
  /** The outbox lease owner (default webhooks:{host}:{pid}). */
  owner?: string;
  /** Records per claim (delivered concurrently). */
  recordsPerClaim?: number;
  /** Stop after this many claims (default: until a claim comes back empty). */
  maxClaims?: number;
}

const DEFAULT_RECORDS_PER_CLAIM = 8;

export function defaultOwner(): string {
  return `webhooks:${hostname().replace(/[^\x21-\x7e]/g, '_')}:${process.pid}`;
}

function emptyReport(): DeliveryReport {
  return { claimed: 0, delivered: 0, failed: 0, acknowledged: 0, deferred: 0, skipped: 0, disabled: [], yielded: false };
}

/** What happens to one claimed record. */
/**
 * A record's outcome in a claim: acknowledged or not, the endpoints that have it (`delivered`, on an
 * acknowledgement) and those still missing it (`waitingFor`: it is acknowledged after all if every one
 * of them ends up disabled in this pass).
 */
interface Verdict {
  record: ClaimedRecord;
  ack: boolean;
  delivered: string[];
  waitingFor: string[];
}

class Pass {
  readonly report = emptyReport();
  /** Endpoints disabled during this pass: they no longer hold records back. */
  private readonly disabledNow = new Set<string>();
  /** Endpoints that failed during this pass: a later success must reset their count. */
  private readonly failedNow = new Set<string>();

  constructor(
    private readonly ctx: ServiceContext,
    private readonly settings: WebhookSettings,
    /** The ACTIVE endpoints, read after each claim (see deliverPending). */
    public endpoints: SigningEndpoint[],
  ) {}

  /** The endpoints an event goes to: ACTIVE, subscribed to its type, and existing when it happened. */
  targets(event: WebhookEvent): SigningEndpoint[] {
    return this.endpoints.filter((ep) => matchesFilter(ep.events, event.type) && ep.created_at <= event.timestamp);
  }

  private async attempt(ep: SigningEndpoint, event: WebhookEvent, record: ClaimedRecord): Promise<boolean> {
    const at = this.ctx.clock.now();
    const sent = await postSigned(ep.url, signedHeaders(ep.secret, event, at), event.body, this.settings.timeoutMs);
    const iso = at.toISOString();
    await recordAttempt(
      this.ctx,
      {
        endpoint_id: ep.endpoint_id,
        event_id: event.id,
        event_type: event.type,
        attempt: record.attempts,
        at: iso,
        duration_ms: sent.durationMs,
        outcome: sent.delivered ? 'delivered' : 'failed',
        ...(sent.status === undefined ? {} : { status: sent.status }),
        ...(sent.error === undefined ? {} : { error: sent.error }),
      },
      this.settings.logRetentionMs,
    );
    if (sent.delivered) {
      this.report.delivered++;
      if (ep.consecutive_failures > 0 || this.failedNow.has(ep.endpoint_id)) await resetFailures(this.ctx, ep.endpoint_id, iso);
      return true;
    }
    this.report.failed++;
    this.failedNow.add(ep.endpoint_id);
    const failures = await countFailure(this.ctx, ep.endpoint_id, iso);
    if (failures !== undefined && failures >= this.settings.disableAfter && !this.disabledNow.has(ep.endpoint_id)) {
      this.disabledNow.add(ep.endpoint_id);
      if (await disableAfterFailures(this.ctx, ep, failures)) this.report.disabled.push(ep.endpoint_id);
    }
    return false;
  }

  /** Delivers one record to its endpoints still missing it; the verdict says whether it may be acknowledged. */
  async settle(record: ClaimedRecord, event: WebhookEvent | undefined, done: Set<string>): Promise<Verdict> {
    const targets = event ? this.targets(event) : [];
    if (!event || targets.length === 0) {
      this.report.skipped++;
      return { record, ack: true, delivered: [], waitingFor: [] };
    }
    const missing = targets.filter((ep) => !done.has(`${ep.endpoint_id} ${event.id}`) && !this.disabledNow.has(ep.endpoint_id));
    const results = await Promise.all(missing.map((ep) => this.attempt(ep, event, record)));
    const waitingFor = missing.filter((_, i) => !results[i]).map((ep) => ep.endpoint_id);
    return { record, ack: waitingFor.length === 0, delivered: targets.map((ep) => ep.endpoint_id), waitingFor };
  }

  /**
   * The verdict once every record of the claim was tried: records are delivered concurrently, so an
   * endpoint one record's failure disabled may still have held back a record settled just before.
   */
  final(v: Verdict): Verdict {
    if (v.ack || v.waitingFor.length === 0 || v.waitingFor.some((id) => !this.disabledNow.has(id))) return v;
    return { ...v, ack: true, waitingFor: [] };
  }
}

async function eventsOf(ctx: ServiceContext, batch: ClaimedRecord[], apiBase: string): Promise<Array<WebhookEvent | undefined | Error>> {
  return Promise.all(
    batch.map((r) => webhookEventOf(ctx, r, apiBase).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e))))),
  );
}

/** One record's outcome: acknowledge it, or defer it by `delayMs`; `delivered`: the endpoints that have it. */
interface Settlement {
  record: ClaimedRecord;
  ack: boolean;
  delayMs: number;
  delivered: string[];
}

/** Delivers a claimed batch to the endpoints still missing each record; says what may be acknowledged. */
async function settleBatch(ctx: ServiceContext, pass: Pass, batch: ClaimedRecord[], settings: WebhookSettings): Promise<Settlement[]> {
  const events = await eventsOf(ctx, batch, settings.apiBase);
  const pairs = batch.flatMap((_, i) => {
    const ev = events[i];
    return ev instanceof Error || !ev ? [] : pass.targets(ev).map((ep) => ({ endpointId: ep.endpoint_id, eventId: ev.id }));
  });
  const done = await deliveredPairs(ctx, pairs);
  const verdicts = await Promise.all(
    batch.map((record, i) => {
      const ev = events[i];
      // An event that could not be read now (storage trouble) is retried like a failed delivery.
      return ev instanceof Error ? { record, ack: false, delivered: [], waitingFor: [] } : pass.settle(record, ev, done);
    }),
  ).then((tried) => tried.map((v) => pass.final(v)));
  return verdicts.map((v) => ({
    record: v.record,
    ack: v.ack,
    delivered: v.delivered,
    delayMs: v.ack ? 0 : backoffDelay(v.record.attempts, settings.backoffBaseMs, settings.backoffMaxMs),
  }));
}

/** After an acknowledgement: the delivered markers of the acknowledged records are no longer needed. */
async function clearAcknowledged(ctx: ServiceContext, settled: Settlement[], acknowledged: ReadonlySet<string>): Promise<void> {
  for (const s of settled) if (acknowledged.has(s.record.id) && s.delivered.length > 0) await clearDelivered(ctx, s.record.id, s.delivered);
}

/** One claim: deliver, then acknowledge what is delivered everywhere and defer the rest by the back-off. */
async function deliverClaim(
  ctx: ServiceContext,
  pass: Pass,
  batch: ClaimedRecord[],
  opts: Required<Pick<DispatchOptions, 'queue' | 'settings' | 'owner'>>,
  epoch: number,
) {
  const settled = await settleBatch(ctx, pass, batch, opts.settings);
  const now = ctx.clock.now();
  const acks: AckInput[] = settled.filter((v) => v.ack).map((v) => ({ id: v.record.id, leaseToken: v.record.leaseToken }));
  const defers: DeferInput[] = settled
    .filter((v) => !v.ack)
    .map((v) => ({ id: v.record.id, leaseToken: v.record.leaseToken, delayMs: v.delayMs }));
  if (acks.length > 0) {
    const acked = new Set((await opts.queue.acknowledgeAll(epoch, opts.owner, acks, now)).filter((a) => a.acknowledged).map((a) => a.id));
    pass.report.acknowledged += acked.size;
    await clearAcknowledged(ctx, settled, acked);
  }
  if (defers.length > 0) {
    const deferred = await opts.queue.deferAll(epoch, opts.owner, defers, now);
    pass.report.deferred += deferred.filter((d) => d.deferred).length;
  }
}

/**
 * The webhook part of a pull exporter's batch (`alp telemetry drain`, telemetry/drain.ts `settle`):
 * the same deliveries, markers, back-off and disabling as a dispatcher pass; the exporter acknowledges
 * what this leaves out of `defer` and defers the rest. No ACTIVE endpoint: nothing is deferred.
 */
export async function settleForExporter(
  ctx: ServiceContext,
  batch: ClaimedRecord[],
  settings: WebhookSettings,
): Promise<Settled & { report: DeliveryReport }> {
  const pass = new Pass(ctx, settings, await activeEndpoints(ctx));
  const settled = await settleBatch(ctx, pass, batch, settings);
  return {
    report: pass.report,
    defer: new Map(settled.filter((s) => !s.ack).map((s) => [s.record.id, s.delayMs])),
    afterAck: (ids) => clearAcknowledged(ctx, settled, new Set(ids)),
  };
}

/** The lease of a claim: long enough to deliver its records (concurrently) to every endpoint, and record them. */
function leaseMs(settings: WebhookSettings): number {
  return 2 * settings.timeoutMs + 30_000;
}

/**
 * Claims and delivers until the outbox has nothing available (or maxClaims), then prunes the delivery
 * log of attempts past retention. The ACTIVE endpoints are read again after every claim: an endpoint
 * added before an event happened is committed before the event's record can be claimed, so that read
 * sees it (a read before the claim could miss it). Outbox refusals (a stale epoch, a restore hold, a
 * maintenance) are thrown: the caller retries later.
 */
export async function deliverPending(ctx: ServiceContext, opts: DispatchOptions): Promise<DeliveryReport> {
  const pass = new Pass(ctx, opts.settings, await activeEndpoints(ctx));
  if (pass.endpoints.length === 0) return pass.report;
  if ((await registeredExporters(ctx.items)).length > 0) return { ...pass.report, yielded: true };
  const owner = opts.owner ?? defaultOwner();
  const epoch = await readEpoch(ctx.items);
  const maxRecords = opts.recordsPerClaim ?? DEFAULT_RECORDS_PER_CLAIM;
  const swept = new Set(pass.endpoints.map((ep) => ep.endpoint_id));
  for (let claims = 0; opts.maxClaims === undefined || claims < opts.maxClaims; claims++) {
    const batch = await opts.queue.claim(epoch, owner, ctx.clock.now(), { maxRecords, leaseMs: leaseMs(opts.settings) });
    if (batch.length === 0) break;
    pass.report.claimed += batch.length;
    if ((await registeredExporters(ctx.items)).length > 0) {
      // A pull exporter registered before this claim: it consumes the outbox now (and settles the
      // webhooks of each record); hand the batch back untouched.
      const back = batch.map((r) => ({ id: r.id, leaseToken: r.leaseToken, delayMs: 1 }));
      await opts.queue.deferAll(epoch, owner, back, ctx.clock.now());
      pass.report.yielded = true;
      break;
    }
    pass.endpoints = await activeEndpoints(ctx);
    for (const ep of pass.endpoints) swept.add(ep.endpoint_id);
    await deliverClaim(ctx, pass, batch, { queue: opts.queue, settings: opts.settings, owner }, epoch);
  }
  const before = new Date(ctx.clock.now().getTime() - opts.settings.logRetentionMs).toISOString();
  for (const id of swept) await pruneAttempts(ctx, id, before);
  return pass.report;
}
