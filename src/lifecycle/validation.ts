import { InvalidInput } from '../core/errors.ts';
import { INVISIBLE_CHARS, safePreview } from '../core/object-keys.ts';

const UNSAFE_TEXT = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u;

/**
 * Free text shown to humans (names, reasons, evidence): bounded, NFC, no control, bidi-override or
 * invisible characters (object-keys.ts, INVISIBLE_CHARS).
 */
export function validateText(field: string, value: unknown, { min = 1, max = 200 } = {}): string {
  if (typeof value !== 'string') throw new InvalidInput(`${field} must be a string`);
  if (value.length < min || value.length > max) throw new InvalidInput(`${field} must be ${min}–${max} characters`);
  if (UNSAFE_TEXT.test(value))
    throw new InvalidInput(`${field} must not contain control or bidirectional-override characters`, { [field]: safePreview(value) });
  if (INVISIBLE_CHARS.test(value))
    throw new InvalidInput(`${field} must not contain invisible or bidirectional-mark characters`, { [field]: safePreview(value) });
  if (value !== value.normalize('NFC')) throw new InvalidInput(`${field} must be in Unicode NFC form`);
  if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(value))
    throw new InvalidInput(`${field} must be valid UTF-8`);
  return value;
}

export function validateName(name: unknown): string {
  const n = validateText('name', name, { max: 200 });
  if (n.trim() !== n) throw new InvalidInput('name must not start or end with white space');
  return n;
}

export function validateKind(kind: unknown): string {
  if (typeof kind !== 'string' || !/^[a-z0-9][a-z0-9._-]{0,63}$/.test(kind)) {
    throw new InvalidInput('kind must be 1–64 characters of a-z, 0-9, ".", "_", "-", starting with a letter or digit');
  }
  return kind;
}

export const MAX_LABELS = 32;

export function validateLabels(labels: Record<string, string>): Record<string, string> {
  const entries = Object.entries(labels);
  if (entries.length > MAX_LABELS) throw new InvalidInput(`at most ${MAX_LABELS} labels`);
  for (const [k, v] of entries) {
    if (!/^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$/.test(k))
      throw new InvalidInput(`label key ${safePreview(k)} must be 1–63 of A-Z a-z 0-9 . _ / -`);
    validateText(`label ${k}`, v, { min: 0, max: 256 });
  }
  return Object.fromEntries(entries);
}

export function parseLabel(text: string): [string, string] {
  const eq = text.indexOf('=');
  if (eq <= 0) throw new InvalidInput(`label must be key=value: ${safePreview(text)}`);
  return [text.slice(0, eq), text.slice(eq + 1)];
}

export function validateVersionNumber(v: unknown): number {
  const n = typeof v === 'string' && /^\d{1,10}$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 9_999_999_999)
    throw new InvalidInput('version must be a positive integer');
  return n;
}

export function validateQuorum(q: unknown): number {
  if (typeof q !== 'number' || !Number.isInteger(q) || q < 1 || q > 10) throw new InvalidInput('quorum must be an integer from 1 to 10');
  return q;
}
