/**
 * A committed tree whose objects are gone (issue 20 item 1): backups copy the objects items name by
 * digest, and the log's tiles, bundles and manifests are named by none, so a restored installation
 * has STATE and the locators but no `tlog/` objects. The locators hold every leaf (their hashes at
 * leaf_index …: a round writes them before it commits STATE), so the tree is rebuilt from them —
 * accepted only when its root is STATE's root — and its objects written again (create-only: where any
 * survived, the same bytes). Locators beyond STATE's size are a batch marked but not committed when the
 * backup was taken: its manifest is written again from them, so the next round commits that batch.
 * The first format marked after committing: its last batch's markers may still be pending, and fill the
 * remaining leaves in the order its rounds took them (markerOrder; backfill.ts then marks them). A full
 * table scan, once, under the lease.
 */

import type { ContentStore } from '../../content/content-store.ts';
import type { Digest } from '../../core/digest.ts';
import { IntegrityError } from '../../core/errors.ts';
import type { ServiceContext } from '../../system/context.ts';
import { isMarker, MARKER_SK_PREFIX, type Marker, markerOrder } from './markers.ts';
import { auditLeafHash, hashesEqual, rootOf } from './merkle.ts';
import {
  bundlesAfter,
  contentTileReader,
  forgetObjects,
  type LeafEntry,
  manifestKey,
  readObject,
  tileKey,
  writeObjects,
} from './objects.ts';
import { type BatchManifest, LEGACY_MANIFEST_FORMAT, type LogState, MANIFEST_FORMAT } from './state.ts';
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

/** Forgets what notePresent recorded and the objects read or written (objects removed behind this process's back: a test's restore). */
export function forgetPresent(content: ContentStore): void {
  present.delete(content);
  forgetObjects(content);
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
  // First-format pending markers only (a pending marker of the current format is never at a committed leaf).
  const pending = markers.filter((m) => m.leaf_index === undefined && m.SK.startsWith(MARKER_SK_PREFIX)).sort(markerOrder);
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
  // The first format's last batch, so backfill.ts can finish marking it: the markers at its leaves.
  if (tail.length > 0 && state.batchStart !== undefined && !(await readObject(ctx.content, manifestKey(state.batchStart)))) {
    const start = state.batchStart;
    const inBatch = markers.filter(
      (m) => m.leaf_index !== undefined && (m.leaf_index as number) >= start && (m.leaf_index as number) < state.size,
    );
    const runs = [...inBatch.map((m) => runOf(m, m.leaf_index as number)), ...tail].sort((a, b) => a.leaf_start - b.leaf_start);
    objects.push({ key: manifestKey(start), bytes: Buffer.from(JSON.stringify({ format: LEGACY_MANIFEST_FORMAT, start, markers: runs })) });
  }
  const uncommitted = uncommittedManifest(markers, state.size);
  if (uncommitted) objects.push({ key: manifestKey(state.size), bytes: Buffer.from(JSON.stringify(uncommitted)) });
  await writeObjects(ctx.content, objects);
  notePresent(ctx.content, state.size);
  return true;
}

const runOf = (m: Marker, leafStart: number): BatchManifest['markers'][number] => ({
  artifact_id: m.artifact_id,
  first_seq: m.first_seq,
  last_seq: m.last_seq,
  leaf_start: leafStart,
  hashes: m.hashes as Digest[],
});

/**
 * The batch marked but not committed (locators from leaf `size` on, contiguous), as a manifest whose
 * runs are those locators: the next round writes the same locators (already there) and commits it.
 */
function uncommittedManifest(markers: readonly Marker[], size: number): BatchManifest | undefined {
  const beyond = markers.filter((m) => m.leaf_index !== undefined && (m.leaf_index as number) >= size);
  beyond.sort((a, b) => (a.leaf_index as number) - (b.leaf_index as number));
  const runs: BatchManifest['markers'] = [];
  let at = size;
  for (const m of beyond) {
    if (m.leaf_index !== at) break;
    runs.push({ ...runOf(m, at), pending: [], timestamp: m.timestamp });
    at += m.hashes.length;
  }
  return runs.length > 0 ? { format: MANIFEST_FORMAT, start: size, markers: runs } : undefined;
}
