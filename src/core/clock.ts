/**
 * The one clock. Every rule that reads time takes a Clock, so tests move time instead of sleeping.
 */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = {
  now: () => new Date(),
};

/** A clock that only moves when told to. */
export class ManualClock implements Clock {
  private ms: number;

  constructor(start: Date | string | number = '2026-01-01T00:00:00.000Z') {
    this.ms = new Date(start).getTime();
  }

  now(): Date {
    return new Date(this.ms);
  }

  set(to: Date | string | number): void {
    this.ms = new Date(to).getTime();
  }

  advance(ms: number): Date {
    this.ms += ms;
    return this.now();
  }
}

/** A fixed point in time, e.g. from ALP_NOW. Millisecond ticks keep ids and timestamps ordered. */
export class FixedClock implements Clock {
  constructor(private readonly at: Date) {}
  now(): Date {
    return new Date(this.at.getTime());
  }
}

export const DAY_MS = 24 * 60 * 60 * 1000;

export function isoTimestamp(d: Date): string {
  return d.toISOString();
}

export function isoDate(d: Date): string {
  return d.toISOString().slice(0, 10);
}

/** Parses durations such as 30s, 15m, 12h, 7d, 2w into milliseconds. */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d{1,9})(ms|s|m|h|d|w)$/.exec(text.trim());
  if (!m) return undefined;
  const n = Number(m[1]);
  const unit = m[2] as 'ms' | 's' | 'm' | 'h' | 'd' | 'w';
  const factor = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: DAY_MS, w: 7 * DAY_MS }[unit];
  return n * factor;
}
