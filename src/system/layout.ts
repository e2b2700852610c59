/**
 * The installation's write layout (docs/design.md "Scale-out"): how many shards spread the items and
 * index partitions every operation of a kind would otherwise write. Fixed when the installation is
 * created (`initInstallation` records it in the installation record) and read by every node at open;
 * an installation created before layouts existed has no `layout` and is unsharded (every count 1,
 * the RFC-012 §9.1 keys exactly).
 *
 * - index_shards: GSI1 partitions written by every operation of a kind (STATE#, TRANS#{date}, RUN#{date},
 *   PROV#{date}, COMP_STATE#) and the retention observation partition get a shard suffix;
 * - telemetry_shards: the telemetry outbox (records and counters) is split by a hash of the aggregate;
 * - fence_shards: publishers condition-check one fence shard; maintenance holds them all.
 */
import { InvalidInput } from '../core/errors.ts';
import { MAX_SHARDS } from '../core/shard.ts';

export interface Layout {
  index_shards: number;
  telemetry_shards: number;
  fence_shards: number;
}

export const LAYOUT_FIELDS = ['index_shards', 'telemetry_shards', 'fence_shards'] as const;

/** One shard of everything: the embedded profile's default and every pre-layout installation. */
export const UNSHARDED: Readonly<Layout> = Object.freeze({ index_shards: 1, telemetry_shards: 1, fence_shards: 1 });

/**
 * The distributed profile's default, sized for the issue-13 goal load (200 nodes, 5,000 new versions/s
 * with the full lifecycle each): `npm run bench scale` projects every item and partition key at it.
 */
export const DISTRIBUTED_DEFAULT: Readonly<Layout> = Object.freeze({ index_shards: 64, telemetry_shards: 256, fence_shards: 256 });

/** The layout a new installation on `metadataEngine` gets, unless ALP_LAYOUT says otherwise. */
export function defaultLayout(metadataEngine: string, env: NodeJS.ProcessEnv = process.env): Layout {
  const base = metadataEngine === 'dynamodb' ? DISTRIBUTED_DEFAULT : UNSHARDED;
  const spec = env.ALP_LAYOUT;
  return spec === undefined || spec.trim() === '' ? { ...base } : parseLayout(spec, base);
}

/** `index=64,telemetry=256,fence=256` (any subset) over `base`. */
export function parseLayout(spec: string, base: Readonly<Layout> = UNSHARDED): Layout {
  const out: Layout = { ...base };
  for (const part of spec.split(',')) {
    const [name, value] = part.split('=').map((s) => s.trim());
    const field = `${name}_shards` as keyof Layout;
    if (!LAYOUT_FIELDS.includes(field)) throw new InvalidInput(`ALP_LAYOUT: unknown part "${name}" (index, telemetry, fence)`);
    out[field] = checkCount(field, Number(value));
  }
  return out;
}

function checkCount(field: string, n: number): number {
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_SHARDS)
    throw new InvalidInput(`${field} must be a whole number 1–${MAX_SHARDS}, got ${String(n)}`);
  return n;
}

/** The layout an installation record states (UNSHARDED when it predates layouts). */
export function layoutOf(record: Record<string, unknown> | undefined): Layout {
  const stored = record?.layout as Partial<Layout> | undefined;
  if (stored === undefined) return { ...UNSHARDED };
  const out = { ...UNSHARDED };
  for (const f of LAYOUT_FIELDS) if (stored[f] !== undefined) out[f] = checkCount(f, Number(stored[f]));
  return out;
}

export function sameLayout(a: Layout, b: Layout): boolean {
  return LAYOUT_FIELDS.every((f) => a[f] === b[f]);
}
