/**
 * Write sharding (docs/design.md "Scale-out"): which of `n` shards a key belongs to. Deterministic
 * (every node computes the same shard for the same key) and uniform (the first 32 bits of sha256).
 * With n = 1 every key is shard 0 and the sharded key builders of core/keys.ts build the unsharded
 * (RFC-012 §9.1) values.
 */
import { createHash } from 'node:crypto';

export const MAX_SHARDS = 1024;

export function shardOf(key: string, n: number): number {
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_SHARDS) throw new RangeError(`shard count must be 1–${MAX_SHARDS}, got ${n}`);
  if (n === 1) return 0;
  return createHash('sha256').update(key).digest().readUInt32BE(0) % n;
}

/** The suffix a sharded key carries: '' with one shard, else `#{s}` (s zero-padded to the width of n - 1). */
export function shardSuffix(shard: number, n: number): string {
  if (n === 1) return '';
  if (!Number.isSafeInteger(shard) || shard < 0 || shard >= n) throw new RangeError(`shard ${shard} is not one of ${n}`);
  return `#${String(shard).padStart(String(n - 1).length, '0')}`;
}

/** Every shard number 0 … n - 1 (for fan-out reads and acquisitions that cover every shard). */
export function allShards(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
