/**
 * "Sanitized JSON" for custom telemetry records (seed 004): only values that JSON represents exactly
 * (null, booleans, finite numbers, well-formed strings, arrays, plain objects), bounded in depth, node
 * count and size. Nothing is stripped or coerced silently: anything else is refused with INVALID.
 */
import { canonicalJson } from '../core/canonical-json.ts';
import { InvalidInput } from '../core/errors.ts';

export const MAX_PAYLOAD_DEPTH = 16;
export const MAX_PAYLOAD_NODES = 10_000;
export const MAX_PAYLOAD_BYTES = 64 * 1024;

/** Keys that mean something to JavaScript objects; a receiver merging payloads could be polluted. */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export interface SanitizedPayload {
  /** The canonical JSON text (sorted keys, no whitespace): what is stored and what `bytes` counts. */
  json: string;
  value: unknown;
  bytes: number;
}

export function sanitizeJson(value: unknown, maxBytes = MAX_PAYLOAD_BYTES): SanitizedPayload {
  let nodes = 0;
  const seen = new Set<object>();
  const fail = (path: string, why: string): never => {
    throw new InvalidInput(`telemetry payload ${path || '(root)'}: ${why}`, { path: path || '$' });
  };
  const walk = (v: unknown, path: string, depth: number): void => {
    if (++nodes > MAX_PAYLOAD_NODES) fail(path, `more than ${MAX_PAYLOAD_NODES} values`);
    if (v === null || typeof v === 'boolean') return;
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) fail(path, 'numbers must be finite (NaN and Infinity are not JSON)');
      return;
    }
    if (typeof v === 'string') {
      if (LONE_SURROGATE.test(v)) fail(path, 'strings must be valid Unicode (a lone surrogate was found)');
      return;
    }
    if (typeof v !== 'object') fail(path, `${typeof v} is not a JSON value`);
    const o = v as object;
    if (depth >= MAX_PAYLOAD_DEPTH) fail(path, `nested deeper than ${MAX_PAYLOAD_DEPTH} levels`);
    if (seen.has(o)) fail(path, 'the value refers to itself (a cycle)');
    seen.add(o);
    if (Array.isArray(o)) {
      if (Object.getPrototypeOf(o) !== Array.prototype) fail(path, 'arrays must be plain arrays');
      for (let i = 0; i < o.length; i++) {
        if (!Object.hasOwn(o, i)) fail(`${path}[${i}]`, 'sparse arrays are not JSON (a hole was found)');
        walk(o[i], `${path}[${i}]`, depth + 1);
      }
      if (Object.keys(o).length !== o.length) fail(path, 'arrays must not carry extra properties');
    } else {
      const proto = Object.getPrototypeOf(o);
      if (proto !== Object.prototype && proto !== null)
        fail(path, `${(o as { constructor?: { name?: string } }).constructor?.name ?? 'this object'} is not a plain JSON object`);
      if (Object.getOwnPropertySymbols(o).length > 0) fail(path, 'symbol keys are not JSON');
      for (const key of Object.getOwnPropertyNames(o)) {
        const desc = Object.getOwnPropertyDescriptor(o, key) as PropertyDescriptor;
        const at = `${path}.${key}`;
        if (!desc.enumerable) fail(at, 'non-enumerable properties are not JSON');
        if (desc.get || desc.set) fail(at, 'accessor properties are not JSON');
        if (FORBIDDEN_KEYS.has(key)) fail(at, `the key ${JSON.stringify(key)} is refused`);
        if (LONE_SURROGATE.test(key)) fail(at, 'keys must be valid Unicode');
        walk(desc.value, at, depth + 1);
      }
    }
    seen.delete(o);
  };
  walk(value, '', 0);
  const json = canonicalJson(value);
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > maxBytes) throw new InvalidInput(`telemetry payload is ${bytes} bytes; at most ${maxBytes} are allowed`);
  return { json, value: JSON.parse(json) as unknown, bytes };
}
