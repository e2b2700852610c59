/**
 * The write operations of the SQLite engine, run inside a caller's savepoint (group-commit.ts) on the
 * write connection. The CPU of a write is kept to what its conditions need:
 * - a condition about existence only (exists / notExists, and their and / or / not) is answered by
 *   probing the key (`SELECT 1`), without reading or parsing the item; an operation without a
 *   condition reads nothing (a put or delete) or reads only what the update needs;
 * - a condition that also asks whether one attribute exists (the fence check) is answered by SQLite
 *   from the stored JSON (json_type), again without parsing the item in JavaScript;
 * - any other condition, and an update, read and parse the current item once per operation;
 * - a transaction evaluates each operation's condition and applies it in one pass, in index order:
 *   every operation touches another item, so each condition still sees the state before the
 *   transaction, and the first failing operation is the lowest index; the caller's savepoint undoes
 *   the operations applied before it.
 * Inputs are validated once, by the store before the work is submitted (semantics.ts), and each item
 * is serialised once: the row stores the attributes' JSON that validation made (attrsJson).
 */
import type Database from 'better-sqlite3';
import { ConditionFailed } from '../../core/errors.ts';
import type { Condition, Item, ItemKey, TransactOp, UpdateSpec } from '../item-store.ts';
import { applyUpdate, attrsJson, evaluateCondition } from '../semantics.ts';
import { type Row, toItem } from './scans.ts';

/** Whether `leaf` holds for every condition below the and / or / not combinators of `c`. */
function everyLeaf(c: Condition, leaf: (x: Condition) => boolean): boolean {
  switch (c.kind) {
    case 'and':
      return c.all.every((x) => everyLeaf(x, leaf));
    case 'or':
      return c.any.every((x) => everyLeaf(x, leaf));
    case 'not':
      return everyLeaf(c.cond, leaf);
    default:
      return leaf(c);
  }
}

/** Whether a condition looks at the item's existence only (never at an attribute). */
function existenceOnly(c: Condition): boolean {
  return everyLeaf(c, (x) => x.kind === 'exists' || x.kind === 'notExists');
}

/**
 * The one attribute a condition looks at when it asks only whether that attribute exists (besides the
 * item's existence), e.g. the fence check `attrNotExists('holder')`: SQLite answers it with json_type
 * on the stored JSON, without reading it into JavaScript and parsing it. Undefined for any other
 * condition, and for names the JSON path or the parsed item would treat differently (keys, index
 * attributes and names an object inherits, which `item[attr]` finds on a parsed item).
 */
function presenceAttr(c: Condition): string | undefined {
  let attr: string | undefined;
  const leaf = (x: Condition): boolean => {
    if (x.kind === 'exists' || x.kind === 'notExists') return true;
    if (x.kind !== 'attrExists' && x.kind !== 'attrNotExists') return false;
    if (attr !== undefined && attr !== x.attr) return false;
    attr = x.attr;
    return /^[A-Za-z_][A-Za-z0-9_]*$/.test(x.attr) && !COLUMN_ATTRS.has(x.attr) && !(x.attr in Object.prototype);
  };
  return everyLeaf(c, leaf) ? attr : undefined;
}

const COLUMN_ATTRS = new Set(['PK', 'SK', 'GSI1PK', 'GSI1SK']);

export class SqliteWrites {
  private readonly stmts: ReturnType<SqliteWrites['prepare']>;

  constructor(private readonly db: Database.Database) {
    this.stmts = this.prepare();
  }

  private prepare() {
    const db = this.db;
    return {
      get: db.prepare<[string, string], Row>('SELECT PK, SK, GSI1PK, GSI1SK, attrs FROM items WHERE PK = ? AND SK = ?'),
      exists: db.prepare<[string, string], number>('SELECT 1 FROM items WHERE PK = ? AND SK = ?').pluck(),
      // json_type is NULL for a missing attribute, 'null' for one stored as JSON null (which exists)
      present: db
        .prepare<[string, string, string], number>('SELECT json_type(attrs, ?) IS NOT NULL FROM items WHERE PK = ? AND SK = ?')
        .pluck(),
      upsert: db.prepare<[string, string, string | null, string | null, string]>(
        'INSERT INTO items (PK, SK, GSI1PK, GSI1SK, attrs) VALUES (?, ?, ?, ?, ?) ON CONFLICT (PK, SK) DO UPDATE SET GSI1PK = excluded.GSI1PK, GSI1SK = excluded.GSI1SK, attrs = excluded.attrs',
      ),
      del: db.prepare<[string, string]>('DELETE FROM items WHERE PK = ? AND SK = ?'),
      setAttrs: db.prepare<[string, string, string]>('UPDATE items SET attrs = ? WHERE PK = ? AND SK = ?'),
    };
  }

  put(item: Item, condition: Condition | undefined, written: ItemKey[]): void {
    if (condition && !this.holds(condition, item)) throw new ConditionFailed(`condition failed on put ${item.PK}/${item.SK}`);
    this.store(item, written);
  }

  update(key: ItemKey, update: UpdateSpec, condition: Condition | undefined, written: ItemKey[]): Item {
    const current = this.read(key);
    if (condition && !evaluateCondition(condition, current)) {
      throw new ConditionFailed(`condition failed on update ${key.PK}/${key.SK}`);
    }
    const next = applyUpdate(key, current, update);
    this.store(next, written);
    return next;
  }

  delete(key: ItemKey, condition: Condition | undefined): void {
    if (condition && !this.holds(condition, key)) throw new ConditionFailed(`condition failed on delete ${key.PK}/${key.SK}`);
    this.stmts.del.run(key.PK, key.SK);
  }

  transact(ops: TransactOp[], written: ItemKey[]): void {
    for (let index = 0; index < ops.length; index++) {
      const op = ops[index] as TransactOp;
      if (!this.apply(op, written)) throw cancelled(op, index);
    }
  }

  /** Applies one operation of a transaction; false (nothing applied) when its condition fails. */
  private apply(op: TransactOp, written: ItemKey[]): boolean {
    if (op.op === 'update') {
      const current = this.read(op.key);
      if (op.condition && !evaluateCondition(op.condition, current)) return false;
      const next = applyUpdate(op.key, current, op.update);
      if (current && current.GSI1PK === next.GSI1PK && current.GSI1SK === next.GSI1SK) {
        this.stmts.setAttrs.run(attrsJson(next), next.PK, next.SK);
        written.push({ PK: next.PK, SK: next.SK });
      } else this.store(next, written);
      return true;
    }
    const key = op.op === 'put' ? op.item : op.key;
    if (op.condition && !this.holds(op.condition, key)) return false;
    if (op.op === 'put') this.store(op.item, written);
    else if (op.op === 'delete') this.stmts.del.run(key.PK, key.SK);
    return true;
  }

  batchPut(items: Item[], written: ItemKey[]): void {
    for (const item of items) this.store(item, written);
  }

  /** Whether the condition holds on the item at `key` now, reading no more of it than it needs. */
  private holds(condition: Condition, key: ItemKey): boolean {
    if (existenceOnly(condition)) {
      const present = this.stmts.exists.get(key.PK, key.SK) !== undefined;
      return evaluateCondition(condition, present ? { PK: key.PK, SK: key.SK } : undefined);
    }
    const attr = presenceAttr(condition);
    if (attr !== undefined) {
      const has = this.stmts.present.get(`$.${attr}`, key.PK, key.SK);
      // The item as far as the condition can tell: present or not, with the attribute or without.
      return evaluateCondition(condition, has === undefined ? undefined : { PK: key.PK, SK: key.SK, ...(has ? { [attr]: true } : {}) });
    }
    return evaluateCondition(condition, this.read(key));
  }

  private read(key: ItemKey): Item | undefined {
    const row = this.stmts.get.get(key.PK, key.SK);
    return row ? toItem(row) : undefined;
  }

  private store(item: Item, written: ItemKey[]): void {
    const { PK, SK, GSI1PK, GSI1SK } = item;
    const gsiPk = (GSI1PK as string | undefined) ?? null;
    const gsiSk = (GSI1SK as string | undefined) ?? null;
    this.stmts.upsert.run(PK, SK, gsiPk, gsiSk, attrsJson(item)); // read-only: SQLite refuses it
    written.push({ PK, SK });
  }
}

function cancelled(op: TransactOp, index: number): ConditionFailed {
  const key = op.op === 'put' ? op.item : op.key;
  return new ConditionFailed(`transaction cancelled: condition of operation ${index} (${op.op} ${key.PK}/${key.SK}) failed`, index);
}
