/**
 * Progress on a terminal (stderr), nothing otherwise (not a TTY, or --json): the one progress helper
 * every command uses. `progressBar` is one bar; `phaseBars` one bar per phase of a long operation
 * (backup, restore, reconcile), with a counter for a phase whose total is not known.
 */
import cliProgress from 'cli-progress';
import type { Progress } from '../lifecycle/verify-content.ts';

type StoppableProgress = Progress & { stop(): void };

/** A progress bar on a terminal (stderr), nothing otherwise. */
export function progressBar(label: string, json: boolean | undefined): StoppableProgress {
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

/** One progress bar per phase, on a terminal only; a phase without a known total shows a counter. */
export function phaseBars(json: boolean | undefined): ((phase: string, total?: number) => Progress) & { stop(): void } {
  let current: StoppableProgress | undefined;
  const fn = ((phase: string, total?: number) => {
    current?.stop();
    current = undefined;
    if (!process.stderr.isTTY || json) return {};
    if (total === undefined) {
      current = counter(phase);
      return current;
    }
    const bar = progressBar(phase, json);
    bar.total?.(total);
    current = bar;
    return bar;
  }) as ((phase: string, total?: number) => Progress) & { stop(): void };
  fn.stop = () => current?.stop();
  return fn;
}

function counter(phase: string): StoppableProgress {
  let n = 0;
  return {
    tick(k: number) {
      n += k;
      process.stderr.write(`\r${phase} ${n}`);
    },
    stop() {
      if (n > 0) process.stderr.write('\r\x1b[K');
    },
  };
}
