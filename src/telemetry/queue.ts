/**
 * TelemetryQueue: the durable, bounded telemetry outbox of seed 004 ("Best-effort telemetry with
 * explicit pressure"), on the ItemStore contract only, so it behaves the same on SQLite and DynamoDB.
 *
 * Items (partition TELQ#outbox, docs/data-model.md):
 *   STATE                          limits + counters (accepted, delivered, dropped, exhausted,
 *                                  live_records, live_bytes); every change of a counter happens in the
 *                                  transaction that changes the records it counts.
 *   ID#{id}                        a record's identity: its current slot, size (and payload digest for
 *                                  custom records). Custom records have it from enqueue on; audit
 *                                  records from their first lease (nothing looks them up before).
 *   A#{available_ms}#{id}          a record never leased, in the order it became available.
 *   L#{epoch}#{expires_ms}#{id}    a leased record, ordered by lease epoch then lease expiry: an
 *                                  expired lease is available again from its expiry on (requeue by
 *                                  lease expiry, not by creation time).
 * `claim` reads these ranges with strongly consistent base-table queries (never GSI1, never a scan).
 *
 * Enqueue happens inside the audit transaction (auditSink): a counter update conditioned on the
 * capacity plus one put per event. When the queue is full the condition fails and commitAudited
 * retries the audit write with the fallback (a `dropped` increment) instead: the audit write commits.
 */
import { timingSafeEqual } from 'node:crypto';
import { canonicalDigest } from '../core/canonical-json.ts';
import { type Clock, systemClock } from '../core/clock.ts';
import { ConditionFailed, Conflict, InvalidInput, RestoreHeld, StaleEpoch } from '../core/errors.ts';
import { randomToken } from '../core/ids.ts';
import {
  TELQ_FRESH_PREFIX,
  TELQ_PK,
  TELQ_SK_END,
  TELQ_STATE_SK,
  telqFreshSk,
  telqIdSk,
  telqLeaseEpochPrefix,
  telqLeaseSk,
  telqTimeBound,
} from '../core/keys.ts';
import { cond, type Item, type ItemStore, MAX_TRANSACT_OPS, type SkCondition, type TransactOp } from '../store/item-store.ts';
import type { AuditEvent, AuditSink } from '../system/context.ts';
import { CURRENT_SCHEMA } from '../system/schema.ts';
import { epochCheck, noRestoreHoldCheck, readEpoch, readRestoreHold } from '../system/state.ts';
import { LIMIT_NAMES, resolveLimits, type TelemetryLimits } from './limits.ts';
import { MAX_PAYLOAD_BYTES, sanitizeJson } from './sanitize.ts';

export const stateKey = { PK: TELQ_PK, SK: TELQ_STATE_SK };
export const QUEUE_SCHEMA = CURRENT_SCHEMA.telemetry_queue;

export const COUNTER_NAMES = ['accepted', 'delivered', 'dropped', 'exhausted', 'live_records', 'live_bytes'] as const;
export type TelemetryCounters = Record<(typeof COUNTER_NAMES)[number], number>;

export interface TelemetryStatus extends TelemetryCounters {
  limits: TelemetryLimits;
  initialised_at: string;
}

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
/** Records found exhausted during one claim that are settled by it (the rest wait for the next). */
const MAX_EXHAUST_PER_CLAIM = 500;
const OWNER_RE = /^[\x21-\x7e]{1,200}$/;
const CUSTOM_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,199}$/;
/** `{artifact_id}:{seq}`: the ids of audit events, reserved for them. */
const AUDIT_ID_RE = /^[0-9A-HJKMNP-TV-Z]{26}:\d+$/;

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

type Moment = Date | string | number;

function toMs(t: Moment, what: string): number {
  const ms = t instanceof Date ? t.getTime() : typeof t === 'number' ? t : Date.parse(t);
  if (!Number.isFinite(ms) || ms < 0) throw new InvalidInput(`${what} must be an ISO-8601 time`);
  return ms;
}

function validateEpoch(epoch: number): number {
  if (!Number.isSafeInteger(epoch) || epoch < 1) throw new InvalidInput(`epoch must be a positive whole number, got ${String(epoch)}`);
  return epoch;
}

function validateOwner(owner: string): string {
  if (typeof owner !== 'string' || !OWNER_RE.test(owner))
    throw new InvalidInput('owner must be 1–200 printable ASCII characters without spaces');
  return owner;
}

function intOption(name: string, v: number | undefined, fallback: number, min: number, max: number): number {
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

function counters(item: Item): TelemetryCounters {
  const out = {} as TelemetryCounters;
  for (const c of COUNTER_NAMES) out[c] = typeof item[c] === 'number' ? (item[c] as number) : 0;
  return out;
}

function limitsOf(item: Item): TelemetryLimits {
  return { maxRecords: item.max_records as number, maxBytes: item.max_bytes as number, maxAttempts: item.max_attempts as number };
}

interface Planned {
  rec: Item;
  kind: 'claim' | 'exhaust';
  ops: TransactOp[];
  claimed?: ClaimedRecord;
}

export class TelemetryQueue {
  private limits: TelemetryLimits | undefined;
  private opening: Promise<TelemetryLimits> | undefined;
  private readonly requested: TelemetryLimits | undefined;
  private readonly clock: Clock;

  /**
   * `limits` are what this host asks for: applied if it initialises the queue first, and compared
   * with the persisted limits otherwise (a difference is refused). Without them, a new queue gets the
   * defaults and an existing one keeps its own.
   */
  constructor(
    readonly items: ItemStore,
    limits?: Partial<TelemetryLimits>,
    opts: { clock?: Clock } = {},
  ) {
    this.requested = limits === undefined ? undefined : resolveLimits(limits);
    this.clock = opts.clock ?? systemClock;
  }

  /** Initialises the queue (first call ever) or checks the persisted limits; one get when it exists. */
  open(): Promise<TelemetryLimits> {
    if (this.limits) return Promise.resolve(this.limits);
    this.opening ??= this.doOpen().then(
      (l) => {
        this.limits = l;
        return l;
      },
      (e: unknown) => {
        this.opening = undefined;
        throw e;
      },
    );
    return this.opening;
  }

  private async doOpen(): Promise<TelemetryLimits> {
    let item = await this.items.get(stateKey, { consistent: true });
    if (!item) {
      const limits = this.requested ?? resolveLimits();
      const fresh: Item = {
        ...stateKey,
        type: 'telemetry_queue',
        schema: QUEUE_SCHEMA,
        max_records: limits.maxRecords,
        max_bytes: limits.maxBytes,
        max_attempts: limits.maxAttempts,
        initialised_at: this.clock.now().toISOString(),
        ...Object.fromEntries(COUNTER_NAMES.map((c) => [c, 0])),
      };
      try {
        await this.items.put(fresh, { condition: cond.notExists() });
        return limits;
      } catch (e) {
        if (!(e instanceof ConditionFailed)) throw e;
        item = await this.items.get(stateKey, { consistent: true });
        if (!item) throw e;
      }
    }
    const persisted = limitsOf(item);
    if (this.requested) {
      const diff = (Object.keys(LIMIT_NAMES) as Array<keyof TelemetryLimits>).filter((k) => persisted[k] !== this.requested?.[k]);
      if (diff.length > 0) {
        const says = diff.map((k) => `${LIMIT_NAMES[k]} ${persisted[k]} (asked for ${this.requested?.[k]})`).join(', ');
        throw new Conflict(
          `the telemetry queue was initialised with different limits: ${says}; limits are fixed when the queue is first initialised and a reopen never changes them`,
          { persisted, requested: this.requested },
        );
      }
    }
    return persisted;
  }

  /** Limits and counters as persisted. */
  async status(): Promise<TelemetryStatus> {
    await this.open();
    const item = await this.items.get(stateKey, { consistent: true });
    if (!item) throw new Conflict('the telemetry queue state item is missing');
    return { limits: limitsOf(item), initialised_at: item.initialised_at as string, ...counters(item) };
  }

  async counters(): Promise<TelemetryCounters> {
    const { limits: _l, initialised_at: _i, ...c } = await this.status();
    return c;
  }

  // ------------------------------------------------------------------------------------------
  // Enqueue

  /** A never-leased record: its slot item, which also says whether its identity item exists yet. */
  private recordItem(id: string, kind: RecordKind, payload: unknown, bytes: number, atMs: number, indexed: boolean): Item {
    return {
      PK: TELQ_PK,
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

  private idItem(id: string, slot: string, bytes: number, payloadDigest?: string): Item {
    return {
      PK: TELQ_PK,
      SK: telqIdSk(id),
      type: 'telemetry_id',
      id,
      slot,
      bytes,
      ...(payloadDigest ? { payload_digest: payloadDigest } : {}),
    };
  }

  /** The capacity-conditioned counter update that admits `n` records of `bytes` in total. */
  private admitOp(limits: TelemetryLimits, n: number, bytes: number, audit = false): TransactOp {
    return {
      op: 'update',
      key: stateKey,
      // audit_appended: the installation-wide audit append counter (src/audit/counter.ts). Every
      // audit record admitted or dropped is one audit entry appended.
      update: { add: { accepted: n, live_records: n, live_bytes: bytes, ...(audit ? { audit_appended: n } : {}) } },
      condition: cond.and(
        cond.eq('max_records', limits.maxRecords),
        cond.eq('max_bytes', limits.maxBytes),
        cond.le('live_records', limits.maxRecords - n),
        cond.le('live_bytes', limits.maxBytes - bytes),
      ),
    };
  }

  private dropOp(n: number, audit = false): TransactOp {
    return { op: 'update', key: stateKey, update: { add: { dropped: n, ...(audit ? { audit_appended: n } : {}) } } };
  }

  /**
   * The AuditSink plugged into every audit transaction: one record per audit event (id
   * `{artifact_id}:{seq}`), all admitted or, when they do not fit, all counted as dropped. An audit
   * record gets its identity item when it is first leased: audit ids are unique by construction and
   * reserved (custom enqueue refuses them), so nothing needs to find an unleased audit record by id,
   * and the audit transaction carries one put per event instead of two.
   */
  auditSink(): AuditSink {
    return {
      opsFor: async (events: AuditEvent[]) => {
        if (events.length === 0) return { ops: [], fallback: [] };
        const limits = await this.open();
        const puts: TransactOp[] = [];
        let bytes = 0;
        for (const e of events) {
          const payload = auditPayload(e);
          const size = Buffer.byteLength(JSON.stringify(payload), 'utf8');
          bytes += size;
          const item = this.recordItem(e.event_id, 'audit', payload, size, toMs(e.timestamp, 'event timestamp'), false);
          puts.push({ op: 'put', item, condition: cond.notExists() });
        }
        return { ops: [this.admitOp(limits, events.length, bytes, true), ...puts], fallback: [this.dropOp(events.length, true)] };
      },
    };
  }

  /**
   * Custom enqueue for trusted hosts: sanitized JSON under a caller-chosen id. The same id while it is
   * still queued is idempotent with the same payload ('duplicate') and refused with a changed one;
   * once delivered or exhausted an id leaves nothing behind and may be enqueued again. A full queue
   * counts the record as dropped and says so ('dropped').
   */
  async enqueue(id: string, payload: unknown, now: Moment): Promise<EnqueueResult> {
    if (typeof id !== 'string' || !CUSTOM_ID_RE.test(id))
      throw new InvalidInput(
        'a telemetry record id is 1–200 characters of letters, digits and . _ : @ / + = - (starting with a letter or digit)',
      );
    if (AUDIT_ID_RE.test(id)) throw new InvalidInput(`record ids of the form {artifact_id}:{seq} are reserved for audit events: ${id}`);
    const atMs = toMs(now, 'now');
    const limits = await this.open();
    const clean = sanitizeJson(payload, Math.min(MAX_PAYLOAD_BYTES, limits.maxBytes));
    const digest = canonicalDigest(clean.value);
    const existing = await this.items.get({ PK: TELQ_PK, SK: telqIdSk(id) }, { consistent: true });
    if (existing) return this.duplicate(id, existing, digest, clean.bytes);
    const rec = this.recordItem(id, 'custom', clean.value, clean.bytes, atMs, true);
    const idItem = this.idItem(id, rec.SK, clean.bytes, digest);
    try {
      await this.items.transactWrite([
        this.admitOp(limits, 1, clean.bytes),
        { op: 'put', item: idItem, condition: cond.notExists() },
        { op: 'put', item: rec, condition: cond.notExists() },
      ]);
      return { id, status: 'accepted', bytes: clean.bytes };
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
      if (e.failedIndex === 0) {
        await this.items.transactWrite([this.dropOp(1)]);
        return { id, status: 'dropped', bytes: clean.bytes };
      }
      const racing = await this.items.get({ PK: TELQ_PK, SK: telqIdSk(id) }, { consistent: true });
      if (racing) return this.duplicate(id, racing, digest, clean.bytes);
      throw new Conflict(`telemetry record ${id} changed concurrently; retry`);
    }
  }

  private duplicate(id: string, existing: Item, digest: string, bytes: number): EnqueueResult {
    if (existing.payload_digest !== digest)
      throw new Conflict(`telemetry record ${id} is already queued with a different payload`, {
        id,
        queued: existing.payload_digest,
        given: digest,
      });
    return { id, status: 'duplicate', bytes };
  }

  // ------------------------------------------------------------------------------------------
  // Claim

  private async *range(sk: SkCondition, pageSize: number): AsyncGenerator<Item> {
    let cursor: string | undefined;
    do {
      const page = await this.items.query({ pk: TELQ_PK, sk, consistent: true, limit: pageSize, ...(cursor ? { cursor } : {}) });
      for (const item of page.items) if (item.type === 'telemetry_record') yield item;
      cursor = page.cursor;
    } while (cursor);
  }

  /**
   * Available records, oldest first: leases granted in older epochs (a new epoch may take them), then
   * never-leased records and expired leases of this epoch merged by the time they became available.
   */
  private async *available(epoch: number, nowMs: number, pageSize: number): AsyncGenerator<Item> {
    const end = telqTimeBound(nowMs);
    if (epoch > 1) {
      yield* this.range({ between: [telqLeaseEpochPrefix(1), `${telqLeaseEpochPrefix(epoch - 1)}${TELQ_SK_END}`] }, pageSize);
    }
    const fresh = this.range({ between: [TELQ_FRESH_PREFIX, `${TELQ_FRESH_PREFIX}${end}#${TELQ_SK_END}`] }, pageSize);
    const expired = this.range({ between: [telqLeaseEpochPrefix(epoch), `${telqLeaseEpochPrefix(epoch)}${end}#${TELQ_SK_END}`] }, pageSize);
    const at = (i: Item) => (i.lease_expires_ms ?? i.available_ms) as number;
    let a = await fresh.next();
    let b = await expired.next();
    while (!a.done || !b.done) {
      if (
        b.done ||
        (!a.done && (at(a.value) < at(b.value) || (at(a.value) === at(b.value) && (a.value.id as string) <= (b.value.id as string))))
      ) {
        yield a.value as Item;
        a = await fresh.next();
      } else {
        yield b.value;
        b = await expired.next();
      }
    }
  }

  /**
   * Leases the oldest available records to `owner` for `leaseMs`, each with its own random lease
   * token, up to `maxRecords` and `maxBytes` (payload bytes; a cap smaller than the oldest available
   * record is an error, not an empty batch). Records whose last permitted lease has expired are
   * exhausted on the way: they leave the queue, release capacity and count in `exhausted`.
   * Refused in a stale epoch and while a restore hold is in force.
   */
  async claim(epoch: number, owner: string, now: Moment, opts: ClaimOptions = {}): Promise<ClaimedRecord[]> {
    validateEpoch(epoch);
    validateOwner(owner);
    const nowMs = toMs(now, 'now');
    const maxRecords = intOption('maxRecords', opts.maxRecords, DEFAULT_CLAIM.maxRecords, 1, MAX_CLAIM_RECORDS);
    const maxBytes = intOption('maxBytes', opts.maxBytes, DEFAULT_CLAIM.maxBytes, 1, Number.MAX_SAFE_INTEGER);
    const leaseMs = intOption('leaseMs', opts.leaseMs, DEFAULT_CLAIM.leaseMs, 1, MAX_LEASE_MS);
    const limits = await this.open();
    await this.preflight(epoch);

    const plan: Planned[] = [];
    let taken = 0;
    let bytes = 0;
    let exhausting = 0;
    const expiresMs = nowMs + leaseMs;
    for await (const rec of this.available(epoch, nowMs, Math.min(1000, maxRecords + 16))) {
      const attempts = rec.attempts as number;
      const idKey = { PK: TELQ_PK, SK: telqIdSk(rec.id as string) };
      if (attempts >= limits.maxAttempts) {
        if (exhausting >= MAX_EXHAUST_PER_CLAIM) continue;
        exhausting++;
        plan.push({
          rec,
          kind: 'exhaust',
          ops: [
            ...(rec.indexed === false ? [] : [{ op: 'delete', key: idKey, condition: cond.eq('slot', rec.SK) } as TransactOp]),
            { op: 'delete', key: { PK: rec.PK, SK: rec.SK }, condition: cond.eq('attempts', attempts) },
          ],
        });
        continue;
      }
      const size = rec.bytes as number;
      if (taken === 0 && size > maxBytes)
        throw new InvalidInput(`maxBytes ${maxBytes} is smaller than the oldest available record (${rec.id as string}, ${size} bytes)`, {
          id: rec.id,
          bytes: size,
          max_bytes: maxBytes,
        });
      if (bytes + size > maxBytes) break;
      const leaseToken = randomToken();
      const slot = telqLeaseSk(epoch, expiresMs, rec.id as string);
      const leaseExpiresAt = new Date(expiresMs).toISOString();
      const next: Item = {
        ...rec,
        SK: slot,
        attempts: attempts + 1,
        indexed: true,
        lease_owner: owner,
        lease_token: leaseToken,
        lease_epoch: epoch,
        lease_expires_ms: expiresMs,
        lease_expires_at: leaseExpiresAt,
        leased_at: new Date(nowMs).toISOString(),
      };
      // The identity item follows the record (an audit record's first lease creates it); its
      // condition lets only one of two racing claimers take the record.
      const idOp: TransactOp =
        rec.indexed === false
          ? { op: 'put', item: this.idItem(rec.id as string, slot, size), condition: cond.notExists() }
          : { op: 'update', key: idKey, update: { set: { slot } }, condition: cond.eq('slot', rec.SK) };
      plan.push({
        rec,
        kind: 'claim',
        ops: [
          idOp,
          { op: 'delete', key: { PK: rec.PK, SK: rec.SK }, condition: cond.eq('attempts', attempts) },
          { op: 'put', item: next, condition: cond.notExists() },
        ],
        claimed: {
          id: rec.id as string,
          kind: rec.kind as RecordKind,
          payload: rec.payload,
          bytes: size,
          attempts: attempts + 1,
          enqueuedAt: rec.enqueued_at as string,
          leaseToken,
          leaseExpiresAt,
        },
      });
      taken++;
      bytes += size;
      if (taken >= maxRecords) break;
    }

    const out: ClaimedRecord[] = [];
    for (const chunk of chunks(plan, MAX_TRANSACT_OPS - 3)) {
      for (const p of await this.commitClaimChunk(epoch, chunk)) if (p.claimed) out.push(p.claimed);
    }
    return out;
  }

  /** Commits one chunk; a record another claimer took meanwhile is left out and the rest retried. */
  private async commitClaimChunk(epoch: number, chunk: Planned[]): Promise<Planned[]> {
    let pending = chunk;
    while (pending.length > 0) {
      const ops: TransactOp[] = [epochCheck(epoch), noRestoreHoldCheck()];
      const owners: Array<Planned | undefined> = [undefined, undefined];
      const exhausted = pending.filter((p) => p.kind === 'exhaust');
      if (exhausted.length > 0) {
        const freed = exhausted.reduce((n, p) => n + (p.rec.bytes as number), 0);
        ops.push({
          op: 'update',
          key: stateKey,
          update: { add: { exhausted: exhausted.length, live_records: -exhausted.length, live_bytes: -freed } },
          condition: cond.exists(),
        });
        owners.push(undefined);
      }
      for (const p of pending) {
        ops.push(...p.ops);
        for (const _ of p.ops) owners.push(p);
      }
      try {
        await this.items.transactWrite(ops);
        return pending;
      } catch (e) {
        if (!(e instanceof ConditionFailed) || e.failedIndex === undefined) throw e;
        await this.raiseEpochOrHold(epoch, e.failedIndex);
        const lost = owners[e.failedIndex];
        if (!lost) throw e;
        pending = pending.filter((p) => p !== lost);
      }
    }
    return [];
  }

  private async preflight(epoch: number): Promise<void> {
    const [hold, current] = await Promise.all([readRestoreHold(this.items), readEpoch(this.items)]);
    if (hold)
      throw new RestoreHeld('a restore hold is in force: telemetry cannot be claimed or acknowledged until the restore is activated');
    if (epoch !== current) throw new StaleEpoch(epoch, current);
  }

  /** Failed index 0 is the epoch check and 1 the restore-hold check in every claim/ack transaction. */
  private async raiseEpochOrHold(epoch: number, failedIndex: number): Promise<void> {
    if (failedIndex === 0) throw new StaleEpoch(epoch, await readEpoch(this.items));
    if (failedIndex === 1)
      throw new RestoreHeld('a restore hold is in force: telemetry cannot be claimed or acknowledged until the restore is activated');
  }

  // ------------------------------------------------------------------------------------------
  // Acknowledge

  /**
   * Marks a leased record delivered: it leaves the queue (no tombstone) and counts in `delivered`.
   * Requires the current epoch, the owner the lease was granted to, and the record's lease token,
   * unexpired at `at`. A refusal is a CONFLICT whose `details.reason` says which requirement failed.
   */
  async acknowledge(epoch: number, owner: string, id: string, leaseToken: string, at: Moment): Promise<void> {
    const [result] = await this.acknowledgeAll(epoch, owner, [{ id, leaseToken }], at);
    if (result && !result.acknowledged)
      throw new Conflict(`cannot acknowledge telemetry record ${id}: ${result.message}`, { id, reason: result.reason });
  }

  /**
   * `acknowledge` for many records of one owner at once (an exporter's whole batch): the same rules
   * per record, up to 48 records per transaction. Stale epochs and restore holds refuse the call;
   * each other refusal is reported in that record's result and the others are still acknowledged.
   */
  async acknowledgeAll(epoch: number, owner: string, acks: AckInput[], at: Moment): Promise<AckResult[]> {
    validateEpoch(epoch);
    validateOwner(owner);
    if (!Array.isArray(acks) || acks.length > MAX_CLAIM_RECORDS)
      throw new InvalidInput(`acknowledge at most ${MAX_CLAIM_RECORDS} records at once`);
    for (const a of acks) {
      if (typeof a?.id !== 'string' || a.id.length === 0 || a.id.length > 200) throw new InvalidInput('a record id is required');
      if (typeof a.leaseToken !== 'string' || a.leaseToken.length === 0 || a.leaseToken.length > 200)
        throw new InvalidInput('a lease token is required');
    }
    const atMs = toMs(at, 'at');
    await this.open();
    await this.preflight(epoch);
    const idItems = new Map(
      (await this.items.batchGet([...new Set(acks.map((a) => a.id))].map((id) => ({ PK: TELQ_PK, SK: telqIdSk(id) })))).map((i) => [
        i.id as string,
        i,
      ]),
    );
    const records = new Map(
      (await this.items.batchGet([...idItems.values()].map((i) => ({ PK: TELQ_PK, SK: i.slot as string })))).map((r) => [r.SK, r]),
    );
    const results = new Map<number, AckResult>();
    const refuse = (i: number, id: string, reason: AckRefusal, message: string) =>
      results.set(i, { id, acknowledged: false, reason, message });
    const plan: Array<{ index: number; id: string; bytes: number; ops: TransactOp[] }> = [];
    const seen = new Set<string>();
    for (const [i, a] of acks.entries()) {
      const idItem = idItems.get(a.id);
      const rec = idItem ? records.get(idItem.slot as string) : undefined;
      const refusal = seen.has(a.id) ? (['duplicate', 'it is listed twice'] as const) : ackRefusal(rec, epoch, owner, a.leaseToken, atMs);
      seen.add(a.id);
      if (refusal || !idItem || !rec) {
        const [reason, message] = refusal ?? ['not_queued', 'it is not queued'];
        refuse(i, a.id, reason, message);
        continue;
      }
      plan.push({ index: i, id: a.id, bytes: rec.bytes as number, ops: ackOps(rec, idItem, epoch, owner, a.leaseToken, atMs) });
    }
    const perTransaction = Math.floor((MAX_TRANSACT_OPS - 3) / 2);
    for (let start = 0; start < plan.length; start += perTransaction) {
      let pending = plan.slice(start, start + perTransaction);
      while (pending.length > 0) {
        const ops: TransactOp[] = [
          epochCheck(epoch),
          noRestoreHoldCheck(),
          {
            op: 'update',
            key: stateKey,
            update: {
              add: { delivered: pending.length, live_records: -pending.length, live_bytes: -pending.reduce((n, p) => n + p.bytes, 0) },
            },
            condition: cond.exists(),
          },
          ...pending.flatMap((p) => p.ops),
        ];
        try {
          await this.items.transactWrite(ops);
          for (const p of pending) results.set(p.index, { id: p.id, acknowledged: true });
          pending = [];
        } catch (e) {
          if (!(e instanceof ConditionFailed) || e.failedIndex === undefined || e.failedIndex === 2) throw e;
          await this.raiseEpochOrHold(epoch, e.failedIndex);
          const lost = pending[Math.floor((e.failedIndex - 3) / 2)];
          if (!lost) throw e;
          refuse(lost.index, lost.id, 'lost', 'its lease changed concurrently (reclaimed or acknowledged by someone else)');
          pending = pending.filter((p) => p !== lost);
        }
      }
    }
    return acks.map((_, i) => results.get(i) as AckResult);
  }
}

function* chunks(plan: Planned[], budget: number): Generator<Planned[]> {
  let current: Planned[] = [];
  let used = 0;
  for (const p of plan) {
    if (used + p.ops.length > budget && current.length > 0) {
      yield current;
      current = [];
      used = 0;
    }
    current.push(p);
    used += p.ops.length;
  }
  if (current.length > 0) yield current;
}

/** Why a record cannot be acknowledged by this owner with this token at `atMs`, or undefined when it can. */
function ackRefusal(
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

/** The deletes of an acknowledged record and its identity item, conditioned on the lease still being this one. */
function ackOps(rec: Item, idItem: Item, epoch: number, owner: string, leaseToken: string, atMs: number): TransactOp[] {
  return [
    {
      op: 'delete',
      key: { PK: rec.PK, SK: rec.SK },
      condition: cond.and(
        cond.eq('lease_token', leaseToken),
        cond.eq('lease_owner', owner),
        cond.eq('lease_epoch', epoch),
        cond.gt('lease_expires_ms', atMs),
      ),
    },
    { op: 'delete', key: { PK: idItem.PK, SK: idItem.SK }, condition: cond.eq('slot', rec.SK) },
  ];
}
