/**
 * `npm run bench [section...]`: prints figures with ratios against references measured in the same run.
 * Sections: storage, lifecycle (with tlog), tlog, http, telemetry, recovery, distributed, read-fence, retention, retention-rss, retention-fence, scale, archive, states. ALP_BENCH_QUICK=1 shrinks every size (a smoke run, not figures).
 */
import { benchArchive } from './archive.ts';
import { benchCli } from './cli.ts';
import { benchDistributed } from './distributed.ts';
import { benchQueueFull } from './distributed-queue.ts';
import { benchHttp } from './http.ts';
import { benchLifecycle } from './lifecycle.ts';
import { benchReadFence } from './read-fence.ts';
import { benchRecovery } from './recovery.ts';
import { benchRetention, benchRetentionFence } from './retention.ts';
import { benchRetentionRss } from './retention-rss.ts';
import { benchScale } from './scale.ts';
import { benchStates } from './states.ts';
import { benchStorage } from './storage.ts';
import { benchTelemetry } from './telemetry.ts';
import { benchLogCost } from './tlog.ts';
import { printGoals } from './util.ts';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const quick = process.env.ALP_BENCH_QUICK === '1';
const sections: Record<string, () => Promise<unknown>> = {
  storage: () => (quick ? benchStorage({ bigBytes: 64 << 20, smallCount: 200, bulkItems: 10_000 }) : benchStorage()),
  lifecycle: async () => {
    await benchLifecycle(quick ? { count: 400 } : {});
    await benchLogCost({ quick });
  },
  tlog: () => benchLogCost({ quick }),
  http: () => benchHttp({ quick }),
  cli: () => benchCli(quick ? { bytes: 64 << 20, rounds: 1 } : {}),
  recovery: () => benchRecovery(quick ? { objects: 1000, contentBytes: 64 * 1024, rounds: 1 } : {}),
  telemetry: () => benchTelemetry(quick ? { count: 400, records: 500 } : {}),
  distributed: async () => {
    await benchDistributed();
    await benchQueueFull(quick ? { transitions: 6 } : {});
  },
  'read-fence': () => benchReadFence(quick ? { reads: 200, rounds: 2 } : {}),
  retention: () =>
    benchRetention(
      quick
        ? { sizes: [2000], rss: [2000, 10_000] }
        : process.env.ALP_BENCH_RETENTION_SIZES
          ? { sizes: process.env.ALP_BENCH_RETENTION_SIZES.split(',').map(Number) }
          : {},
    ),
  // RSS cases alone: ALP_BENCH_RSS_SIZES=10000,100000,1000000 (default), ALP_BENCH_RSS_MODES=idle,plan,…
  'retention-rss': () => benchRetentionRss((process.env.ALP_BENCH_RSS_SIZES ?? '10000,100000,1000000').split(',').map(Number)),
  'retention-fence': () => benchRetentionFence(Number(process.env.ALP_BENCH_FENCE_OBJECTS ?? 100_000)),
  scale: () => benchScale(quick ? { artifacts: 10 } : {}),
  archive: () => benchArchive(quick ? { versions: 60 } : {}),
  states: () =>
    benchStates(
      quick
        ? { sizes: [5000], rounds: 5, pages: 20 }
        : { sizes: (process.env.ALP_BENCH_STATES_SIZES ?? '100000,1000000').split(',').map(Number) },
    ),
};

const wanted = process.argv.slice(2);
const names = wanted.length ? wanted : Object.keys(sections);
for (const name of names) {
  const run = sections[name];
  if (!run) {
    console.error(`unknown bench section ${name}; one of ${Object.keys(sections).join(', ')}`);
    process.exit(2);
  }
  await run();
}
printGoals();
