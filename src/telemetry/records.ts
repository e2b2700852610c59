/**
 * The telemetry outbox's record items, the operations that admit, drop and acknowledge them, and the
 * validation of what callers pass in (split from queue.ts). Keys: docs/data-model.md "Telemetry outbox".
 */
import { timingSafeEqual } from 'node:crypto';
import { InvalidInput } from '../core/errors.ts';
import { telqFreshSk, telqIdSk } from '../core/keys.ts';
import { cond, type Item, type ItemKey, type TransactOp } from '../store/item-store.ts';
import type { AuditEvent } from '../system/context.ts';
import type { TelemetryLimits } from './limits.ts';

export type RecordKind = 'audit' | 'custom';

/** What `claim` hands out: the seed's `record.id`, `record.payload`, `record.leaseToken`. */
export interface ClaimedRecord {
  id: string;
  kind: RecordKind;
  payload: unknown;
  bytes: number;
  /** 1 for the first lease, counting every lease granted. */
  attempts: number;
  enqueuedAt: string;
  leaseToken: string;
  leaseExpiresAt: string;
}

export interface ClaimOptions {
  maxRecords?: number;
  maxBytes?: number;
  leaseMs?: number;
}

export const DEFAULT_CLAIM: Required<ClaimOptions> = { maxRecords: 100, maxBytes: 1024 * 1024, leaseMs: 30_000 };
export const MAX_CLAIM_RECORDS = 1000;
export const MAX_LEASE_MS = 24 * 60 * 60 * 1000;
const OWNER_RE = /^[\x21-\x7e]{1,200}$/;
export const CUSTOM_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,199}$/;
/** `{artifact_id}:{seq}`: the ids of audit events, reserved for them. */
export const AUDIT_ID_RE = /^[0-9A-HJKMNP-TV-Z]{26}:\d+$/;

export type EnqueueStatus = 'accepted' | 'duplicate' | 'dropped';

export interface AckInput {
  id: string;
  leaseToken: string;
}

/** Why an acknowledgement was refused. */
export type AckRefusal = 'not_queued' | 'not_leased' | 'epoch' | 'owner' | 'token' | 'expired' | 'lost' | 'duplicate';

export type AckResult = { id: string; acknowledged: true } | { id: string; acknowledged: false; reason: AckRefusal; message: string };

export interface EnqueueResult {
  id: string;
  status: EnqueueStatus;
  bytes: number;
}

export type Moment = Date | string | number;

export function toMs(t: Moment, what: string): number {
  const ms = t instanceof Date ? t.getTime() : typeof t === 'number' ? t : Date.parse(t);
  if (!Number.isFinite(ms) || ms < 0) throw new InvalidInput(`${what} must be an ISO-8601 time`);
  return ms;
}

export function validateEpoch(epoch: number): number {
  if (!Number.isSafeInteger(epoch) || epoch < 1) throw new InvalidInput(`epoch must be a positive whole number, got ${String(epoch)}`);
  return epoch;
}

export function validateOwner(owner: string): string {
  if (typeof owner !== 'string' || !OWNER_RE.test(owner))
    throw new InvalidInput('owner must be 1–200 printable ASCII characters without spaces');
  return owner;
}

export function intOption(name: string, v: number | undefined, fallback: number, min: number, max: number): number {
  const n = v ?? fallback;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new InvalidInput(`${name} must be a whole number between ${min} and ${max}`);
  return n;
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The payload an audit event contributes: identity, type, aggregate and time. Nothing else. */
export function auditPayload(e: AuditEvent): Record<string, string> {
  // Keys in sorted order, all strings: JSON.stringify of it is its canonical JSON.
  return { aggregate_id: e.aggregate_id, event_id: e.event_id, timestamp: e.timestamp, type: e.type };
}

/** A never-leased record: its slot item, which also says whether its identity item exists yet. */
export function recordItem(
  pk: string,
  id: string,
  kind: RecordKind,
  payload: unknown,
  bytes: number,
  atMs: number,
  indexed: boolean,
): Item {
  return {
    PK: pk,
    SK: telqFreshSk(atMs, id),
    type: 'telemetry_record',
    id,
    kind,
    payload,
    bytes,
    enqueued_at: new Date(atMs).toISOString(),
    available_ms: atMs,
    attempts: 0,
    indexed,
  };
}

export function idItem(pk: string, id: string, slot: string, bytes: number, payloadDigest?: string): Item {
  return {
    PK: pk,
    SK: telqIdSk(id),
    type: 'telemetry_id',
    id,
    slot,
    bytes,
    ...(payloadDigest ? { payload_digest: payloadDigest } : {}),
  };
}

/**
 * The capacity-conditioned counter update of a shard's STATE that admits `n` records of `bytes` in
 * total. `limits` are the shard's share. `audit`: the records are audit entries (the audit append
 * counter of src/audit/counter.ts counts every audit entry admitted or dropped).
 */
/** Exhausted records (their last lease expired) the same transaction removes: their capacity is released in it. */
export interface Released {
  records: number;
  bytes: number;
}

export const NOTHING_RELEASED: Released = { records: 0, bytes: 0 };

/** The counter updates of `released` exhausted records leaving in the same transaction. */
function releasedAdd(r: Released): Record<string, number> {
  return r.records > 0 ? { exhausted: r.records } : {};
}

/** The append counter's update (src/audit/counter.ts) for `appended` audit chain entries among the records. */
function appendedAdd(appended: number): Record<string, number> {
  return appended > 0 ? { audit_appended: appended } : {};
}

export function admitOp(
  key: ItemKey,
  limits: TelemetryLimits,
  n: number,
  bytes: number,
  appended = 0,
  released = NOTHING_RELEASED,
): TransactOp {
  return {
    op: 'update',
    key,
    update: {
      add: {
        accepted: n,
        live_records: n - released.records,
        live_bytes: bytes - released.bytes,
        ...appendedAdd(appended),
        ...releasedAdd(released),
      },
    },
    condition: cond.and(
      cond.eq('max_records', limits.maxRecords),
      cond.eq('max_bytes', limits.maxBytes),
      cond.le('live_records', limits.maxRecords - n + released.records),
      cond.le('live_bytes', limits.maxBytes - bytes + released.bytes),
    ),
  };
}

/**
 * A counted drop of `n` records. With `limits` it is the admit's complement: it only commits when the
 * records would not fit (so a sink that guessed "full" learns when the shard drained); without, it is
 * unconditional (the fallback that always lets the audit write commit).
 */
export function dropOp(
  key: ItemKey,
  n: number,
  appended = 0,
  limits?: TelemetryLimits,
  bytes = 0,
  released = NOTHING_RELEASED,
): TransactOp {
  const leaving = released.records > 0 ? { live_records: -released.records, live_bytes: -released.bytes } : {};
  return {
    op: 'update',
    key,
    update: { add: { dropped: n, ...appendedAdd(appended), ...releasedAdd(released), ...leaving } },
    ...(limits
      ? {
          condition: cond.or(
            cond.gt('live_records', limits.maxRecords - n + released.records),
            cond.gt('live_bytes', limits.maxBytes - bytes + released.bytes),
          ),
        }
      : {}),
  };
}

/** The deletes that exhaust a record (its slot, and its identity item when it has one), conditioned on its attempts and slot. */
export function exhaustOps(rec: Item): TransactOp[] {
  const idKey = { PK: rec.PK, SK: telqIdSk(rec.id as string) };
  return [
    ...(rec.indexed === false ? [] : [{ op: 'delete', key: idKey, condition: cond.eq('slot', rec.SK) } as TransactOp]),
    { op: 'delete', key: { PK: rec.PK, SK: rec.SK }, condition: cond.eq('attempts', rec.attempts as number) },
  ];
}

/** Why a record cannot be acknowledged by this owner with this token at `atMs`, or undefined when it can. */
export function ackRefusal(
  rec: Item | undefined,
  epoch: number,
  owner: string,
  leaseToken: string,
  atMs: number,
): readonly [AckRefusal, string] | undefined {
  if (!rec) return ['not_queued', 'it is not queued (already acknowledged, exhausted, or never enqueued)'];
  if (rec.lease_token === undefined) return ['not_leased', 'it is not leased; claim it first'];
  if (rec.lease_epoch !== epoch) return ['epoch', `its lease was granted in epoch ${String(rec.lease_epoch)}; claim it again`];
  if (rec.lease_owner !== owner) return ['owner', 'it is leased to another owner'];
  if (!sameToken(rec.lease_token as string, leaseToken)) return ['token', 'the lease token does not match its current lease'];
  if (atMs >= (rec.lease_expires_ms as number)) return ['expired', `its lease expired at ${String(rec.lease_expires_at)}`];
  return undefined;
}

/** The record's lease is still this one (epoch, owner, token) and unexpired at `atMs`: the condition of every move of a leased record. */
export function leaseHeld(epoch: number, owner: string, leaseToken: string, atMs: number) {
  return cond.and(
    cond.eq('lease_token', leaseToken),
    cond.eq('lease_owner', owner),
    cond.eq('lease_epoch', epoch),
    cond.gt('lease_expires_ms', atMs),
  );
}

/** The deletes of an acknowledged record and its identity item, conditioned on the lease still being this one. */
export function ackOps(rec: Item, id: Item, epoch: number, owner: string, leaseToken: string, atMs: number): TransactOp[] {
  return [
    { op: 'delete', key: { PK: rec.PK, SK: rec.SK }, condition: leaseHeld(epoch, owner, leaseToken, atMs) },
    { op: 'delete', key: { PK: id.PK, SK: id.SK }, condition: cond.eq('slot', rec.SK) },
  ];
}
