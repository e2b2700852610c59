import { type Digest, sha256 } from './digest.ts';

/**
 * Canonical JSON: object keys sorted by code unit, no whitespace, `undefined` members dropped. Two
 * equal values always give the same text, so a hash over it is stable across engines (SQLite returns
 * attributes in insertion order, DynamoDB in any order).
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) throw new TypeError('non-finite number in canonical JSON');
    if (typeof value === 'bigint') throw new TypeError('bigint in canonical JSON');
    return JSON.stringify(value) ?? 'null';
  }
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

export function canonicalDigest(value: unknown): Digest {
  return sha256(canonicalJson(value));
}
