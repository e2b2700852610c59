/**
 * The plan of a chunked archive (archive.ts): what is copied where, and how the audited transitions are
 * cut into transactions that fit. The plan is a pure function of the archive time recorded in the
 * journal and of the version and execution items, which cannot change while the artifact is ARCHIVING
 * (every version is settled; settled versions only move to ARCHIVED), so a resumed archive computes
 * the same target keys and digests as the run it continues.
 */
import type { Digest } from '../core/digest.ts';
import { archiveKey } from '../core/object-keys.ts';
import type { ExecutionItem } from './executions.ts';
import type { ArchivedObject, VersionItem } from './model.ts';

/** One version (its move and Transition entry) or one execution (its archive_objects), with its copies. */
export type ArchiveUnit =
  | { kind: 'version'; item: VersionItem; objects: ArchivedObject[] }
  | { kind: 'execution'; item: ExecutionItem; objects: ArchivedObject[] };

function planned(at: Date, artifactId: string, original: string, digest: Digest, size: number | undefined): ArchivedObject {
  return { original_key: original, archive_key: archiveKey(at, artifactId, original), digest, size: size ?? -1 };
}

export function versionObjects(at: Date, artifactId: string, v: VersionItem): ArchivedObject[] {
  return [
    planned(at, artifactId, v.content_key, v.content_hash, v.size),
    planned(at, artifactId, v.metadata_key, v.metadata_hash, undefined),
  ];
}

export function executionObjects(at: Date, artifactId: string, e: ExecutionItem): ArchivedObject[] {
  return Object.values(e.outputs).map((o) => planned(at, artifactId, o.key, o.digest as Digest, o.size));
}

/**
 * What is still to do: versions not yet ARCHIVED, executions without their archive_objects, each
 * execution right after its version (so a chunk tends to hold a version with its runs), oldest first.
 */
export function pendingUnits(at: Date, artifactId: string, versions: VersionItem[], executions: ExecutionItem[]): ArchiveUnit[] {
  const units: ArchiveUnit[] = [];
  const runsOf = new Map<number, ExecutionItem[]>();
  for (const e of executions) {
    if (e.archive_objects !== undefined) continue;
    runsOf.set(e.version, [...(runsOf.get(e.version) ?? []), e]);
  }
  const known = new Set(versions.map((v) => v.version));
  for (const v of versions) {
    if (v.state !== 'ARCHIVED') units.push({ kind: 'version', item: v, objects: versionObjects(at, artifactId, v) });
    for (const e of runsOf.get(v.version) ?? []) units.push({ kind: 'execution', item: e, objects: executionObjects(at, artifactId, e) });
  }
  // Runs of a version number not listed (none exist today): still archived, last.
  for (const [n, runs] of runsOf) {
    if (known.has(n)) continue;
    for (const e of runs) units.push({ kind: 'execution', item: e, objects: executionObjects(at, artifactId, e) });
  }
  return units;
}

/**
 * Transaction operations a unit adds to an audited commit: its domain updates (a version's update, plus
 * the Compensation item of a compensation artifact), its audit entries twice (the entry and the
 * telemetry record the audit sink enqueues for it) and one retention publish check per copy.
 */
export function unitCost(u: ArchiveUnit, compensates: boolean): number {
  if (u.kind === 'execution') return 1 + u.objects.length;
  return 1 + (compensates ? 1 : 0) + 2 + u.objects.length;
}

/** Cuts units into chunks of at most `budget` operations (a unit never straddles two chunks). */
export function packChunks(units: ArchiveUnit[], budget: number, compensates: boolean): ArchiveUnit[][] {
  const chunks: ArchiveUnit[][] = [];
  let current: ArchiveUnit[] = [];
  let used = 0;
  for (const u of units) {
    const cost = unitCost(u, compensates);
    if (cost > budget) {
      throw new RangeError(
        `a ${u.kind} with ${u.objects.length} objects needs ${cost} operations, more than one transaction holds (${budget})`,
      );
    }
    if (used + cost > budget && current.length > 0) {
      chunks.push(current);
      current = [];
      used = 0;
    }
    current.push(u);
    used += cost;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
