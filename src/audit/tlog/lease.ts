/**
 * The sequencer's lease (docs/design.md §10 "Sequencing", point 2): item `TLOG` / `LEASE` {holder,
 * token, expires_at}. Taken when free or expired (token + 1), renewed by its holder (same token).
 * A round commits only while its token is the lease's (sequencer.ts: a check in the STATE commit), so a
 * paused former holder cannot commit after another took over. Written once per round, never per
 * transition.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { ConditionFailed } from '../../core/errors.ts';
import { cond, type Item, type ItemKey, type TransactOp } from '../../store/item-store.ts';
import type { ServiceContext } from '../../system/context.ts';

export const TLOG_PK = 'TLOG';
export const LEASE_KEY: ItemKey = { PK: TLOG_PK, SK: 'LEASE' };
export const STATE_KEY: ItemKey = { PK: TLOG_PK, SK: 'STATE' };
export const DEFAULT_LEASE_MS = 10_000;

/** A holder name unique to this process and sequencer: host, pid and a random part. */
export function defaultHolder(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

export interface Lease {
  holder: string;
  token: number;
  expiresAt: number;
}

/** The lease for `holder` (taken or renewed), or undefined while another holder's is unexpired. */
export async function acquireLease(
  ctx: Pick<ServiceContext, 'items' | 'clock'>,
  holder: string,
  ttlMs = DEFAULT_LEASE_MS,
): Promise<Lease | undefined> {
  const cur = await ctx.items.get(LEASE_KEY, { consistent: true });
  const now = ctx.clock.now().getTime();
  const curExpires = typeof cur?.expires_at === 'number' ? cur.expires_at : 0;
  const curToken = typeof cur?.token === 'number' ? cur.token : 0;
  if (cur && cur.holder !== holder && curExpires > now) return undefined;
  const renew = cur?.holder === holder && curExpires > now;
  const token = renew ? curToken : curToken + 1;
  const expiresAt = now + ttlMs;
  try {
    await ctx.items.update(
      LEASE_KEY,
      { set: { type: 'tlog_lease', holder, token, expires_at: expiresAt } },
      { condition: cur ? cond.and(cond.eq('token', curToken), cond.eq('holder', cur.holder as string)) : cond.notExists() },
    );
  } catch (e) {
    if (e instanceof ConditionFailed) return undefined;
    throw e;
  }
  return { holder, token, expiresAt };
}

/** Gives the lease up (expires it now) if still held with this token. */
export async function releaseLease(ctx: Pick<ServiceContext, 'items'>, lease: Lease): Promise<void> {
  try {
    await ctx.items.update(
      LEASE_KEY,
      { set: { expires_at: 0 } },
      { condition: cond.and(cond.eq('token', lease.token), cond.eq('holder', lease.holder)) },
    );
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
  }
}

/** The transaction check that the lease is still this one (no other holder took it since). */
export function leaseCheck(lease: Lease): TransactOp {
  return { op: 'check', key: LEASE_KEY, condition: cond.and(cond.eq('token', lease.token), cond.eq('holder', lease.holder)) };
}

export function isLeaseItem(item: Item | undefined): boolean {
  return item?.type === 'tlog_lease';
}
