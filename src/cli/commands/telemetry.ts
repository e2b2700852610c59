import type { Command } from 'commander';
import { InternalError, UsageError } from '../../core/errors.ts';
import { readEpoch } from '../../system/state.ts';
import { drainQueue, exportLine } from '../../telemetry/drain.ts';
import { registerExporter, registeredExporters, removeExporter } from '../../telemetry/exporters.ts';
import { resolveLimits, type TelemetryLimits, telemetryLimitsFromEnv } from '../../telemetry/limits.ts';
import { type ClaimedRecord, type ClaimOptions, TelemetryQueue } from '../../telemetry/queue.ts';
import { webhookSettings } from '../../webhooks/config.ts';
import { settleForExporter } from '../../webhooks/dispatcher.ts';
import { output, parseIntOption, type Runtime, withRuntime } from '../runtime.ts';

function openQueue(rt: Runtime, limits?: Partial<TelemetryLimits>): TelemetryQueue {
  return new TelemetryQueue(rt.ctx.items, limits ?? telemetryLimitsFromEnv(), {
    clock: rt.ctx.clock,
    shards: rt.ctx.layout.telemetry_shards,
  });
}

function claimOptions(o: { maxRecords?: string; maxBytes?: string; leaseMs?: string }): ClaimOptions {
  const maxRecords = parseIntOption('--max-records', o.maxRecords, { min: 1, max: 1000 });
  const maxBytes = parseIntOption('--max-bytes', o.maxBytes, { min: 1 });
  const leaseMs = parseIntOption('--lease-ms', o.leaseMs, { min: 1, max: 86_400_000 });
  return {
    ...(maxRecords !== undefined ? { maxRecords } : {}),
    ...(maxBytes !== undefined ? { maxBytes } : {}),
    ...(leaseMs !== undefined ? { leaseMs } : {}),
  };
}

function requiredEpoch(value: string): number {
  return parseIntOption('--epoch', value, { min: 1 }) as number;
}

/** The example exporter's HTTP target: loopback only (collectors and their credentials are the host's). */
export function loopbackUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--to is stdout or an http:// URL, got ${JSON.stringify(text)}`);
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const loopback = host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !loopback)
    throw new UsageError('alp telemetry drain only posts to a loopback http(s) URL; exporting to a collector is the host’s job');
  return url;
}

function stats(s: Awaited<ReturnType<TelemetryQueue['status']>>): string[] {
  return [
    `telemetry outbox (limits: ${s.limits.maxRecords} records, ${s.limits.maxBytes} bytes, ${s.limits.maxAttempts} attempts)`,
    `  accepted      ${s.accepted}`,
    `  delivered     ${s.delivered}`,
    `  dropped       ${s.dropped}`,
    `  exhausted     ${s.exhausted}`,
    `  live records  ${s.live_records}`,
    `  live bytes    ${s.live_bytes}`,
  ];
}

/** alp telemetry init | stats | enqueue | claim | ack | drain */
export function registerTelemetryCommands(program: Command): void {
  const telemetry = program.command('telemetry').description('the durable, bounded telemetry outbox fed by every audit write');
  addOutboxCommands(telemetry);
  addDeliveryCommands(telemetry);
  addExporterCommands(telemetry);
}

/** alp telemetry init | stats | enqueue */
function addOutboxCommands(telemetry: Command): void {
  telemetry
    .command('init')
    .description('initialise the outbox with its limits (first time only), or check that the given limits are the persisted ones')
    .option('--max-records <n>', 'live records at most (default 1000)')
    .option('--max-bytes <n>', 'live payload bytes at most (default 8 MiB)')
    .option('--max-attempts <n>', 'delivery attempts per record (default 5)')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const given: Partial<TelemetryLimits> = { ...telemetryLimitsFromEnv() };
        const r = parseIntOption('--max-records', o.maxRecords, { min: 1 });
        const b = parseIntOption('--max-bytes', o.maxBytes, { min: 1 });
        const a = parseIntOption('--max-attempts', o.maxAttempts, { min: 1 });
        if (r !== undefined) given.maxRecords = r;
        if (b !== undefined) given.maxBytes = b;
        if (a !== undefined) given.maxAttempts = a;
        const limits = Object.keys(given).length > 0 ? resolveLimits(given) : undefined;
        const s = await openQueue(rt, limits).status();
        output(rt.opts, s, () => stats(s));
      }),
    );

  telemetry
    .command('stats')
    .description('the persisted counters: accepted, delivered, dropped, exhausted, live records and bytes')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const s = await openQueue(rt).status();
        output(rt.opts, s, () => stats(s));
      }),
    );

  telemetry
    .command('enqueue')
    .description('custom enqueue (trusted hosts): a JSON payload under your own record id')
    .requiredOption('--id <id>', 'record id (stable: receivers deduplicate by it)')
    .requiredOption('--payload <json>', 'the JSON payload')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        let payload: unknown;
        try {
          payload = JSON.parse(o.payload as string);
        } catch {
          throw new UsageError('--payload is not valid JSON');
        }
        const result = await openQueue(rt).enqueue(o.id, payload, rt.ctx.clock.now());
        output(rt.opts, result, () => `${result.id} ${result.status}`);
      }),
    );
}

/** alp telemetry exporters list | remove NAME: the registered pull exporters (telemetry/exporters.ts) */
function addExporterCommands(telemetry: Command): void {
  const exporters = telemetry.command('exporters').description('pull exporters registered by `alp telemetry drain`');
  exporters
    .command('list')
    .description('the registered pull exporters: while one is, the webhook dispatcher leaves the outbox to it')
    .action(async (_o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const list = await registeredExporters(rt.ctx.items);
        output(rt.opts, { exporters: list }, () => list.map((e) => `${e.name}\tregistered ${e.registered_at}`));
      }),
    );
  exporters
    .command('remove <name>')
    .description('unregister a pull exporter (it no longer gets every record; the webhook dispatcher consumes the outbox again)')
    .action(async (name: string, _o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const removed = await removeExporter(rt.ctx.items, name);
        output(rt.opts, { name, removed }, () => (removed ? `${name} removed` : `${name} was not registered`));
      }),
    );
}

/** alp telemetry claim | ack | drain: delivery by a storage worker or a loopback exporter */
function addDeliveryCommands(telemetry: Command): void {
  telemetry
    .command('claim')
    .description('lease the oldest available records (each with its own lease token)')
    .requiredOption('--owner <owner>', 'who is exporting (the same owner must acknowledge)')
    .requiredOption('--epoch <n>', 'the current installation epoch')
    .option('--max-records <n>', 'records at most (default 100)')
    .option('--max-bytes <n>', 'payload bytes at most (default 1 MiB)')
    .option('--lease-ms <n>', 'lease duration in ms (default 30000)')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const batch = await openQueue(rt).claim(requiredEpoch(o.epoch), o.owner, rt.ctx.clock.now(), claimOptions(o));
        output(rt.opts, { records: batch }, () =>
          batch.map((r) => `${r.id}\t${r.leaseToken}\t${r.leaseExpiresAt}\tattempt ${r.attempts}\t${JSON.stringify(r.payload)}`),
        );
      }),
    );

  telemetry
    .command('ack')
    .description('acknowledge delivery of a leased record')
    .requiredOption('--owner <owner>', 'the owner the lease was granted to')
    .requiredOption('--epoch <n>', 'the current installation epoch')
    .requiredOption('--id <id>', 'record id')
    .requiredOption('--lease-token <token>', 'the lease token claim returned for it')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        await openQueue(rt).acknowledge(requiredEpoch(o.epoch), o.owner, o.id, o.leaseToken, rt.ctx.clock.now());
        output(rt.opts, { id: o.id, acknowledged: true }, () => `${o.id as string} acknowledged`);
      }),
    );

  telemetry
    .command('drain')
    .description('example exporter: claim, send (JSON lines to stdout, or POST to a loopback URL), acknowledge, until empty')
    .requiredOption('--to <target>', 'stdout | http://127.0.0.1:PORT/PATH')
    .option('--owner <owner>', 'exporter identity (default drain:{pid})')
    .option('--epoch <n>', 'epoch (default: the current one)')
    .option('--max-records <n>', 'records per batch (default 100)')
    .option('--max-bytes <n>', 'payload bytes per batch (default 1 MiB)')
    .option('--lease-ms <n>', 'lease duration in ms (default 30000)')
    .option('--max-batches <n>', 'stop after this many batches')
    .option('--exporter <name>', 'the name it registers under (the webhook dispatcher then leaves the outbox to it)', 'drain')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const target = o.to === 'stdout' ? 'stdout' : loopbackUrl(o.to as string);
        await registerExporter(rt.ctx.items, o.exporter as string, rt.ctx.clock.now());
        const epoch = o.epoch === undefined ? await readEpoch(rt.ctx.items) : requiredEpoch(o.epoch);
        const maxBatches = parseIntOption('--max-batches', o.maxBatches, { min: 1 });
        const send = async (batch: ClaimedRecord[]) => {
          const body = batch.map((r) => `${exportLine(r)}\n`).join('');
          if (target === 'stdout') {
            await new Promise<void>((resolve, reject) => process.stdout.write(body, (e) => (e ? reject(e) : resolve())));
            return;
          }
          const res = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
          await res.arrayBuffer();
          if (!res.ok)
            throw new InternalError(`the exporter target answered HTTP ${res.status}; the batch was not acknowledged and will be retried`);
        };
        const report = await drainQueue(openQueue(rt), {
          epoch,
          owner: (o.owner as string | undefined) ?? `drain:${process.pid}`,
          clock: rt.ctx.clock,
          send,
          // Every record's webhooks are delivered before it is acknowledged (the dispatcher yields to us).
          settle: (batch) => settleForExporter(rt.ctx, batch, webhookSettings()),
          ...claimOptions(o),
          ...(maxBatches !== undefined ? { maxBatches } : {}),
        });
        // With --to stdout the records are the output; the summary goes to stderr.
        const summary = `drained ${report.delivered} record(s) in ${report.batches} batch(es)`;
        if (target === 'stdout') process.stderr.write(`${summary}\n`);
        else output(rt.opts, report, () => summary);
      }),
    );
}
