/** Display helpers: sizes, times (UTC, so every reader sees the same text), digests. */

export function formatBytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '—';
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)} ${units[i]}`;
}

/** "2026-03-01 14:05:09 UTC" */
export function formatTime(iso: string | undefined | null): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** "sha256:1a2b3c4d5e6f…" */
export function shortDigest(d: string | undefined | null, hex = 12): string {
  if (!d) return '—';
  const m = /^sha256:([0-9a-f]{64})$/.exec(d);
  return m ? `sha256:${(m[1] as string).slice(0, hex)}…` : d;
}

export function formatCount(n: number | undefined): string {
  return n === undefined ? '—' : n.toLocaleString('en-US');
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${formatCount(n)} ${n === 1 ? one : many}`;
}
