/**
 * The export half of a backup (backup.ts), in bounded memory (issue 17 item A2): items.jsonl written as
 * the snapshot is scanned, the objects the items name collected on disk (object-set.ts) and written to
 * objects.jsonl in key order, and the --with-content copy read from that set a page at a time.
 */
import path from 'node:path';
import { openContentStore } from '../content/open.ts';
import { ArchivedCold, IntegrityError, NotFound } from '../core/errors.ts';
import { forEachLimited } from '../core/limit.ts';
import { refsOfItem } from '../lifecycle/references.ts';
import type { Progress } from '../lifecycle/verify-content.ts';
import type { ItemKey, ItemSnapshot } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { INITIAL_EPOCH, systemFactsOf } from '../system/state.ts';
import {
  type BackupFileInfo,
  type BackupManifest,
  type BackupObject,
  CONTENT_DIR,
  ITEMS_FILE,
  isNeverBackedUp,
  JsonLinesWriter,
  OBJECTS_FILE,
} from './backup-format.ts';
import type { ObjectSet, SetEntry } from './object-set.ts';

export interface Exported {
  items: BackupFileInfo;
  objectsFile: BackupFileInfo & { total_size: number; mutable: number };
  epoch: number;
  installationId: string | undefined;
  restoreHeld: boolean;
  snapshotAt: string;
  excluded: string[];
}

/**
 * items.jsonl as the snapshot is scanned, and every object the items name into `objects` (on disk:
 * bounded memory, issue 17 A2); then objects.jsonl from it in key order.
 */
export async function exportItems(
  snapshot: ItemSnapshot,
  dir: string,
  own: ItemKey,
  snapshotAt: string,
  progress: Progress,
  objects: ObjectSet,
): Promise<Exported> {
  const writer = await JsonLinesWriter.create(path.join(dir, ITEMS_FILE));
  const excluded: string[] = [];
  let epoch = INITIAL_EPOCH;
  let installationId: string | undefined;
  let restoreHeld = false;
  try {
    let cursor: string | undefined;
    do {
      const page = await snapshot.scan(cursor ? { cursor } : {});
      for (const item of page.items) {
        const facts = systemFactsOf(item);
        if (facts.restoreHeld) restoreHeld = true;
        if (facts.epoch !== undefined) epoch = facts.epoch;
        if (facts.installationId !== undefined) installationId = facts.installationId;
        if (isNeverBackedUp(item) || (item.PK === own.PK && item.SK === own.SK)) {
          excluded.push(`${item.PK} ${item.SK}`);
          continue;
        }
        await writer.write(item);
      }
      objects.add(page.items.filter((i) => !isNeverBackedUp(i) && !(i.PK === own.PK && i.SK === own.SK)).flatMap(refsOfItem));
      progress.tick?.(page.items.length);
      cursor = page.cursor;
    } while (cursor);
  } catch (e) {
    await writer.abort();
    throw e;
  }
  const items = await writer.finish();
  const ow = await JsonLinesWriter.create(path.join(dir, OBJECTS_FILE));
  let totalSize = 0;
  let mutable = 0;
  try {
    for (const page of objects.pages('all')) {
      for (const e of page) {
        await ow.write(backupObjectOf(e));
        totalSize += e.size ?? 0;
        if (e.mutable) mutable++;
      }
    }
  } catch (e) {
    await ow.abort();
    throw e;
  }
  const objectsFile = { ...(await ow.finish()), total_size: totalSize, mutable };
  return { items, objectsFile, epoch, installationId, restoreHeld, snapshotAt, excluded };
}

function backupObjectOf(e: SetEntry): BackupObject {
  return {
    key: e.key,
    digest: e.digest,
    ...(e.size !== undefined ? { size: e.size } : {}),
    ...(e.mutable ? { mutable: true as const } : {}),
    ...(e.retained ? { retained: true as const } : {}),
    ...(e.superseded ? { superseded: true as const } : {}),
  };
}

/** Copies every immutable object into DIR/content through the verifying read path, a page at a time. */
export async function copyContent(
  ctx: ServiceContext,
  dir: string,
  objects: ObjectSet,
  progress: (phase: string, total?: number) => Progress,
  concurrency: number,
): Promise<NonNullable<BackupManifest['content']>> {
  const target = await openContentStore({ engine: 'fs', root: path.join(dir, CONTENT_DIR) });
  const count = objects.size('immutable');
  const bar = progress('content', count);
  let bytes = 0;
  try {
    for (const page of objects.pages('immutable')) {
      await forEachLimited(page, concurrency, async (e) => {
        const o = backupObjectOf(e);
        let stream: Awaited<ReturnType<typeof ctx.content.get>>;
        try {
          stream = await readSameBytes(ctx, o, () => objects.withDigest(o.digest).map(backupObjectOf));
        } catch (err) {
          if (err instanceof NotFound)
            throw new IntegrityError(`cannot back up ${o.key}: the object is missing from the content store`, { key: o.key });
          throw err;
        }
        const put = await target.put(o.key, stream, { expectedDigest: o.digest });
        bytes += put.size;
        bar.tick?.(1);
      });
    }
  } finally {
    await target.close();
  }
  return { dir: CONTENT_DIR, count, bytes };
}

/**
 * A verified read of `o`'s bytes. A cold archive copy (GLACIER: real S3 refuses to read it until it is
 * restored) is read from another listed object with the same digest — its original, while it exists —
 * since the digest check makes any key with that digest the same bytes. An archived original is listed
 * `superseded` (issue 17 B13) and may have been reclaimed after its verified copy: then its bytes are
 * read from the copy and stored under the original's key, so the backup's content stays whole. When no
 * key with the digest is readable, ARCHIVED_COLD (restore the copy, then back up again) or NOT_FOUND.
 */
async function readSameBytes(ctx: ServiceContext, o: BackupObject, same: () => readonly BackupObject[]) {
  const opts = o.size === undefined ? {} : { expectedSize: o.size };
  try {
    return await ctx.content.get(o.key, o.digest, opts);
  } catch (e) {
    // An archived original may be gone (reclaimed after its verified copy, B13): its bytes are the copy's.
    if (!(e instanceof ArchivedCold) && !(e instanceof NotFound && o.superseded)) throw e;
    for (const alt of same()) {
      if (alt.key === o.key) continue;
      try {
        return await ctx.content.get(alt.key, o.digest, opts);
      } catch (inner) {
        if (!(inner instanceof ArchivedCold) && !(inner instanceof NotFound)) throw inner;
      }
    }
    throw e;
  }
}
