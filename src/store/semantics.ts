/**
 * The engine-independent parts of the ItemStore semantics: condition evaluation, updates, limits and
 * cursors. The SQLite engine evaluates with these directly; the DynamoDB engine compiles conditions to
 * expressions with the same meaning and checks the same limits before calling the service.
 */
import { canonicalJson } from '../core/canonical-json.ts';
import { InvalidInput } from '../core/errors.ts';
import {
  type Condition,
  type Item,
  type ItemKey,
  MAX_ITEM_BYTES,
  MAX_PAGE_LIMIT,
  MAX_TRANSACT_BYTES,
  MAX_TRANSACT_OPS,
  type Scalar,
  type SkCondition,
  type TransactOp,
  type UpdateSpec,
} from './item-store.ts';

const KEY_ATTRS = ['PK', 'SK'] as const;
const INDEX_ATTRS = ['GSI1PK', 'GSI1SK'] as const;

export function evaluateCondition(c: Condition, item: Item | undefined): boolean {
  switch (c.kind) {
    case 'exists':
      return item !== undefined;
    case 'notExists':
      return item === undefined;
    case 'attrExists':
      return item !== undefined && item[c.attr] !== undefined;
    case 'attrNotExists':
      return item === undefined || item[c.attr] === undefined;
    case 'eq':
      return item !== undefined && sameScalar(item[c.attr], c.value);
    case 'in':
      return item !== undefined && c.values.some((v) => sameScalar(item[c.attr], v));
    case 'lt':
    case 'le':
    case 'gt':
    case 'ge': {
      if (item === undefined) return false;
      const actual = item[c.attr];
      if (typeof actual !== typeof c.value || (typeof actual !== 'string' && typeof actual !== 'number')) return false;
      const cmp = compare(actual as string | number, c.value);
      return c.kind === 'lt' ? cmp < 0 : c.kind === 'le' ? cmp <= 0 : c.kind === 'gt' ? cmp > 0 : cmp >= 0;
    }
    case 'and':
      return c.all.every((x) => evaluateCondition(x, item));
    case 'or':
      return c.any.some((x) => evaluateCondition(x, item));
    case 'not':
      return !evaluateCondition(c.cond, item);
  }
}

function sameScalar(actual: unknown, expected: Scalar): boolean {
  if (actual === undefined) return false;
  return actual === expected;
}

/** Strings compare by their UTF-8 bytes, as DynamoDB and SQLite's BINARY collation do. */
export function compare(a: string | number, b: string | number): number {
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  return Buffer.compare(Buffer.from(String(a), 'utf8'), Buffer.from(String(b), 'utf8'));
}

export function applyUpdate(key: ItemKey, current: Item | undefined, update: UpdateSpec): Item {
  validateUpdate(update);
  const next: Item = current ? { ...current } : { PK: key.PK, SK: key.SK };
  for (const [attr, value] of Object.entries(update.set ?? {})) {
    if (value === undefined) delete next[attr];
    else next[attr] = value;
  }
  for (const [attr, delta] of Object.entries(update.add ?? {})) {
    const before = next[attr];
    if (before !== undefined && typeof before !== 'number') throw new InvalidInput(`cannot add to non-numeric attribute ${attr}`);
    next[attr] = (before ?? 0) + delta;
  }
  for (const attr of update.remove ?? []) delete next[attr];
  validateItem(next);
  return next;
}

export function validateKey(key: ItemKey): void {
  if (typeof key?.PK !== 'string' || key.PK.length === 0) throw new InvalidInput('item key needs a non-empty PK');
  if (typeof key.SK !== 'string' || key.SK.length === 0) throw new InvalidInput('item key needs a non-empty SK');
  // A UTF-16 code unit is at most 3 UTF-8 bytes: short keys need no byte count.
  const long = (s: string, max: number) => s.length * 3 > max && Buffer.byteLength(s) > max;
  if (long(key.PK, 2048) || long(key.SK, 1024)) throw new InvalidInput('item key too long');
}

export function validateItem(item: Item): number {
  validateKey(item);
  for (const attr of INDEX_ATTRS) {
    const v = item[attr];
    if (v !== undefined && (typeof v !== 'string' || v.length === 0)) throw new InvalidInput(`${attr} must be a non-empty string`);
  }
  const bytes = itemBytes(item);
  if (bytes > MAX_ITEM_BYTES) throw new InvalidInput(`item ${item.PK}/${item.SK} is ${bytes} bytes; at most ${MAX_ITEM_BYTES} are allowed`);
  return bytes;
}

/** The JSON of an item's attributes other than its keys, as the last validateItem of it serialised it. */
const validatedAttrs = new WeakMap<Item, string>();

/**
 * The item's size as JSON (the whole item, keys included), from one serialisation of its other
 * attributes, which an engine that stores them as JSON takes with attrsJson instead of serialising again.
 */
function itemBytes(item: Item): number {
  const { PK, SK, GSI1PK, GSI1SK, ...rest } = item;
  const json = JSON.stringify(rest);
  validatedAttrs.set(item, json);
  const keys = keyBytes('PK', PK) + keyBytes('SK', SK) + keyBytes('GSI1PK', GSI1PK) + keyBytes('GSI1SK', GSI1SK);
  // Each key member brings its comma; without other attributes there is one comma fewer.
  return Buffer.byteLength(json, 'utf8') + keys - (json === '{}' ? 1 : 0);
}

/** A key attribute's `"name":value,` in the item's JSON (0 when absent). */
function keyBytes(name: string, value: unknown): number {
  return value === undefined ? 0 : name.length + 4 + Buffer.byteLength(JSON.stringify(value), 'utf8');
}

/**
 * The JSON of the item's attributes other than PK, SK, GSI1PK and GSI1SK. Taken once: the store calls
 * it in the same synchronous step that validated the item, so nothing can have changed it between; an
 * item that was not validated (an update's result) is serialised here.
 */
export function attrsJson(item: Item): string {
  const json = validatedAttrs.get(item);
  if (json !== undefined) {
    validatedAttrs.delete(item);
    return json;
  }
  const { PK: _pk, SK: _sk, GSI1PK: _gpk, GSI1SK: _gsk, ...rest } = item;
  return JSON.stringify(rest);
}

function validateUpdate(update: UpdateSpec): void {
  const touched = [...Object.keys(update.set ?? {}), ...Object.keys(update.add ?? {}), ...(update.remove ?? [])];
  for (const attr of touched) {
    if ((KEY_ATTRS as readonly string[]).includes(attr)) throw new InvalidInput(`cannot update key attribute ${attr}`);
    if (attr.length === 0) throw new InvalidInput('attribute names must not be empty');
  }
  if (new Set(touched).size !== touched.length) throw new InvalidInput('an update touches an attribute twice');
  for (const [attr, delta] of Object.entries(update.add ?? {})) {
    if (typeof delta !== 'number' || !Number.isFinite(delta)) throw new InvalidInput(`add ${attr} needs a finite number`);
  }
}

function opKey(op: TransactOp): ItemKey {
  return op.op === 'put' ? { PK: op.item.PK, SK: op.item.SK } : op.key;
}

export function validateTransaction(ops: TransactOp[]): void {
  if (ops.length === 0) throw new InvalidInput('a transaction needs at least one operation');
  if (ops.length > MAX_TRANSACT_OPS)
    throw new InvalidInput(`a transaction holds at most ${MAX_TRANSACT_OPS} operations, got ${ops.length}`);
  const seen = new Set<string>();
  let bytes = 0;
  for (const op of ops) {
    const key = opKey(op);
    validateKey(key);
    const id = `${key.PK}\u0000${key.SK}`;
    if (seen.has(id)) throw new InvalidInput(`a transaction touches ${key.PK}/${key.SK} more than once`);
    seen.add(id);
    if (op.op === 'put') bytes += validateItem(op.item);
    else if (op.op === 'update') bytes += Buffer.byteLength(JSON.stringify(op.update));
  }
  if (bytes > MAX_TRANSACT_BYTES) throw new InvalidInput(`a transaction holds at most ${MAX_TRANSACT_BYTES} bytes`);
}

export function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return MAX_PAGE_LIMIT;
  if (!Number.isInteger(limit) || limit < 1) throw new InvalidInput('limit must be a positive integer');
  return Math.min(limit, MAX_PAGE_LIMIT);
}

export function validateSk(sk: SkCondition | undefined): void {
  if (!sk) return;
  const values = 'between' in sk ? sk.between : Object.values(sk);
  for (const v of values) if (typeof v !== 'string') throw new InvalidInput('sort key conditions take strings');
  if ('between' in sk && compare(sk.between[0], sk.between[1]) > 0) throw new InvalidInput('between needs low <= high');
}

/** Cursors are opaque to callers: base64url JSON of the query's partition and the last key returned. */
interface CursorState {
  pk: string;
  index: string;
  last: Record<string, string>;
}

export function encodeCursor(state: CursorState): string {
  return Buffer.from(canonicalJson(state), 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string, pk: string, index: string): Record<string, string> {
  try {
    if (cursor.length > 8192) throw new Error('too long');
    const state = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as CursorState;
    if (state.pk !== pk || state.index !== index || typeof state.last !== 'object' || state.last === null) throw new Error('mismatch');
    for (const v of Object.values(state.last)) if (typeof v !== 'string') throw new Error('bad key');
    return state.last;
  } catch {
    throw new InvalidInput('invalid cursor for this query');
  }
}
