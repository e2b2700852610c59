/**
 * The only code that unlinks content (the run's purge and the purge recovery step both go through it):
 * it re-reads the bytes' digest and refuses to unlink an object whose digest is pinned, whatever the
 * caller's own reference scan concluded. Pins in force when a purge was PREPARED are recorded on its
 * observation (`pins`), so that every later re-check of that purge uses them too.
 */
import { coldDigest, isColdError } from '../content/cold.ts';
import type { ContentStore } from '../content/content-store.ts';
import { DigestAccumulator } from '../core/digest.ts';
import { IntegrityError, NotFound } from '../core/errors.ts';
import type { Observation } from './model.ts';

/**
 * The digest of the object's bytes as stored, or undefined when it is gone. A cold (GLACIER) object is
 * not read: its digest is the SHA-256 S3 computed when it was written (content/cold.ts); one without
 * a checksum cannot be re-checked, so it is never unlinked (INTEGRITY).
 */
export async function storedDigest(content: ContentStore, key: string): Promise<string | undefined> {
  try {
    const acc = new DigestAccumulator();
    for await (const c of await content.readRaw(key)) acc.update(c as Buffer);
    return acc.digest();
  } catch (e) {
    if (e instanceof NotFound) return undefined;
    if (isColdError(e)) {
      const digest = await coldDigest(content, key);
      if (digest !== undefined) return digest;
      throw new IntegrityError(`${key} is cold and has no S3 checksum: its bytes cannot be re-checked unread; not removed`, { key });
    }
    throw e;
  }
}

/** Sorted, de-duplicated pins: the form recorded with a plan and a prepared purge. */
export function normalisePins(...lists: Array<Iterable<string> | undefined>): string[] {
  const all = new Set<string>();
  for (const list of lists) for (const p of list ?? []) all.add(p);
  return [...all].sort();
}

/** The pins recorded by every prepared purge among `observations`. */
export function recordedPins(observations: Iterable<Observation>): string[] {
  const lists: string[][] = [];
  for (const o of observations) if (Array.isArray(o.pins)) lists.push(o.pins as string[]);
  return normalisePins(...lists);
}

/** Unlinks `key` (whose bytes hash to `digest`), unless that digest is pinned. */
export async function unlinkUnpinned(content: ContentStore, key: string, digest: string, pins: ReadonlySet<string>): Promise<void> {
  if (pins.has(digest)) {
    throw new IntegrityError(`refusing to unlink ${key}: its digest ${digest} is pinned`, { key, digest });
  }
  await content.delete(key);
}
