/**
 * The telemetry outbox's persisted limits (seed 004: 1,000 records, 8 MiB, 5 delivery attempts by
 * default). A trusted host chooses them when it first initialises the queue; afterwards they are fixed:
 * a reopen that states different limits is refused, never silently widened (or narrowed).
 */
import { InvalidInput } from '../core/errors.ts';

export interface TelemetryLimits {
  /** Live (queued or leased) records at most. */
  maxRecords: number;
  /** Live payload bytes at most (the canonical JSON of each record's payload). */
  maxBytes: number;
  /** Leases a record may be granted; when the last one expires the record is exhausted. */
  maxAttempts: number;
}

export const DEFAULT_TELEMETRY_LIMITS: Readonly<TelemetryLimits> = Object.freeze({
  maxRecords: 1000,
  maxBytes: 8 * 1024 * 1024,
  maxAttempts: 5,
});

const BOUNDS: Record<keyof TelemetryLimits, [number, number]> = {
  maxRecords: [1, 10_000_000],
  maxBytes: [1024, 1024 * 1024 * 1024],
  maxAttempts: [1, 100],
};

export const LIMIT_NAMES: Record<keyof TelemetryLimits, string> = {
  maxRecords: 'max_records',
  maxBytes: 'max_bytes',
  maxAttempts: 'max_attempts',
};

/** Fills in the defaults and checks every bound; unknown keys are refused. */
export function resolveLimits(partial: Partial<TelemetryLimits> = {}): TelemetryLimits {
  for (const k of Object.keys(partial)) {
    if (!(k in BOUNDS)) throw new InvalidInput(`unknown telemetry limit ${JSON.stringify(k)}`);
  }
  const out = { ...DEFAULT_TELEMETRY_LIMITS };
  for (const k of Object.keys(BOUNDS) as Array<keyof TelemetryLimits>) {
    const v = partial[k];
    if (v === undefined) continue;
    const [min, max] = BOUNDS[k];
    if (!Number.isSafeInteger(v) || v < min || v > max)
      throw new InvalidInput(`telemetry ${LIMIT_NAMES[k]} must be a whole number between ${min} and ${max}, got ${String(v)}`);
    out[k] = v;
  }
  return out;
}

/**
 * Limits a process states through its environment (ALP_TELEMETRY_MAX_RECORDS, _MAX_BYTES,
 * _MAX_ATTEMPTS). Undefined when none is set: the process then adopts the persisted limits.
 */
export function telemetryLimitsFromEnv(env: NodeJS.ProcessEnv = process.env): Partial<TelemetryLimits> | undefined {
  const vars: Record<keyof TelemetryLimits, string> = {
    maxRecords: 'ALP_TELEMETRY_MAX_RECORDS',
    maxBytes: 'ALP_TELEMETRY_MAX_BYTES',
    maxAttempts: 'ALP_TELEMETRY_MAX_ATTEMPTS',
  };
  const out: Partial<TelemetryLimits> = {};
  let any = false;
  for (const [k, name] of Object.entries(vars) as Array<[keyof TelemetryLimits, string]>) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    if (!/^\d{1,12}$/.test(raw)) throw new InvalidInput(`${name} must be a whole number, got ${JSON.stringify(raw)}`);
    out[k] = Number(raw);
    any = true;
  }
  return any ? out : undefined;
}
