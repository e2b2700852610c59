import cliProgress from 'cli-progress';
import type { Progress } from '../lifecycle/verify-content.ts';

/** A progress bar on a terminal (stderr), nothing otherwise. */
export function progressBar(label: string, json: boolean | undefined): Progress & { stop(): void } {
  if (!process.stderr.isTTY || json) return { stop() {} };
  const bar = new cliProgress.SingleBar(
    { format: `${label} [{bar}] {percentage}% | {value}/{total}`, stream: process.stderr, hideCursor: true, clearOnComplete: true },
    cliProgress.Presets.shades_classic,
  );
  let started = false;
  return {
    total(n) {
      bar.start(n, 0);
      started = true;
    },
    tick(n) {
      if (started) bar.increment(n);
    },
    stop() {
      if (started) bar.stop();
    },
  };
}
