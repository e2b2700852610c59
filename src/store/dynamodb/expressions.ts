/**
 * Compiles the ItemStore contract's conditions, updates and sort-key conditions into DynamoDB
 * expressions. Every attribute name and value goes through a placeholder (#nN / :vN), so reserved
 * words, dots and any other characters in names are safe.
 *
 * The compiled condition means exactly what semantics.ts evaluateCondition means:
 * - a comparison with a missing attribute is false (DynamoDB does this natively);
 * - a comparison between a string and a number is false (native too: DynamoDB compares typed values);
 * - eq/in with null test the NULL type (attribute_type(#a, 'NULL'));
 * - lt/le/gt/ge with a value that is neither string nor number are false in the model, so they compile
 *   to a constant false instead of reaching DynamoDB (which would refuse the expression);
 * - an empty `and` is true, an empty `or` / `in` is false (DynamoDB has no literals, so the constants are
 *   built from the key attribute: attribute_exists(PK) OR / AND attribute_not_exists(PK)).
 */
import { InvalidInput } from '../../core/errors.ts';
import type { Condition, Scalar, SkCondition, UpdateSpec } from '../item-store.ts';

/** DynamoDB allows at most 100 operands in one IN. */
const MAX_IN_OPERANDS = 100;

/**
 * Attribute removed by an update that changes nothing. TransactWriteItems needs an UpdateExpression,
 * and REMOVE of an absent attribute is a no-op that still upserts the item, which is what an empty
 * UpdateSpec means. The name is reserved: an item attribute with this exact name would be removed.
 */
export const NOOP_ATTRIBUTE = '\u0001alp-noop';

export class ExpressionBuilder {
  private readonly nameIds = new Map<string, string>();
  private readonly names: Record<string, string> = {};
  private readonly values: Record<string, unknown> = {};
  private valueCount = 0;

  name(attr: string): string {
    if (typeof attr !== 'string' || attr.length === 0) throw new InvalidInput('attribute names must be non-empty strings');
    let id = this.nameIds.get(attr);
    if (!id) {
      id = `#n${this.nameIds.size}`;
      this.nameIds.set(attr, id);
      this.names[id] = attr;
    }
    return id;
  }

  value(v: unknown): string {
    const id = `:v${this.valueCount++}`;
    this.values[id] = v;
    return id;
  }

  /** Placeholders for the request; undefined when empty (DynamoDB refuses empty maps). */
  attributeNames(): Record<string, string> | undefined {
    return this.nameIds.size > 0 ? this.names : undefined;
  }

  attributeValues(): Record<string, unknown> | undefined {
    return this.valueCount > 0 ? this.values : undefined;
  }

  private trueExpr(): string {
    const pk = this.name('PK');
    return `(attribute_exists(${pk}) OR attribute_not_exists(${pk}))`;
  }

  private falseExpr(): string {
    const pk = this.name('PK');
    return `(attribute_exists(${pk}) AND attribute_not_exists(${pk}))`;
  }

  condition(c: Condition): string {
    if (typeof c !== 'object' || c === null) throw new InvalidInput('a condition must be an object');
    switch (c.kind) {
      case 'exists':
        return `attribute_exists(${this.name('PK')})`;
      case 'notExists':
        return `attribute_not_exists(${this.name('PK')})`;
      case 'attrExists':
        return `attribute_exists(${this.name(c.attr)})`;
      case 'attrNotExists':
        return `attribute_not_exists(${this.name(c.attr)})`;
      case 'eq':
        return this.equals(c.attr, c.value);
      case 'in': {
        if (!Array.isArray(c.values)) throw new InvalidInput('in needs a list of values');
        const a = this.name(c.attr);
        const parts: string[] = [];
        const plain = c.values.filter((v) => v !== null);
        if (plain.length !== c.values.length) parts.push(this.equals(c.attr, null));
        for (const v of plain) checkScalar(v);
        for (let i = 0; i < plain.length; i += MAX_IN_OPERANDS) {
          const operands = plain.slice(i, i + MAX_IN_OPERANDS).map((v) => this.value(v));
          parts.push(`${a} IN (${operands.join(', ')})`);
        }
        if (parts.length === 0) return this.falseExpr();
        return parts.length === 1 ? (parts[0] as string) : `(${parts.join(' OR ')})`;
      }
      case 'lt':
      case 'le':
      case 'gt':
      case 'ge': {
        const a = this.name(c.attr);
        if (typeof c.value !== 'string' && typeof c.value !== 'number') return this.falseExpr();
        checkScalar(c.value);
        const op = { lt: '<', le: '<=', gt: '>', ge: '>=' }[c.kind];
        return `${a} ${op} ${this.value(c.value)}`;
      }
      case 'and':
        if (!Array.isArray(c.all)) throw new InvalidInput('and needs a list of conditions');
        if (c.all.length === 0) return this.trueExpr();
        if (c.all.length === 1) return parenthesized(this.condition(c.all[0] as Condition));
        return `(${c.all.map((x) => parenthesized(this.condition(x))).join(' AND ')})`;
      case 'or':
        if (!Array.isArray(c.any)) throw new InvalidInput('or needs a list of conditions');
        if (c.any.length === 0) return this.falseExpr();
        if (c.any.length === 1) return parenthesized(this.condition(c.any[0] as Condition));
        return `(${c.any.map((x) => parenthesized(this.condition(x))).join(' OR ')})`;
      case 'not':
        return `(NOT ${parenthesized(this.condition(c.cond))})`;
      default:
        throw new InvalidInput(`unknown condition kind ${JSON.stringify((c as { kind?: unknown }).kind)}`);
    }
  }

  private equals(attr: string, value: Scalar): string {
    const a = this.name(attr);
    if (value === null) return `attribute_type(${a}, ${this.value('NULL')})`;
    checkScalar(value);
    return `${a} = ${this.value(value)}`;
  }

  /** SET / ADD / REMOVE clauses; a `set` to undefined removes (as applyUpdate does). */
  update(spec: UpdateSpec): string {
    const sets: string[] = [];
    const adds: string[] = [];
    const removes: string[] = [];
    for (const [attr, v] of Object.entries(spec.set ?? {})) {
      if (v === undefined) removes.push(this.name(attr));
      else sets.push(`${this.name(attr)} = ${this.value(v)}`);
    }
    for (const [attr, delta] of Object.entries(spec.add ?? {})) adds.push(`${this.name(attr)} ${this.value(delta)}`);
    for (const attr of spec.remove ?? []) removes.push(this.name(attr));
    const clauses: string[] = [];
    if (sets.length) clauses.push(`SET ${sets.join(', ')}`);
    if (adds.length) clauses.push(`ADD ${adds.join(', ')}`);
    if (removes.length) clauses.push(`REMOVE ${removes.join(', ')}`);
    if (clauses.length === 0) clauses.push(`REMOVE ${this.name(NOOP_ATTRIBUTE)}`);
    return clauses.join(' ');
  }

  /**
   * The KeyConditionExpression of a query, or 'none' when the sort-key condition can match no item.
   * DynamoDB refuses an empty string as a key value, and no stored SK is empty, so conditions on ''
   * are resolved here: begins_with '' / > '' / >= '' match every item; = '' / < '' / <= '' none.
   */
  keyCondition(pkAttr: string, skAttr: string, pk: string, sk: SkCondition | undefined): string | 'none' {
    const pkExpr = `${this.name(pkAttr)} = ${this.value(pk)}`;
    if (!sk) return pkExpr;
    const s = () => this.name(skAttr);
    if ('beginsWith' in sk) return sk.beginsWith === '' ? pkExpr : `${pkExpr} AND begins_with(${s()}, ${this.value(sk.beginsWith)})`;
    if ('between' in sk) {
      const [low, high] = sk.between;
      if (high === '') return 'none';
      if (low === '') return `${pkExpr} AND ${s()} <= ${this.value(high)}`;
      return `${pkExpr} AND ${s()} BETWEEN ${this.value(low)} AND ${this.value(high)}`;
    }
    const [op, v] = Object.entries(sk)[0] as ['eq' | 'lt' | 'le' | 'gt' | 'ge', string];
    if (v === '') return op === 'gt' || op === 'ge' ? pkExpr : 'none';
    const sym = { eq: '=', lt: '<', le: '<=', gt: '>', ge: '>=' }[op];
    if (!sym) throw new InvalidInput(`unknown sort key condition ${JSON.stringify(op)}`);
    return `${pkExpr} AND ${s()} ${sym} ${this.value(v)}`;
  }
}

/**
 * `(expr)`, unless expr is already one parenthesized whole: DynamoDB refuses redundant parentheses
 * (`((a) OR (b))` wrapped again by an enclosing AND was "Invalid ConditionExpression").
 */
function parenthesized(expr: string): string {
  if (!expr.startsWith('(')) return `(${expr})`;
  let depth = 0;
  for (let i = 0; i < expr.length; i++) {
    if (expr[i] === '(') depth++;
    else if (expr[i] === ')' && --depth === 0) return i === expr.length - 1 ? expr : `(${expr})`;
  }
  return `(${expr})`;
}

function checkScalar(v: unknown): void {
  const t = typeof v;
  if (v !== null && t !== 'string' && t !== 'number' && t !== 'boolean') {
    throw new InvalidInput(`condition values must be strings, numbers, booleans or null, got ${t}`);
  }
  if (t === 'number' && !Number.isFinite(v)) throw new InvalidInput('condition values must be finite numbers');
}
