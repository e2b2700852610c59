import { type Command, Option } from 'commander';
import { buildServer, DEFAULT_MAX_UPLOAD_BYTES, DEFAULT_SHUTDOWN_GRACE_MS, defaultLogger } from '../../api/server.ts';
import { policyCacheMsFromEnv } from '../../lifecycle/policy-cache.ts';
import { tokenCacheOptionsFromEnv } from '../../lifecycle/token-cache.ts';
import { type LogLoop, startLogLoop, tlogSchedule } from '../../runtime/tlog-loop.ts';
import { registerLogLoopMetrics } from '../../runtime/tlog-metrics.ts';
import { webhookSettings } from '../../webhooks/config.ts';
import { startWebhookLoop } from '../../webhooks/loop.ts';
import { parseIntOption, type Runtime, withRuntime } from '../runtime.ts';
import { ALP_VERSION } from '../version.ts';
import { initAndDescribe } from './admin.ts';

export interface ServeOptions {
  host: string;
  port: number;
  maxUploadBytes: number;
  shutdownGraceMs: number;
  logLevel: string;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** The options `alp serve` and `alp start` share. */
export function addServeOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--host <host>', 'address to listen on').env('ALP_HOST').default('127.0.0.1'))
    .addOption(new Option('--port <port>', 'port to listen on (0: any free port)').env('ALP_PORT').default('8787'))
    .addOption(
      new Option('--max-upload-bytes <n>', 'largest upload accepted; larger bodies get 413')
        .env('ALP_MAX_UPLOAD_BYTES')
        .default(String(DEFAULT_MAX_UPLOAD_BYTES)),
    )
    .addOption(
      new Option('--shutdown-grace-ms <n>', 'on SIGTERM, how long in-flight requests may take before uploads are aborted').default(
        String(DEFAULT_SHUTDOWN_GRACE_MS),
      ),
    )
    .addOption(new Option('--log-level <level>', 'JSON log level').choices(LOG_LEVELS).env('ALP_LOG_LEVEL').default('info'));
}

export function parseServeOptions(o: Record<string, string>): ServeOptions {
  return {
    host: o.host ?? '127.0.0.1',
    port: parseIntOption('--port', o.port, { max: 65535 }) ?? 8787,
    maxUploadBytes: parseIntOption('--max-upload-bytes', o.maxUploadBytes, { min: 0 }) ?? DEFAULT_MAX_UPLOAD_BYTES,
    shutdownGraceMs: parseIntOption('--shutdown-grace-ms', o.shutdownGraceMs, { max: 3_600_000 }) ?? DEFAULT_SHUTDOWN_GRACE_MS,
    logLevel: o.logLevel ?? 'info',
  };
}

/**
 * Serves the HTTP API on the runtime's installation until SIGTERM or SIGINT, then shuts down
 * gracefully (a second signal exits at once). `announce` runs once the server listens (or, with the
 * URL undefined, when it could not). The signal handlers are installed before anything is announced:
 * a supervisor that signals as soon as it sees the URL must never hit the default action.
 */
export async function serveUntilSignal(rt: Runtime, o: ServeOptions, announce: (url: string | undefined) => void): Promise<void> {
  let received: NodeJS.Signals | undefined;
  let onFirst: (signal: NodeJS.Signals) => void = () => {};
  const signalled = new Promise<NodeJS.Signals>((resolve) => {
    onFirst = resolve;
  });
  const onSignal = (signal: NodeJS.Signals) => {
    if (received) {
      process.stderr.write(`alp: ${signal} again during shutdown: exiting now\n`);
      process.exit(1);
    }
    received = signal;
    onFirst(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    const hooks = webhookSettings(process.env);
    const schedule = tlogSchedule(); // a bad ALP_TLOG_INTERVAL_MS or ALP_TLOG_BATCH_MS refuses the start before anything listens
    // So do the caches' settings: read at first use, a bad one would fail every request instead.
    tokenCacheOptionsFromEnv();
    policyCacheMsFromEnv();
    let tlog: LogLoop | undefined;
    const server = await buildServer(rt.ctx, {
      maxUploadBytes: o.maxUploadBytes,
      logger: defaultLogger(o.logLevel),
      version: ALP_VERSION,
      metricsCollectors: [(registry) => registerLogLoopMetrics(registry, () => tlog?.status())],
    });
    let url: string;
    try {
      url = await server.listen(o.host, o.port);
    } catch (e) {
      announce(undefined);
      await server.app.close();
      throw e;
    }
    announce(url);
    // Webhook deliveries run beside the server; links in their payloads point at it unless ALP_PUBLIC_URL says otherwise.
    const webhooks = startWebhookLoop(
      rt.ctx,
      { ...hooks, apiBase: hooks.apiBase || url },
      {
        onPass: (report) => server.app.log.info({ webhooks: report }, 'webhook deliveries'),
        onError: (err) => server.app.log.warn({ err }, 'webhook delivery pass failed; retrying at the next poll'),
      },
    );
    // The transparency log's sequencer: a round every ALP_TLOG_INTERVAL_MS and shortly after commits.
    tlog = startLogLoop(rt.ctx, schedule, {
      onError: (err) => server.app.log.warn({ err }, 'transparency log round failed; retrying at the next interval'),
    });
    const observers = (rt.ctx.commitObservers ??= []);
    const loop = tlog;
    observers.push(() => loop.poke());
    const signal = await signalled;
    server.app.log.info({ signal }, 'signal received');
    await webhooks.stop();
    // The sequencer's round in flight ends beside the shutdown, never delaying the refusal of new connections.
    const tlogStopped = loop.stop();
    await server.shutdown(o.shutdownGraceMs);
    await tlogStopped;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

export function registerServeCommands(program: Command): void {
  addServeOptions(
    program.command('serve').description('serve the HTTP API (bearer tokens; see /docs and /openapi.json) until SIGTERM or SIGINT'),
  ).action(async (o, cmd: Command) =>
    withRuntime(cmd, async (rt) => {
      const { bootstrapPending: _b, ...status } = await initAndDescribe(rt);
      await serveUntilSignal(rt, parseServeOptions(o), (url) => {
        if (!url) return;
        if (rt.opts.json) process.stdout.write(`${JSON.stringify({ ...status, url })}\n`);
        else process.stdout.write(`ALP installation ${status.installation_id} serving on ${url} (web UI ${url}/, API page ${url}/docs)\n`);
      });
    }),
  );
}
