/**
 * Persistent host pins (seed 004: "host-provided SHA-256 pins"; issue 17 B8): digests the installation
 * itself keeps, whatever a run's host supplies. Stored in the table, so they travel with every backup
 * and restore:
 *   PINS / PIN#{digest}        type `pin`: {digest, reason, added_by (a human Principal), added_at}
 *   PINS / LOG#{at}#{ulid}     type `pin_event`: the permanent record of one add or remove (who, when,
 *                              why; a removal also keeps who had added the pin and why), like the
 *                              epoch's EPOCH#{n} records. It names the digest by its hex only
 *                              (`digest_hex`), so the reference scan does not read a past pin as a
 *                              reference: removing a pin must let the normal protocol proceed.
 * Every add and remove is one transaction: the pin item, its log record, the maintenance-fence check (a
 * pin never changes under a running maintenance, which would otherwise not honour it) and the audit
 * sinks' `pin_added` / `pin_removed` event (the telemetry outbox; a full queue counts a drop instead).
 * Only human principals change pins (the entry point applies runtime/human-rules.ts too).
 *
 * Retention merges `storedPins` into every run and every prepared purge; the `pin` item's digest is also
 * a digest-named string to the reference scan, so a pinned object is kept by the scan itself.
 */

import { commitWithSinks, sinkOpsFor } from '../audit/sink-commit.ts';
import { parseDigest } from '../core/digest.ts';
import { ConditionFailed, Conflict, Forbidden, InvalidInput, MaintenanceInProgress, NotFound } from '../core/errors.ts';
import { newId } from '../core/ids.ts';
import { PIN_LOG_SK_PREFIX, PIN_SK_PREFIX, PINS_PK, pinLogSk, pinSk } from '../core/keys.ts';
import type { Principal } from '../lifecycle/model.ts';
import { cond, type Item, type ItemStore, MAX_PAGE_LIMIT, MAX_TRANSACT_OPS, type TransactOp } from '../store/item-store.ts';
import type { AuditEvent, ServiceContext } from '../system/context.ts';
import { fenceCheck, fenceKey, readFence } from '../system/fence.ts';
import { epochCheck, readEpoch } from '../system/state.ts';

export const MAX_PIN_REASON_LENGTH = 500;
const DIGEST_PREFIX = 'sha256:';

export interface Pin {
  digest: string;
  reason: string;
  added_by: Principal;
  added_at: string;
}

export interface PinEvent {
  action: 'added' | 'removed';
  digest: string;
  by: Principal;
  at: string;
  reason: string;
  /** On a removal: who had added the pin, when and why. */
  pin?: Omit<Pin, 'digest'>;
}

export type PinDeps = Pick<ServiceContext, 'items' | 'clock' | 'layout' | 'auditSinks'>;

/** Every stored pin's digest, sorted (the SK order): what a run and a prepared purge merge with the host's. */
export async function storedPins(items: ItemStore): Promise<string[]> {
  const out: string[] = [];
  for await (const p of listPins(items)) out.push(p.digest);
  return out;
}

/** The stored pins in digest order, one page at a time (pins may be many). */
export async function* listPins(items: ItemStore, opts: { pageSize?: number } = {}): AsyncGenerator<Pin> {
  for await (const item of pages(items, PIN_SK_PREFIX, opts.pageSize)) yield toPin(item);
}

/** The record of every pin add and remove, oldest first (optionally of one digest only). */
export async function* pinHistory(items: ItemStore, opts: { digest?: string; pageSize?: number } = {}): AsyncGenerator<PinEvent> {
  for await (const item of pages(items, PIN_LOG_SK_PREFIX, opts.pageSize)) {
    const e = toEvent(item);
    if (opts.digest === undefined || e.digest === opts.digest) yield e;
  }
}

/** Pins `digest` for `by` (a human) with `reason`; Conflict when it is pinned already. */
export async function addPin(ctx: PinDeps, digest: string, by: Principal, reason: string): Promise<Pin> {
  const d = parseDigest(digest);
  const why = checkedChange(by, reason, 'pinning a digest');
  const at = ctx.clock.now().toISOString();
  const pin: Pin = { digest: d, reason: why, added_by: { id: by.id, kind: by.kind }, added_at: at };
  const put: TransactOp = { op: 'put', item: { PK: PINS_PK, SK: pinSk(d), type: 'pin', ...pin }, condition: cond.notExists() };
  try {
    await commitChange(ctx, put, { action: 'added', digest: d, by: pin.added_by, at, reason: why });
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 0) {
      const current = await getPin(ctx.items, d);
      throw new Conflict(
        current
          ? `${d} is pinned already, by ${current.added_by.id} at ${current.added_at}: ${current.reason}`
          : `${d} changed while it was being pinned; retry`,
      );
    }
    throw e;
  }
  return pin;
}

/** Removes the pin of `digest` for `by` (a human) with `reason`; NotFound when it is not pinned. */
export async function removePin(ctx: PinDeps, digest: string, by: Principal, reason: string): Promise<PinEvent> {
  const d = parseDigest(digest);
  const why = checkedChange(by, reason, 'removing a pin');
  const current = await getPin(ctx.items, d);
  if (!current) throw new NotFound(`${d} is not pinned`);
  const at = ctx.clock.now().toISOString();
  const { digest: _d, ...was } = current;
  const event: PinEvent = { action: 'removed', digest: d, by: { id: by.id, kind: by.kind }, at, reason: why, pin: was };
  const del: TransactOp = { op: 'delete', key: { PK: PINS_PK, SK: pinSk(d) }, condition: cond.eq('added_at', current.added_at) };
  try {
    await commitChange(ctx, del, event);
  } catch (e) {
    if (e instanceof ConditionFailed && e.failedIndex === 0)
      throw new Conflict(`the pin of ${d} changed while it was being removed; retry`);
    throw e;
  }
  return event;
}

export async function getPin(items: ItemStore, digest: string): Promise<Pin | undefined> {
  const item = await items.get({ PK: PINS_PK, SK: pinSk(digest) }, { consistent: true });
  return item ? toPin(item) : undefined;
}

function checkedChange(by: Principal, reason: string, what: string): string {
  if (by.kind !== 'human') throw new Forbidden(`${what} needs a human operator, not ${by.kind} ${by.id}`);
  const why = reason.trim();
  if (why === '' || why.length > MAX_PIN_REASON_LENGTH)
    throw new InvalidInput(`${what} needs a reason of 1–${MAX_PIN_REASON_LENGTH} characters`);
  return why;
}

/**
 * The pin write, its log record and the fence check in one transaction, with the audit sinks' event.
 * While a maintenance holds the fence the change is refused (MAINTENANCE): that maintenance read its
 * pins when it began. One exception: a fence abandoned in an older epoch (a crashed purge, waiting for
 * `alp maintenance release`) — its holder can no longer commit, and the release's recovery scan, which
 * runs after it takes the fence over, reads the stored pins. Then the transaction conditions on that
 * abandoned fence (same token, same epoch) and on the current epoch instead, so a takeover in between
 * refuses it.
 */
async function commitChange(ctx: PinDeps, op: TransactOp, event: PinEvent): Promise<void> {
  const id = newId(ctx.clock);
  const hex = event.digest.slice(DIGEST_PREFIX.length);
  const { digest: _d, ...rest } = event;
  const log: Item = { PK: PINS_PK, SK: pinLogSk(event.at, id), type: 'pin_event', digest_hex: hex, ...rest };
  const audit: AuditEvent = {
    event_id: `pin:${hex}:${event.action}:${id}`,
    type: `pin_${event.action}`,
    aggregate_id: `pin:${hex}`,
    timestamp: event.at,
    chained: false,
  };
  const attempt = async (fenceOps: TransactOp[]) => {
    const core: TransactOp[] = [op, { op: 'put', item: log, condition: cond.notExists() }, ...fenceOps];
    const sinks = await sinkOpsFor(ctx.auditSinks, [audit], MAX_TRANSACT_OPS - core.length);
    await commitWithSinks((sinkOps) => ctx.items.transactWrite([...core, ...sinkOps]), sinks, core.length);
  };
  try {
    await attempt([fenceCheck(ctx)]);
    return;
  } catch (e) {
    if (!(e instanceof ConditionFailed && e.failedIndex === 2)) throw e;
  }
  const f = await readFence(ctx);
  const epoch = await readEpoch(ctx.items);
  if (f && f.epoch < epoch) {
    const onAbandoned: TransactOp = {
      op: 'check',
      key: fenceKey,
      condition: cond.and(cond.eq('token', f.token), cond.eq('epoch', f.epoch)),
    };
    try {
      await attempt([onAbandoned, epochCheck(epoch)]);
      return;
    } catch (e) {
      if (!(e instanceof ConditionFailed && (e.failedIndex === 2 || e.failedIndex === 3))) throw e;
    }
  }
  throw new MaintenanceInProgress(
    f
      ? `maintenance is in progress: ${f.holder} (${f.purpose}) holds the fence in epoch ${f.epoch}; change pins when it ends`
      : 'maintenance is in progress (the fence is being taken or released); change pins when it ends',
    f ? { holder: f.holder, epoch: f.epoch } : undefined,
  );
}

async function* pages(items: ItemStore, prefix: string, pageSize = MAX_PAGE_LIMIT): AsyncGenerator<Item> {
  let cursor: string | undefined;
  do {
    const page = await items.query({
      pk: PINS_PK,
      sk: { beginsWith: prefix },
      limit: pageSize,
      consistent: true,
      ...(cursor ? { cursor } : {}),
    });
    yield* page.items;
    cursor = page.cursor;
  } while (cursor);
}

function toPin(item: Item): Pin {
  return {
    digest: item.digest as string,
    reason: item.reason as string,
    added_by: item.added_by as Principal,
    added_at: item.added_at as string,
  };
}

function toEvent(item: Item): PinEvent {
  return {
    action: item.action as PinEvent['action'],
    digest: `${DIGEST_PREFIX}${item.digest_hex as string}`,
    by: item.by as Principal,
    at: item.at as string,
    reason: item.reason as string,
    ...(item.pin ? { pin: item.pin as NonNullable<PinEvent['pin']> } : {}),
  };
}
