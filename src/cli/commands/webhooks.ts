import type { Command } from 'commander';
import { webhookSettings } from '../../webhooks/config.ts';
import {
  addEndpoint,
  type DeliveryAttempt,
  deliverNow,
  deliveryLog,
  enableEndpoint,
  listEndpoints,
  removeWebhook,
  type WebhookEndpoint,
  type WebhookLogEvent,
  webhookChanges,
} from '../../webhooks/service.ts';
import { actingPrincipal, output, parseIntOption, withRuntime } from '../runtime.ts';

function endpointRow(e: WebhookEndpoint): string {
  const state = e.state === 'DISABLED' ? `DISABLED (${e.disabled_reason ?? 'by hand'})` : 'ACTIVE';
  return [e.endpoint_id, state, `failures ${e.consecutive_failures}`, e.url, e.events.join(','), e.description ?? ''].join('  ').trimEnd();
}

function attemptRow(a: DeliveryAttempt): string {
  const result = a.outcome === 'delivered' ? `delivered ${a.status}` : `failed ${a.status ?? a.error ?? ''}`;
  return [a.at, a.endpoint_id, a.event_type, a.event_id, `attempt ${a.attempt}`, result, `${a.duration_ms} ms`].join('  ');
}

function changeRow(e: WebhookLogEvent): string {
  const extra = [e.reason ? `reason ${JSON.stringify(e.reason)}` : ''].filter(Boolean);
  return [`#${e.seq}`, e.timestamp, e.action, e.endpoint_id, e.url, `by ${e.by.id} (${e.by.kind})`, ...extra].join('  ');
}

/**
 * Webhook endpoints (Standard Webhooks), a human's or the local operator's (the access table's
 * manageWebhooks; `deliver` consumes the outbox and is the operator's, like `telemetry drain`). No HTTP
 * route reaches them: with a server selected they are refused like every command run on the host.
 */
export function registerWebhookCommands(program: Command): void {
  const webhooks = program.command('webhooks').description('signed HTTP callbacks of the audit events (Standard Webhooks)');
  webhooks
    .command('add <url>')
    .description('register an endpoint; prints its signing secret once')
    .requiredOption(
      '--events <types>',
      'comma-separated event types: version.approved, execution.*, * (alp webhooks add --help lists them)',
    )
    .option('--description <text>', 'what the endpoint is for')
    .action(async (url: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const ep = await addEndpoint(
          rt.ctx,
          { url, events: String(o.events).split(','), description: o.description },
          await actingPrincipal(rt),
        );
        output(rt.opts, ep, () => [
          `added ${ep.endpoint_id} ${ep.url} (events ${ep.events.join(',')})`,
          `signing secret (shown once; keep it where the receiver verifies): ${ep.secret}`,
        ]);
      }),
    );
  webhooks
    .command('list')
    .description('every endpoint: id, state, consecutive failures, URL, events (never the secret)')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const endpoints = await listEndpoints(rt.ctx, await actingPrincipal(rt));
        output(rt.opts, { endpoints }, () => (endpoints.length === 0 ? ['no webhook endpoints'] : endpoints.map(endpointRow)));
      }),
    );
  webhooks
    .command('remove <id>')
    .description('delete an endpoint and its delivery log (recorded in the webhook log)')
    .option('--reason <text>', 'why (kept in the webhook log)')
    .action(async (id: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const ep = await removeWebhook(rt.ctx, id, await actingPrincipal(rt), o.reason);
        output(rt.opts, { removed: ep.endpoint_id }, () => `removed ${ep.endpoint_id} ${ep.url}`);
      }),
    );
  webhooks
    .command('enable <id>')
    .description('deliver to a DISABLED endpoint again (events from now on), its failure count reset')
    .option('--reason <text>', 'why (kept in the webhook log)')
    .action(async (id: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const r = await enableEndpoint(rt.ctx, id, await actingPrincipal(rt), o.reason);
        output(rt.opts, r, () => (r.already_active ? `${id} is already ACTIVE` : `enabled ${id}`));
      }),
    );
  webhooks
    .command('log [id]')
    .description('delivery attempts, newest first: event, attempt number, HTTP status or error, duration')
    .option('--limit <n>', 'attempts at most (default 50)')
    .action(async (id: string | undefined, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const limit = parseIntOption('--limit', o.limit, { min: 1, max: 1000 }) ?? 50;
        const attempts = await deliveryLog(rt.ctx, await actingPrincipal(rt), id, limit);
        output(rt.opts, { attempts }, () => (attempts.length === 0 ? ['no delivery attempts'] : attempts.map(attemptRow)));
      }),
    );
  webhooks
    .command('changes')
    .description('the webhook log: every endpoint added, removed, enabled, disabled (hash-chained; alp audit verify checks it)')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const events = await webhookChanges(rt.ctx, await actingPrincipal(rt));
        output(rt.opts, { events }, () => (events.length === 0 ? ['no webhook changes'] : events.map(changeRow)));
      }),
    );
  webhooks
    .command('deliver')
    .description('one delivery pass now (cron, tests): what `alp serve` does every ALP_WEBHOOK_POLL_MS')
    .option('--max-claims <n>', 'outbox claims at most (default: until none is available)')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const maxClaims = parseIntOption('--max-claims', o.maxClaims, { min: 1 });
        const report = await deliverNow(rt.ctx, webhookSettings(), maxClaims === undefined ? {} : { maxClaims });
        output(rt.opts, report, () => [
          `claimed ${report.claimed}, delivered ${report.delivered}, failed ${report.failed}, acknowledged ${report.acknowledged}, deferred ${report.deferred}, skipped ${report.skipped}`,
          ...report.disabled.map((id) => `disabled ${id} after repeated failure`),
          ...(report.yielded
            ? ['a pull exporter is registered (alp telemetry exporters list): it delivers the webhooks; nothing claimed here']
            : []),
        ]);
      }),
    );
}
