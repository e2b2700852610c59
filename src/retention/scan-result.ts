/**
 * What a reference scan answers (retention/references.ts builds it; retention.ts, report.ts and
 * recovery-step.ts read it). Backed by a scratch working set on disk (system/scratch.ts), not by maps in
 * the heap, so a scan of any installation holds bounded memory: every answer is a lookup, every list
 * is streamed. Always close() it (deletes the working set).
 */
import type { ObjectInfo } from '../content/content-store.ts';

export interface ScannedObject extends ObjectInfo {
  /** The digest of the bytes (from the reference index, an observation, or read), when known. */
  digest?: string;
}

export interface ScanStats {
  items: number;
  objects: number;
  /** Objects whose bytes were read (not indexed, index entry unusable, or listed as changed). */
  objectsRead: number;
  bytesRead: number;
  /** Objects whose references came from their reference-index entry instead of their bytes. */
  indexed: number;
  /** Entries this scan wrote for objects it had to read (the backfill of objects written before the index). */
  indexedNow: number;
  /** Cold (GLACIER) objects not read, their digest taken from S3's checksum. */
  coldTrusted: number;
  ms: number;
  /** The item references came from the cache plus the items changed since (scan-cache.ts), not a whole pass. */
  fromCache?: true;
  /** Items the latest refreshReferences folded in (a run's fenced refresh: what changed since the one before the fence). */
  refreshed?: number;
}

export interface ReferenceScan {
  readonly stats: ScanStats;
  /**
   * The item store's change mark (ItemStore.changeMark) taken before the scan read anything, advanced by
   * each refreshReferences to the mark it took before reading: what the next refresh reads the changes
   * since (under the fence, the short fence of issue 17 item 3, only what changed after the last one).
   */
  mark: string;
  /** Why the object at `key` is referenced (the first reason found: by key, prefix, digest, pin…), or undefined. */
  referencedWhy(key: string): string | undefined;
  /**
   * Why `digest` is referenced (named by an item, found inside a referenced object, pinned…), or
   * undefined. With `forKey`: why the object at that key would be kept by its digest — for an archived
   * original whose verified archive copy is listed (issue 17 B13) only a pin counts, since the copy
   * holds the same bytes and satisfies every other reference to them. Pass it when checking a
   * candidate's own digest, or the copy's references keep the original forever.
   */
  digestWhy(digest: string, forKey?: string): string | undefined;
  /** The listed object at `key`, or undefined when the listing did not have it. */
  object(key: string): ScannedObject | undefined;
  /** Keys of listed objects whose bytes have `digest`. */
  keysWithDigest(digest: string): string[];
  /** Unreferenced immutable objects (CANDIDATE_PREFIXES), in key order, streamed from the working set. */
  candidates(): Iterable<ScannedObject>;
  /** How many objects are referenced. */
  referencedCount(): number;
  /** Deletes the working set. Idempotent. */
  close(): void;
}
