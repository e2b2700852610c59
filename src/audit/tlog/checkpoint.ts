/**
 * C2SP checkpoints (issue 20 item 2): the signed statement "the log named <origin> has <size> leaves
 * and this root", as a signed note (note.ts) whose text is
 *
 *   <origin>\n
 *   <size, decimal>\n
 *   <base64 of the 32-byte root>\n
 *   [<extension line>\n ...]
 *
 * A verifier must check the origin it expects (one key may sign for several logs), then may trust size
 * and root together. Not to be confused with `alp audit checkpoint`'s JSON file (audit/counter.ts),
 * which lists every chain's head; this one covers every entry of every chain in one root.
 */
import { Conflict, InvalidInput } from '../../core/errors.ts';
import type { Signer } from '../../system/signing-key.ts';
import { HASH_SIZE, type Hash } from './merkle.ts';
import { type NoteVerifier, openNote, signNote } from './note.ts';

export interface LogCheckpoint {
  origin: string;
  size: number;
  root: Hash;
  /** Lines after the root (C2SP extension lines): opaque, signed with the rest. */
  extensions?: string[];
}

function checkLine(what: string, line: string): void {
  if (line.length === 0 || line.includes('\n')) throw new InvalidInput(`a checkpoint's ${what} must be one non-empty line`);
}

/** The note text of a checkpoint. */
export function formatCheckpointBody(cp: LogCheckpoint): string {
  checkLine('origin', cp.origin);
  if (!Number.isSafeInteger(cp.size) || cp.size < 0)
    throw new InvalidInput(`a checkpoint's size must be a whole number, got ${String(cp.size)}`);
  if (cp.root.length !== HASH_SIZE) throw new InvalidInput(`a checkpoint's root has 32 bytes, not ${cp.root.length}`);
  for (const e of cp.extensions ?? []) checkLine('extension', e);
  return [cp.origin, String(cp.size), Buffer.from(cp.root).toString('base64'), ...(cp.extensions ?? [])].map((l) => `${l}\n`).join('');
}

/** Parses a checkpoint's note text (strictly: canonical decimal size, canonical base64 root). */
export function parseCheckpointBody(text: string): LogCheckpoint {
  if (!text.endsWith('\n')) throw new InvalidInput('a checkpoint ends with a newline');
  const [origin = '', size = '', root64 = '', ...extensions] = text.slice(0, -1).split('\n');
  const root = Buffer.from(root64, 'base64');
  if (origin.length === 0) throw new InvalidInput('a checkpoint starts with its origin line');
  if (!/^(0|[1-9][0-9]*)$/.test(size) || !Number.isSafeInteger(Number(size)))
    throw new InvalidInput(`not a checkpoint size: ${JSON.stringify(size)}`);
  if (root.length !== HASH_SIZE || root.toString('base64') !== root64)
    throw new InvalidInput(`not a checkpoint root hash: ${JSON.stringify(root64)}`);
  if (extensions.some((e) => e.length === 0)) throw new InvalidInput('a checkpoint has an empty extension line');
  return { origin, size: Number(size), root, ...(extensions.length > 0 ? { extensions } : {}) };
}

/** The signed checkpoint note. */
export async function signCheckpoint(cp: LogCheckpoint, signer: Signer): Promise<string> {
  return signNote(formatCheckpointBody(cp), signer);
}

/**
 * The checkpoint a signed note states, once `verifier`'s signature verifies and its origin is
 * `origin` (INTEGRITY when not signed by that key, INVALID when malformed, CONFLICT when of another log).
 */
export function openCheckpoint(note: string, verifier: NoteVerifier, origin: string): LogCheckpoint {
  const cp = parseCheckpointBody(openNote(note, verifier));
  if (cp.origin !== origin) throw new Conflict(`the checkpoint is of log ${JSON.stringify(cp.origin)}, not ${JSON.stringify(origin)}`);
  return cp;
}
