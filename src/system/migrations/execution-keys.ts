/**
 * Migration installation 1 → 2 (issue 16 item 9): an execution's output and finish records leave the
 * RFC's `EXEC#` sort-key prefix, so that `begins_with(SK, 'EXEC#')` reads one item per run (§9.1):
 *
 *   `EXEC#{run}#OUTPUT#{name}` → `OUTPUT#{run}#{name}`,   `EXEC#{run}#FINISH` → `FINISH#{run}`.
 *
 * Each move is ONE transaction: put the item under its new key (conditioned on that key not
 * existing) carrying `moved_from_sk` = the old key, and delete the old key (conditioned on its `hash`
 * being the one read). Nothing else of the item changes, so its audit hash still verifies: the hash is
 * computed with SK = `moved_from_sk` (src/audit/hash.ts, docs/audit-format.md §2 "Moved entries").
 *
 * Idempotent: a re-run after a crash finds the moved items under their new key (skipped) and the
 * others still under the old one; a racing migrator's transaction fails its condition and the move is
 * then confirmed by reading the old key back (gone). Readers find these records by `type`, never by
 * SK, so an installation half-way through reads the same (and packed history segments, immutable
 * objects, keep the old keys for good).
 *
 * Only the ItemStore contract is used (scan, get, transactWrite): the same code on both engines.
 */
import { canonicalJson } from '../../core/canonical-json.ts';
import { ConditionFailed, IntegrityError, TransactionConflict } from '../../core/errors.ts';
import { MOVED_FROM_SK, movedExecutionSk } from '../../core/keys.ts';
import { cond, type Item, type ItemStore } from '../../store/item-store.ts';

/** The audit types whose keys this migration moves. */
const MOVED_TYPES: readonly unknown[] = ['execution_output', 'execution_finish'];

export interface MoveReport {
  scanned: number;
  moved: number;
  /** Moves found already done by someone else (a racing migrator, or before a crash). */
  already: number;
}

export interface MoveOptions {
  /** Test hook: called after each item this run moved (a crash is injected by throwing). */
  afterMove?: (moved: number) => void;
  /** Scan page size. */
  pageSize?: number;
}

/** The item's schema-2 form, or undefined when it needs no move. */
export function movedForm(item: Item): Item | undefined {
  if (!item.PK.startsWith('ART#') || !MOVED_TYPES.includes(item.type) || item[MOVED_FROM_SK] !== undefined) return undefined;
  const sk = movedExecutionSk(item.SK);
  return sk === undefined ? undefined : { ...item, SK: sk, [MOVED_FROM_SK]: item.SK };
}

export async function moveExecutionRecords(items: ItemStore, opts: MoveOptions = {}): Promise<MoveReport> {
  const report: MoveReport = { scanned: 0, moved: 0, already: 0 };
  let cursor: string | undefined;
  do {
    const page = await items.scan({ ...(cursor ? { cursor } : {}), limit: opts.pageSize ?? 500 });
    for (const item of page.items) {
      report.scanned++;
      const next = movedForm(item);
      if (!next) continue;
      if (await moveOne(items, item, next)) {
        report.moved++;
        opts.afterMove?.(report.moved);
      } else report.already++;
    }
    cursor = page.cursor;
  } while (cursor);
  return report;
}

/** Same recorded content: everything but the key (and the marker the move adds). */
function sameEntry(old: Item, moved: Item): boolean {
  const { SK: _a, ...o } = old;
  const { SK: _b, [MOVED_FROM_SK]: _c, ...m } = moved;
  return canonicalJson(o) === canonicalJson(m);
}

/** A move's transaction may fail this many times on concurrent transactions before the migration gives up (re-run it). */
const MOVE_ATTEMPTS = 5;

/**
 * Moves one item; false when the move was already done. A condition failure or a transaction
 * conflict (DynamoDB cancels one of two concurrent transactions on an item) applied nothing: the keys
 * are read back to decide. Throws when they hold something else.
 */
async function moveOne(items: ItemStore, old: Item, next: Item): Promise<boolean> {
  const oldKey = { PK: old.PK, SK: old.SK };
  let failure: unknown;
  for (let attempt = 1; ; attempt++) {
    try {
      await items.transactWrite([
        { op: 'put', item: next, condition: cond.notExists() },
        { op: 'delete', key: oldKey, condition: cond.eq('hash', old.hash as string) },
      ]);
      return true;
    } catch (e) {
      if (!(e instanceof ConditionFailed) && !(e instanceof TransactionConflict)) throw e;
      failure = e;
    }
    const stillOld = await items.get(oldKey, { consistent: true });
    const atNew = await items.get({ PK: next.PK, SK: next.SK }, { consistent: true });
    if (!stillOld) return false; // moved by a racing migrator (atomically), or removed by compaction after packing
    if (!atNew && stillOld.hash === old.hash) {
      if (attempt >= MOVE_ATTEMPTS) throw failure;
      continue; // a conflict applied nothing: try again
    }
    if (atNew && sameEntry(stillOld, atNew) && atNew[MOVED_FROM_SK] === old.SK) {
      // Both present (not by this migration's single transaction): the copy is complete, drop the old
      // one if it is still the entry read.
      await items.delete(oldKey, { condition: cond.eq('hash', old.hash as string) }).catch((e: unknown) => {
        if (!(e instanceof ConditionFailed)) throw e;
      });
      return false;
    }
    throw new IntegrityError(
      `migration installation-2: cannot move ${old.PK} ${old.SK}: the item changed while it was moved, or ${next.SK} holds another item`,
    );
  }
}
