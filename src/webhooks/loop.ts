/**
 * The dispatcher inside `alp serve` / `alp start`: a pass (dispatcher.ts) every `pollMs`, one at a
 * time, reading the ACTIVE endpoints afresh each pass (an endpoint added, removed or re-enabled by
 * the CLI is seen within a poll). A pass that fails (the outbox refuses during a maintenance or a
 * restore hold, storage trouble) is reported and the next poll tries again; the server keeps serving.
 */
import type { ServiceContext } from '../system/context.ts';
import { TelemetryQueue } from '../telemetry/queue.ts';
import type { WebhookSettings } from './config.ts';
import { type DeliveryReport, defaultOwner, deliverPending } from './dispatcher.ts';

export interface WebhookLoopEvents {
  /** A pass that did something (claimed a record or disabled an endpoint). */
  onPass?(report: DeliveryReport): void;
  onError?(error: unknown): void;
}

export interface WebhookLoop {
  /** Stops polling and waits for the pass in flight. */
  stop(): Promise<void>;
}

/** The outbox as the dispatcher reads it: persisted limits, the installation's shard count. */
export function dispatcherQueue(ctx: ServiceContext): TelemetryQueue {
  return new TelemetryQueue(ctx.items, undefined, { clock: ctx.clock, shards: ctx.layout.telemetry_shards });
}

export function startWebhookLoop(ctx: ServiceContext, settings: WebhookSettings, events: WebhookLoopEvents = {}): WebhookLoop {
  const queue = dispatcherQueue(ctx);
  const owner = defaultOwner();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> = Promise.resolve();
  const pass = async () => {
    try {
      const report = await deliverPending(ctx, { queue, settings, owner });
      if (report.claimed > 0 || report.disabled.length > 0) events.onPass?.(report);
    } catch (e) {
      events.onError?.(e);
    }
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      inFlight = pass().then(schedule);
    }, settings.pollMs);
    timer.unref();
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await inFlight;
    },
  };
}
