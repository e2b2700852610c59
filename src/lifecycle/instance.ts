/**
 * Who holds an upload reservation (issue 14 item 2). Every process is one instance, created once: a
 * random id, the host name and the pid. A reservation names its owner; a reservation whose owner is
 * dead is released at once by the next attempt and is not shown as in progress:
 * - this very instance: alive (the upload runs here);
 * - the same host and the same pid under another id: this process restarted (kill -9, then a new start
 *   that got the pid back): dead;
 * - the same host and a pid that is not running: dead;
 * - otherwise (another node, or a pid that runs but may be a reused one): the owner's LEASE decides —
 *   an item `INSTANCE#{id} / LEASE` that the owner writes with the reservation and refreshes every
 *   LEASE_REFRESH_MS while its upload streams; expired or absent means dead.
 * UPLOAD_RESERVATION_TTL_MS (executions.ts) stays the last resort: any reservation older than it may be
 * taken over, whoever holds it (its late writer then loses at the create-only key, item 1).
 */
import os from 'node:os';
import { isoTimestamp } from '../core/clock.ts';
import { ConditionFailed, MaintenanceInProgress } from '../core/errors.ts';
import { randomToken } from '../core/ids.ts';
import { instanceLeaseKey } from '../core/keys.ts';
import { processAlive } from '../core/process.ts';
import type { Item } from '../store/item-store.ts';
import type { ProcessInstance, ServiceContext } from '../system/context.ts';
import { fenceCheck } from '../system/fence.ts';

export type { ProcessInstance } from '../system/context.ts';

/** How long a lease lasts without a refresh, and how often a live upload refreshes it. */
export const LEASE_MS = 2 * 60 * 1000;
export const LEASE_REFRESH_MS = 30 * 1000;

let current: ProcessInstance | undefined;

/** This process, created on first use. */
export function processInstance(): ProcessInstance {
  current ??= { id: randomToken(12), host: os.hostname(), pid: process.pid };
  return current;
}

export function instanceOf(ctx: ServiceContext): ProcessInstance {
  return ctx.instance ?? processInstance();
}

/** `{id}@{host}:{pid}`, the owner attribute of a reservation. */
export function ownerTag(i: ProcessInstance): string {
  return `${i.id}@${i.host}:${i.pid}`;
}

export function parseOwner(tag: unknown): ProcessInstance | undefined {
  if (typeof tag !== 'string') return undefined;
  const m = /^([A-Za-z0-9_-]+)@(.*):(\d+)$/.exec(tag);
  return m ? { id: m[1] as string, host: m[2] as string, pid: Number(m[3]) } : undefined;
}

/** What this host alone can tell: 'dead', 'alive' (this instance) or 'unknown' (ask the lease). */
export function localVerdict(owner: ProcessInstance, me: ProcessInstance): 'dead' | 'alive' | 'unknown' {
  if (owner.id === me.id) return 'alive';
  if (owner.host !== me.host) return 'unknown';
  if (owner.pid === me.pid || !processAlive(owner.pid)) return 'dead';
  return 'unknown';
}

/** Whether the reservation's owner is known to be dead (an owner of an unknown format is not). */
export async function ownerDead(ctx: ServiceContext, tag: unknown): Promise<boolean> {
  const owner = parseOwner(tag);
  if (!owner) return false;
  const verdict = localVerdict(owner, instanceOf(ctx));
  if (verdict !== 'unknown') return verdict === 'dead';
  const lease = await ctx.items.get(instanceLeaseKey(owner.id), { consistent: true });
  return typeof lease?.lease_until !== 'string' || Date.parse(lease.lease_until) <= ctx.clock.now().getTime();
}

function leaseItem(ctx: ServiceContext): Item {
  const me = instanceOf(ctx);
  return {
    ...instanceLeaseKey(me.id),
    type: 'instance_lease',
    instance: ownerTag(me),
    lease_until: isoTimestamp(new Date(ctx.clock.now().getTime() + LEASE_MS)),
  };
}

/** When this process last wrote each instance's lease, per store: the lease is valid LEASE_MS from then. */
const written = new WeakMap<object, Map<string, number>>();

/**
 * Makes sure this instance's lease is valid for at least half of LEASE_MS before a reservation is
 * committed: one fenced put when it is older than that, none otherwise. A separate write, not part of the
 * reservation's transaction: in one, every reservation a node makes would write the node's one lease
 * item, so concurrent uploads of different artifacts on a node would share (and, on DynamoDB, cancel
 * each other on) one item. A reservation therefore never exists with an owner whose lease has less
 * than LEASE_MS / 2 left, and whileLeased keeps it fresh while the upload streams.
 */
export async function ensureLease(ctx: ServiceContext): Promise<void> {
  const me = instanceOf(ctx);
  const now = ctx.clock.now().getTime();
  let byId = written.get(ctx.items);
  if (!byId) written.set(ctx.items, (byId = new Map()));
  const last = byId.get(me.id);
  if (last !== undefined && last <= now && now - last < LEASE_MS / 2) return;
  // Fenced like the reservation it precedes: a refused publisher writes nothing, not even its lease.
  try {
    await ctx.items.transactWrite([{ op: 'put', item: leaseItem(ctx) }, fenceCheck(ctx, { kind: 'installation' })]);
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 1) throw new MaintenanceInProgress();
    throw e;
  }
  byId.set(me.id, now);
}

/** Keeps this instance's lease fresh while `work` runs (an upload streaming for longer than LEASE_MS). */
export async function whileLeased<T>(ctx: ServiceContext, work: () => Promise<T>): Promise<T> {
  const timer = setInterval(() => {
    const at = ctx.clock.now().getTime();
    ctx.items
      .put(leaseItem(ctx))
      .then(() => written.get(ctx.items)?.set(instanceOf(ctx).id, at))
      .catch(() => {});
  }, LEASE_REFRESH_MS);
  timer.unref();
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
