import { InvalidInput } from './errors.ts';

/**
 * Object keys of docs/data-model.md "Objects" (RFC-012 §9.2) and the filename rules. Every key an engine sees is built
 * here; the engines validate keys again before touching storage.
 */
export const MAX_FILENAME_BYTES = 255;
export const METADATA_FILENAME = 'metadata.json';
export const ROLLBACK_PREFIX = 'rollback-';
export const EXECUTION_OUTPUTS = ['output.json', 'stdout.log', 'stderr.log'] as const;
export type ExecutionOutput = (typeof EXECUTION_OUTPUTS)[number];

// C0 and C1 controls, DEL, and the bidirectional overrides and isolates that make a name display as
// something it is not. Every object key is checked against these (keys already stored included).
const FORBIDDEN_CHARS = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u;

/**
 * Characters that are invisible or only steer the display, refused in new filenames and in every text
 * shown to humans (names, labels, evidence, reasons, notes): the bidirectional marks (LRM, RLM, ALM),
 * zero-width space, word joiner and invisible operators, the byte-order mark, the soft hyphen, the
 * Mongolian vowel separator, deprecated format characters, interlinear annotations, Unicode tag
 * characters and the supplementary variation selectors (both used to smuggle hidden text past a
 * reader). Zero-width joiner and non-joiner (U+200C, U+200D) and the ordinary variation selectors stay
 * accepted: Persian, Indic scripts and emoji sequences need them. docs/reliability.md records the choice.
 */
export const INVISIBLE_CHARS =
  /[\u00ad\u061c\u180e\u200b\u200e\u200f\u2060-\u2064\u206a-\u206f\ufeff\ufff9-\ufffb\u{e0000}-\u{e007f}]|[\u{e0100}-\u{e01ef}]/u;

/** Returns the reason a filename is refused, or undefined when it is acceptable. */
export function filenameProblem(name: string): string | undefined {
  if (typeof name !== 'string' || name.length === 0) return 'filename must not be empty';
  if (!isWellFormedUtf16(name)) return 'filename must be valid UTF-8';
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes > MAX_FILENAME_BYTES) return `filename is ${bytes} bytes; at most ${MAX_FILENAME_BYTES} are allowed`;
  if (name.includes('/')) return 'filename must not contain "/"';
  if (name.includes('\\')) return 'filename must not contain "\\"';
  if (name.includes('\u0000')) return 'filename must not contain NUL';
  if (FORBIDDEN_CHARS.test(name)) return 'filename must not contain control or bidirectional-override characters';
  if (INVISIBLE_CHARS.test(name)) return 'filename must not contain invisible or bidirectional-mark characters';
  if (name === '.' || name === '..') return 'filename must not be "." or ".."';
  if (name === METADATA_FILENAME) return `filename "${METADATA_FILENAME}" is reserved`;
  if (name.startsWith(ROLLBACK_PREFIX)) return `filename must not start with "${ROLLBACK_PREFIX}"`;
  if (name.startsWith('.alp-')) return 'filenames starting with ".alp-" are reserved';
  if (name !== name.normalize('NFC')) return 'filename must be in Unicode NFC form';
  return undefined;
}

export function validateFilename(name: string): string {
  const problem = filenameProblem(name);
  if (problem) throw new InvalidInput(problem, { filename: safePreview(name) });
  return name;
}

function isWellFormedUtf16(s: string): boolean {
  // Lone surrogates cannot be encoded as UTF-8.
  return !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
}

const STEERING_CHARS = new RegExp(`${FORBIDDEN_CHARS.source}|${INVISIBLE_CHARS.source}`, 'gu');

/** `s` with every control, bidi and invisible character written as `\\u{hex}`: safe on a terminal. */
export function escapeForDisplay(s: string): string {
  return s.replace(STEERING_CHARS, (c) => `\\u{${(c.codePointAt(0) as number).toString(16)}}`);
}

/** A short, quoted preview of a refused value; characters that would steer its display are escaped. */
export function safePreview(s: string, max = 80): string {
  return escapeForDisplay(JSON.stringify(s.length > max ? `${s.slice(0, max)}…` : s));
}

export const versionPrefix = (artifactId: string, version: number) => `artifacts/${artifactId}/v${version}/`;
export const contentKey = (artifactId: string, version: number, filename: string) =>
  `${versionPrefix(artifactId, version)}${validateFilename(filename)}`;
export const rollbackKey = (artifactId: string, version: number, filename: string) =>
  `${versionPrefix(artifactId, version)}${ROLLBACK_PREFIX}${validateFilename(filename)}`;
export const metadataKey = (artifactId: string, version: number) => `${versionPrefix(artifactId, version)}${METADATA_FILENAME}`;
export const executionKey = (runId: string, output: ExecutionOutput) => `executions/${runId}/${output}`;
export const provenanceKey = (artifactId: string) => `provenance/${artifactId}.json`;

/** archive/{yyyy}/{mm}/{artifact_id}/ + the original key below the artifact (or executions/…). */
export function archiveKey(archivedAt: Date, artifactId: string, originalKey: string): string {
  const yyyy = String(archivedAt.getUTCFullYear());
  const mm = String(archivedAt.getUTCMonth() + 1).padStart(2, '0');
  const artifactPrefix = `artifacts/${artifactId}/`;
  const rest = originalKey.startsWith(artifactPrefix) ? originalKey.slice(artifactPrefix.length) : originalKey;
  return `archive/${yyyy}/${mm}/${artifactId}/${rest}`;
}

/** The top-level prefixes; `provenance/` objects are mutable (regenerated), the others immutable. */
export const IMMUTABLE_PREFIXES = ['artifacts/', 'executions/', 'archive/'] as const;
export const MUTABLE_PREFIXES = ['provenance/'] as const;

export function isImmutableKey(key: string): boolean {
  return IMMUTABLE_PREFIXES.some((p) => key.startsWith(p));
}

export const MAX_KEY_BYTES = 1024;

/**
 * The one validation every engine applies before a key reaches storage. Keys are relative,
 * '/'-separated, with no empty, '.' or '..' segments, no backslash, NUL or control characters, and a
 * bounded length. Returns the segments.
 */
export function validateObjectKey(key: string): string[] {
  if (typeof key !== 'string' || key.length === 0) throw new InvalidInput('object key must not be empty');
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) throw new InvalidInput(`object key longer than ${MAX_KEY_BYTES} bytes`);
  if (!isWellFormedUtf16(key)) throw new InvalidInput('object key must be valid UTF-8');
  if (key.startsWith('/')) throw new InvalidInput('object key must be relative', { key: safePreview(key) });
  if (key.includes('\\')) throw new InvalidInput('object key must not contain "\\"', { key: safePreview(key) });
  if (FORBIDDEN_CHARS.test(key)) throw new InvalidInput('object key must not contain control characters', { key: safePreview(key) });
  const segments = key.split('/');
  for (const seg of segments) {
    if (seg === '' || seg === '.' || seg === '..')
      throw new InvalidInput('object key has an empty, "." or ".." segment', { key: safePreview(key) });
    if (Buffer.byteLength(seg, 'utf8') > MAX_FILENAME_BYTES)
      throw new InvalidInput('object key segment too long', { key: safePreview(key) });
    if (seg.startsWith('.alp-'))
      throw new InvalidInput('object key segments starting with ".alp-" are reserved', { key: safePreview(key) });
  }
  return segments;
}

/** A prefix for list(): '' or a key-like string that may end with '/'. */
export function validateListPrefix(prefix: string): void {
  if (prefix === '') return;
  const trimmed = prefix.endsWith('/') ? prefix.slice(0, -1) : prefix;
  validateObjectKey(trimmed);
}

/**
 * Packed audit history (src/audit/compaction.ts): immutable JSON Lines + gzip objects named by their
 * own digest, each recorded by a `history_segment` item. Never retention candidates (seed 004: audit
 * segments are not deleted).
 */
export const HISTORY_SEGMENT_PREFIX = 'history/segments/';
/**
 * The transparency log's immutable objects (audit/tlog/objects.ts): tiles, entry bundles and batch
 * manifests, create-only like artifacts (a round redone after a crash writes the same bytes again).
 */
export const TLOG_IMMUTABLE_PREFIXES = ['tlog/tile/', 'tlog/batches/'] as const;
export const historySegmentKey = (artifactId: string, digestHex: string) => {
  if (!/^[0-9a-f]{64}$/.test(digestHex)) throw new InvalidInput('a segment key needs a sha256 hex digest');
  return `${HISTORY_SEGMENT_PREFIX}${artifactId}/${digestHex}.jsonl.gz`;
};

/** Key order: string order in UTF-8 bytes (the content contract's listing order, SQLite's BINARY collation): code units order the same way except that surrogates sort above U+E000–U+FFFF. */
export function compareUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return utf8Rank(x) - utf8Rank(y);
  }
  return a.length - b.length;
}

function utf8Rank(unit: number): number {
  if (unit < 0xd800) return unit;
  return unit < 0xe000 ? unit + 0x2000 : unit - 0x800;
}
