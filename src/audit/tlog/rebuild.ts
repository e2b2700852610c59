/**
 * A committed tree whose objects are gone (issue 20 item 1): backups copy the objects items name by
 * digest, and the log's tiles, bundles and manifests are named by none, so a restored installation
 * has STATE and the markers but no `tlog/` objects. The markers hold every leaf (a marked marker: its
 * hashes at leaf_index …; the last batch's markers may still be pending when a round crashed before
 * marking them: they fill the remaining leaves in the order a round takes them), so the tree is
 * rebuilt from them — accepted only when its root is STATE's root — and its objects written again
 * (create-only: where any survived, the same bytes). A full table scan, once, under the lease.
 */

import type { ContentStore } from '../../content/content-store.ts';
import type { Digest } from '../../core/digest.ts';
import { IntegrityError } from '../../core/errors.ts';
import type { ServiceContext } from '../../system/context.ts';
import { isMarker, type Marker, markerOrder } from './markers.ts';
import { auditLeafHash, hashesEqual, rootOf } from './merkle.ts';
import { bundlesAfter, contentTileReader, type LeafEntry, manifestKey, readObject, tileKey, writeObjects } from './objects.ts';
import type { BatchManifest, LogState } from './state.ts';
import { appendLeaves, rightEdge } from './tiles.ts';

/** Whether the objects a round needs at `state` are there (the last manifest and the right edge). */
async function objectsPresent(content: ContentStore, state: LogState): Promise<boolean> {
  if (state.size === 0) return true;
  if (state.batchStart !== undefined && !(await readObject(content, manifestKey(state.batchStart)))) return false;
  try {
    await contentTileReader(content).readTiles(
      rightEdge(state.size).length > 0 ? rightEdge(state.size) : [{ level: 0, index: Math.floor((state.size - 1) / 256), width: 256 }],
    );
    return true;
  } catch {
    return false;
  }
}

async function allMarkers(ctx: ServiceContext): Promise<Marker[]> {
  const out: Marker[] = [];
  let cursor: string | undefined;
  do {
    const page = await ctx.items.scan(cursor ? { cursor } : {});
    for (const i of page.items) if (isMarker(i)) out.push(i);
    cursor = page.cursor;
  } while (cursor);
  return out;
}

/** The size whose objects this process last saw or wrote, per content store (no check needed again). */
const present = new WeakMap<object, number>();

/** Records that the objects of a tree of `size` leaves are all written (a round that committed it). */
export function notePresent(content: ContentStore, size: number): void {
  present.set(content, size);
}

/** Forgets what notePresent recorded (objects removed behind this process's back: a test's restore). */
export function forgetPresent(content: ContentStore): void {
  present.delete(content);
}

/** Rebuilds the objects of the committed tree when they are missing; returns whether it did. */
export async function rebuildIfMissing(ctx: ServiceContext, state: LogState): Promise<boolean> {
  if (present.get(ctx.content) === state.size) return false;
  if (await objectsPresent(ctx.content, state)) {
    notePresent(ctx.content, state.size);
    return false;
  }
  const markers = await allMarkers(ctx);
  // Dense (every/indexOf skip the holes of a sparse array).
  const leaves: Array<LeafEntry | undefined> = Array.from({ length: state.size }, () => undefined);
  for (const m of markers)
    if (m.leaf_index !== undefined)
      m.hashes.forEach((hash, i) => {
        const at = (m.leaf_index as number) + i;
        if (at < state.size) leaves[at] = { artifact_id: m.artifact_id, seq: m.first_seq + i, hash };
      });
  const firstGap = leaves.indexOf(undefined);
  const gapStart = firstGap < 0 ? state.size : firstGap;
  const tail: BatchManifest['markers'] = [];
  let at = gapStart;
  const pending = markers.filter((m) => m.leaf_index === undefined).sort(markerOrder);
  for (const m of pending) {
    if (at >= state.size) break;
    tail.push({ artifact_id: m.artifact_id, first_seq: m.first_seq, last_seq: m.last_seq, leaf_start: at, hashes: m.hashes as Digest[] });
    m.hashes.forEach((hash, i) => {
      if (at + i < state.size) leaves[at + i] = { artifact_id: m.artifact_id, seq: m.first_seq + i, hash };
    });
    at += m.hashes.length;
  }
  const complete = leaves.every((l) => l !== undefined) && at <= Math.max(state.size, gapStart);
  const entries = leaves as LeafEntry[];
  if (!complete || !hashesEqual(rootOf(entries.map((l) => auditLeafHash(l.hash as Digest))), state.root))
    throw new IntegrityError("the transparency log's objects are missing and its markers do not rebuild STATE's tree", {
      size: state.size,
    });
  const { tiles } = await appendLeaves(
    0,
    entries.map((l) => auditLeafHash(l.hash as Digest)),
    contentTileReader(ctx.content),
  );
  const objects = [...tiles.map((t) => ({ key: tileKey(t), bytes: t.data })), ...(await bundlesAfter(ctx.content, 0, entries))];
  // The last batch's manifest, so step i can finish marking it: the markers at its leaves.
  if (state.batchStart !== undefined && !(await readObject(ctx.content, manifestKey(state.batchStart)))) {
    const start = state.batchStart;
    const inBatch = markers
      .filter((m) => m.leaf_index !== undefined && (m.leaf_index as number) >= start)
      .map((m) => ({
        artifact_id: m.artifact_id,
        first_seq: m.first_seq,
        last_seq: m.last_seq,
        leaf_start: m.leaf_index as number,
        hashes: m.hashes as Digest[],
      }));
    const manifest: BatchManifest = {
      format: 'alp-tlog-batch/1',
      start,
      markers: [...inBatch, ...tail].sort((a, b) => a.leaf_start - b.leaf_start),
    };
    objects.push({ key: manifestKey(start), bytes: Buffer.from(JSON.stringify(manifest)) });
  }
  await writeObjects(ctx.content, objects);
  notePresent(ctx.content, state.size);
  return true;
}
