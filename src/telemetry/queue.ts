/**
 * TelemetryQueue: the durable, bounded telemetry outbox of seed 004 ("Best-effort telemetry with
 * explicit pressure"), on the ItemStore contract only, so it behaves the same on SQLite and DynamoDB.
 *
 * Items (docs/data-model.md "Telemetry outbox"), in each shard's partition (shards.ts; with one shard
 * the partition is TELQ#outbox):
 *   STATE                          the shard's limits (its share) + counters (accepted, delivered,
 *                                  dropped, exhausted, live_records, live_bytes, audit_appended);
 *                                  every change of a counter happens in the transaction that changes
 *                                  the records it counts. TELQ#outbox / STATE is the root: the
 *                                  installation-wide limits and the shard count (with one shard it
 *                                  is also the one shard's STATE).
 *   ID#{id}                        a record's identity: its current slot, size (and payload digest for
 *                                  custom records). Custom records have it from enqueue on; audit
 *                                  records from their first lease (nothing looks them up before).
 *   A#{available_ms}#{id}          a record never leased, in the order it became available
 *                                  (`…#batch`: many audit events of one transaction, sink.ts).
 *   L#{epoch}#{expires_ms}#{id}    a leased record, ordered by lease epoch then lease expiry: an
 *                                  expired lease is available again from its expiry on (requeue by
 *                                  lease expiry, not by creation time).
 *
 * Enqueue happens inside the audit transaction (sink.ts): per shard either the capacity-conditioned
 * admit or its complement, the counted drop, chosen from what the last commit found; the audit write
 * always commits. Claim: claim.ts; acknowledge: ack.ts.
 */
import { canonicalDigest } from '../core/canonical-json.ts';
import { type Clock, systemClock } from '../core/clock.ts';
import { ConditionFailed, Conflict, InvalidInput } from '../core/errors.ts';
import { telqIdSk, telqShardPk } from '../core/keys.ts';
import { cond, type Item, type ItemStore } from '../store/item-store.ts';
import { lazyItemStore } from '../store/lazy.ts';
import type { AuditSink } from '../system/context.ts';
import { CURRENT_SCHEMA } from '../system/schema.ts';
import { acknowledgeRecords } from './ack.ts';
import { claimRecords, preflight, type QueueView } from './claim.ts';
import { type DeferInput, type DeferResult, deferRecords } from './defer.ts';
import { admitOrDrop } from './enqueue.ts';
import { installationFenceShards, telemetryFenceCheck } from './fence.ts';
import { LIMIT_NAMES, resolveLimits, type TelemetryLimits } from './limits.ts';
import {
  type AckInput,
  type AckResult,
  AUDIT_ID_RE,
  type ClaimedRecord,
  type ClaimOptions,
  CUSTOM_ID_RE,
  DEFAULT_CLAIM,
  type EnqueueResult,
  idItem,
  intOption,
  MAX_CLAIM_RECORDS,
  MAX_LEASE_MS,
  type Moment,
  recordItem,
  toMs,
  validateEpoch,
  validateOwner,
} from './records.ts';
import { MAX_PAYLOAD_BYTES, sanitizeJson } from './sanitize.ts';
import {
  COUNTER_NAMES,
  countersOf,
  effectiveShards,
  readQueueStates,
  recordShard,
  shardLimits,
  shardStateKey,
  shardsOf,
  stateKey,
  type TelemetryCounters,
  totalCounters,
} from './shards.ts';
import { type ShardLayout, telemetrySink } from './sink.ts';

export type { DeferInput, DeferResult } from './defer.ts';
export * from './records.ts';
export { COUNTER_NAMES, stateKey, type TelemetryCounters } from './shards.ts';
export const QUEUE_SCHEMA = CURRENT_SCHEMA.telemetry_queue;

export interface TelemetryStatus extends TelemetryCounters {
  limits: TelemetryLimits;
  initialised_at: string;
}

export interface ShardStatus extends TelemetryCounters {
  shard: number;
  limits: TelemetryLimits;
}

function limitsOf(item: Item): TelemetryLimits {
  return { maxRecords: item.max_records as number, maxBytes: item.max_bytes as number, maxAttempts: item.max_attempts as number };
}

/** The STATE of shard `s` of `n` > 1: its share of the limits and zero counters. */
function shardStateItem(limits: TelemetryLimits, s: number, n: number, at: string): Item {
  const own = shardLimits(limits, s, n);
  return {
    ...shardStateKey(s, n),
    type: 'telemetry_shard',
    shard: s,
    shards: n,
    max_records: own.maxRecords,
    max_bytes: own.maxBytes,
    max_attempts: own.maxAttempts,
    initialised_at: at,
    ...Object.fromEntries(COUNTER_NAMES.map((c) => [c, 0])),
  };
}

export class TelemetryQueue {
  private layout: ShardLayout | undefined;
  private opening: Promise<ShardLayout> | undefined;
  private readonly requested: TelemetryLimits | undefined;
  private readonly requestedShards: number;
  /** The installation's fence shard count: given, or read from its record at open (telemetry/fence.ts). */
  private fenceShards: number | undefined;
  private readonly clock: Clock;
  /** Shards the last commit of this process found full (sink.ts). */
  private readonly full = new Set<number>();
  /** Where the next claim's round-robin over the shards starts. */
  private readonly rotor = { next: 0 };

  /**
   * `limits` are what this host asks for: applied if it initialises the queue first, and compared
   * with the persisted limits otherwise (a difference is refused). Without them, a new queue gets the
   * defaults and an existing one keeps its own. `shards` (the layout's telemetry_shards, default 1)
   * only matters to the process that initialises the queue: the count is fixed then, and every later
   * open uses the persisted one. `fenceShards` (the layout's fence_shards): where the custom enqueue,
   * claim and acknowledge check the maintenance fence; read from the installation record when not given.
   * `database` (the seed's `new TelemetryQueue(database)`): a SQLite file path, opened on first use
   * through store/open.ts and closed by close(); a store passed in is the caller's to close.
   */
  constructor(database: string, limits?: Partial<TelemetryLimits>, opts?: { clock?: Clock; shards?: number; fenceShards?: number });
  constructor(items: ItemStore, limits?: Partial<TelemetryLimits>, opts?: { clock?: Clock; shards?: number; fenceShards?: number });
  constructor(
    database: ItemStore | string,
    limits?: Partial<TelemetryLimits>,
    opts: { clock?: Clock; shards?: number; fenceShards?: number } = {},
  ) {
    this.owned = typeof database === 'string';
    this.items = typeof database === 'string' ? lazyItemStore({ engine: 'sqlite', path: database }) : database;
    this.requested = limits === undefined ? undefined : resolveLimits(limits);
    this.requestedShards = opts.shards ?? 1;
    this.fenceShards = opts.fenceShards;
    this.clock = opts.clock ?? systemClock;
  }

  readonly items: ItemStore;
  private readonly owned: boolean;

  /** Closes the database this queue opened from a path (idempotent); a store passed in stays open. */
  async close(): Promise<void> {
    if (this.owned) await this.items.close();
  }

  /** Initialises the queue (first call ever) or checks the persisted limits; one get when it exists. */
  async open(): Promise<TelemetryLimits> {
    return (await this.openLayout()).limits;
  }

  /** The persisted limits and shard count. */
  openLayout(): Promise<ShardLayout> {
    if (this.layout) return Promise.resolve(this.layout);
    this.opening ??= this.doOpen().then(
      (l) => {
        this.layout = l;
        return l;
      },
      (e: unknown) => {
        this.opening = undefined;
        throw e;
      },
    );
    return this.opening;
  }

  private async doOpen(): Promise<ShardLayout> {
    let item = await this.items.get(stateKey, { consistent: true });
    if (!item) item = await this.initialise();
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
    const shards = shardsOf(item);
    if (shards > 1) await this.ensureShards(persisted, shards, item.initialised_at as string);
    this.fenceShards ??= await installationFenceShards(this.items);
    return { limits: persisted, shards };
  }

  /** Creates the queue: the shards' STATE items first, the root last (its existence says they exist). */
  private async initialise(): Promise<Item> {
    const limits = this.requested ?? resolveLimits();
    const shards = effectiveShards(this.requestedShards, limits);
    const at = this.clock.now().toISOString();
    if (shards > 1) await this.ensureShards(limits, shards, at);
    const fresh: Item = {
      ...stateKey,
      type: 'telemetry_queue',
      schema: QUEUE_SCHEMA,
      max_records: limits.maxRecords,
      max_bytes: limits.maxBytes,
      max_attempts: limits.maxAttempts,
      initialised_at: at,
      ...(shards > 1 ? { shards } : Object.fromEntries(COUNTER_NAMES.map((c) => [c, 0]))),
    };
    try {
      await this.items.put(fresh, { condition: cond.notExists() });
      return fresh;
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
      const item = await this.items.get(stateKey, { consistent: true });
      if (!item) throw e;
      return item;
    }
  }

  /** Every shard has its STATE with its share of `limits` (a racing initialiser's shares are corrected). */
  private async ensureShards(limits: TelemetryLimits, n: number, at: string): Promise<void> {
    const keys = Array.from({ length: n }, (_, s) => shardStateKey(s, n));
    const found = new Map<string, Item>();
    for (let i = 0; i < n; i += 100) for (const it of await this.items.batchGet(keys.slice(i, i + 100))) found.set(it.PK, it);
    for (let s = 0; s < n; s++) {
      const want = shardStateItem(limits, s, n, at);
      const have = found.get(want.PK);
      try {
        if (!have) await this.items.put(want, { condition: cond.notExists() });
        else if (have.max_records !== want.max_records || have.max_bytes !== want.max_bytes || have.max_attempts !== want.max_attempts)
          await this.items.update(
            shardStateKey(s, n),
            { set: { max_records: want.max_records, max_bytes: want.max_bytes, max_attempts: want.max_attempts } },
            { condition: cond.and(cond.eq('max_records', have.max_records as number), cond.eq('max_bytes', have.max_bytes as number)) },
          );
      } catch (e) {
        if (!(e instanceof ConditionFailed)) throw e; // another node created or corrected it
      }
    }
  }

  /** Limits (installation-wide) and counters (summed over the shards) as persisted. */
  async status(): Promise<TelemetryStatus> {
    await this.openLayout();
    const states = await readQueueStates(this.items);
    if (!states) throw new Conflict('the telemetry queue state item is missing');
    return { limits: limitsOf(states.root), initialised_at: states.root.initialised_at as string, ...totalCounters(states) };
  }

  async counters(): Promise<TelemetryCounters> {
    const { limits: _l, initialised_at: _i, ...c } = await this.status();
    return c;
  }

  /** Each shard's share of the limits and its counters (one consistent read per shard). */
  async shardStatus(): Promise<ShardStatus[]> {
    const { shards } = await this.openLayout();
    const states = await readQueueStates(this.items);
    return (states?.states ?? []).map((s) => ({ shard: shards === 1 ? 0 : (s.shard as number), limits: limitsOf(s), ...countersOf(s) }));
  }

  /**
   * The AuditSink plugged into every audit transaction (sink.ts): one record per audit event (id
   * `{artifact_id}:{seq}`) in the shard of its artifact, all of a shard's admitted or counted as
   * dropped. An audit record gets its identity item when it is first leased: audit ids are unique by
   * construction and reserved (custom enqueue refuses them).
   */
  auditSink(): AuditSink {
    return telemetrySink(() => this.openLayout(), this.full, this.items);
  }

  /**
   * Custom enqueue for trusted hosts: sanitized JSON under a caller-chosen id, in the shard of the id.
   * The same id while it is still queued is idempotent with the same payload ('duplicate') and refused
   * with a changed one; once delivered or exhausted an id leaves nothing behind and may be enqueued
   * again. A full shard counts the record as dropped and says so ('dropped').
   */
  async enqueue(id: string, payload: unknown, now: Moment): Promise<EnqueueResult> {
    if (typeof id !== 'string' || !CUSTOM_ID_RE.test(id))
      throw new InvalidInput(
        'a telemetry record id is 1–200 characters of letters, digits and . _ : @ / + = - (starting with a letter or digit)',
      );
    if (AUDIT_ID_RE.test(id)) throw new InvalidInput(`record ids of the form {artifact_id}:{seq} are reserved for audit events: ${id}`);
    const atMs = toMs(now, 'now');
    const layout = await this.openLayout();
    const shard = recordShard(id, layout.shards);
    const pk = telqShardPk(shard, layout.shards);
    const limits = shardLimits(layout.limits, shard, layout.shards);
    const key = shardStateKey(shard, layout.shards);
    const clean = sanitizeJson(payload, Math.min(MAX_PAYLOAD_BYTES, limits.maxBytes));
    const digest = canonicalDigest(clean.value);
    const existing = await this.items.get({ PK: pk, SK: telqIdSk(id) }, { consistent: true });
    if (existing) return this.duplicate(id, existing, digest, clean.bytes);
    // Every write of a custom enqueue carries the fence check: MAINTENANCE while a maintenance holds it.
    const fence = telemetryFenceCheck(this.fenceShards ?? 1, shard, layout.shards);
    const rec = recordItem(pk, id, 'custom', clean.value, clean.bytes, atMs, true);
    const id_ = idItem(pk, id, rec.SK, clean.bytes, digest);
    const outcome = await admitOrDrop(
      { items: this.items, shard, pk, key, limits, rec, id: id_, bytes: clean.bytes, atMs, fence },
      this.full,
    );
    if (outcome !== 'racing') return { id, status: outcome, bytes: clean.bytes };
    const racing = await this.items.get({ PK: pk, SK: telqIdSk(id) }, { consistent: true });
    if (racing) return this.duplicate(id, racing, digest, clean.bytes);
    throw new Conflict(`telemetry record ${id} changed concurrently; retry`);
  }

  private async view(): Promise<QueueView> {
    const layout = await this.openLayout();
    return { items: this.items, layout, fenceShards: this.fenceShards ?? 1 };
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

  /**
   * Leases the oldest available records to `owner` for `leaseMs`, each with its own random lease
   * token, up to `maxRecords` and `maxBytes` (payload bytes; a cap smaller than the oldest available
   * record is an error, not an empty batch), visiting the shards round-robin (claim.ts). Records whose
   * last permitted lease has expired are exhausted on the way: they leave the queue, release capacity
   * and count in `exhausted`. Refused in a stale epoch, while a restore hold is in force, and (MAINTENANCE)
   * while a maintenance holds the fence.
   */
  async claim(epoch: number, owner: string, now: Moment, opts: ClaimOptions = {}): Promise<ClaimedRecord[]> {
    validateEpoch(epoch);
    validateOwner(owner);
    const nowMs = toMs(now, 'now');
    const maxRecords = intOption('maxRecords', opts.maxRecords, DEFAULT_CLAIM.maxRecords, 1, MAX_CLAIM_RECORDS);
    const maxBytes = intOption('maxBytes', opts.maxBytes, DEFAULT_CLAIM.maxBytes, 1, Number.MAX_SAFE_INTEGER);
    const leaseMs = intOption('leaseMs', opts.leaseMs, DEFAULT_CLAIM.leaseMs, 1, MAX_LEASE_MS);
    const view = await this.view();
    await preflight(view, epoch);
    return claimRecords(view, { epoch, owner, nowMs, maxRecords, maxBytes, leaseMs, rotor: this.rotor });
  }

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
    for (const a of acks) validateLeasedRef(a);
    const atMs = toMs(at, 'at');
    const view = await this.view();
    await preflight(view, epoch);
    return acknowledgeRecords(view, epoch, owner, acks, atMs);
  }

  /**
   * Not delivered, try again later: each record's lease (held by `owner`, unexpired at `at`) is moved
   * to expire `delayMs` after `at`, so the next claim takes it only then (an exporter's back-off,
   * defer.ts). Attempts are unchanged: the next claim counts the next lease against max_attempts. The
   * same refusals as acknowledgeAll, per record; a stale epoch or a restore hold refuses the call.
   */
  async deferAll(epoch: number, owner: string, defers: DeferInput[], at: Moment): Promise<DeferResult[]> {
    validateEpoch(epoch);
    validateOwner(owner);
    if (!Array.isArray(defers) || defers.length > MAX_CLAIM_RECORDS)
      throw new InvalidInput(`defer at most ${MAX_CLAIM_RECORDS} records at once`);
    for (const d of defers) {
      validateLeasedRef(d);
      intOption('delayMs', d.delayMs, 0, 1, MAX_LEASE_MS);
    }
    const atMs = toMs(at, 'at');
    const view = await this.view();
    await preflight(view, epoch);
    return deferRecords(view, epoch, owner, defers, atMs);
  }
}

/** A record named by its id and the token of its lease (acknowledge, defer). */
function validateLeasedRef(r: { id?: unknown; leaseToken?: unknown } | undefined): void {
  if (typeof r?.id !== 'string' || r.id.length === 0 || r.id.length > 200) throw new InvalidInput('a record id is required');
  if (typeof r.leaseToken !== 'string' || r.leaseToken.length === 0 || r.leaseToken.length > 200)
    throw new InvalidInput('a lease token is required');
}
