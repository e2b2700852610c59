/**
 * `alp audit verify --checkpoint NOTE` (issue 20 item 1, docs/design.md §10 point 7): holds the
 * installation to a signed checkpoint (size m, root r) kept elsewhere. The verifier key is pinned by
 * the caller (`--key`, never read from the storage being checked; the installation's own key is only
 * the default). Checked, each a finding when it fails:
 *
 * - the log still has at least m leaves (STATE size lowered: the log itself was truncated);
 * - the current root recomputed from the tiles is STATE's root (a tile or STATE rewritten);
 * - the consistency proof m → n from the tiles verifies against r and that root (the current tree
 *   extends the checkpoint: a rewritten tile shows here);
 * - the entry bundles' leaves < m hash to r (a rewritten bundle);
 * - every leaf < m names a chain entry that exists and whose recomputed hash is the leaf's (a chain
 *   tail deleted with its HEAD reset, or an entry rewritten, even when the chain verifies on its own).
 */

import { canonicalDigest } from '../../core/canonical-json.ts';
import type { Digest } from '../../core/digest.ts';
import { type Item, queryAll } from '../../store/item-store.ts';
import type { ServiceContext } from '../../system/context.ts';
import { readInstallation } from '../../system/installation.ts';
import { installationKeyName } from '../../system/installation-key.ts';
import { auditHash } from '../hash.ts';
import { chainEntries } from './chain-entries.ts';
import { openCheckpoint } from './checkpoint.ts';
import { auditLeafHash, hashesEqual, rootOf, verifyConsistency } from './merkle.ts';
import type { NoteVerifier } from './note.ts';
import { contentTileReader, type LeafEntry, readLeafEntries } from './objects.ts';
import { readLogState } from './state.ts';
import { TiledTree } from './tiles.ts';

export interface LogFinding {
  row: string;
  problem: string;
}

export interface LogCheckpointReport {
  /** The checkpoint's size and the log's current size. */
  checkpoint_size: number;
  log_size: number;
  ok: boolean;
  findings: LogFinding[];
}

/** A signed checkpoint note (not the JSON chain checkpoint of audit/counter.ts). */
export function isSignedCheckpoint(text: string): boolean {
  return !text.trimStart().startsWith('{');
}

export async function verifyLogCheckpoint(ctx: ServiceContext, note: string, verifier: NoteVerifier): Promise<LogCheckpointReport> {
  const installation = await readInstallation(ctx);
  const origin = installation ? installationKeyName(installation.installation_id) : verifier.name;
  const cp = openCheckpoint(note, verifier, origin); // INTEGRITY unless the pinned key signed it; CONFLICT for another log
  const state = await readLogState(ctx);
  const findings: LogFinding[] = [];
  const add = (row: string, problem: string) => findings.push({ row, problem });
  const done = () => ({ checkpoint_size: cp.size, log_size: state.size, ok: findings.length === 0, findings });
  if (state.size < cp.size) {
    add('TLOG STATE', `the log has ${state.size} leaves, fewer than the checkpoint's ${cp.size} (the log was truncated)`);
    return done();
  }
  const tree = new TiledTree(state.size, contentTileReader(ctx.content, true));
  try {
    const current = await tree.root();
    if (!hashesEqual(current, state.root))
      add('TLOG STATE', "STATE's root is not the root of the stored tiles (a tile or STATE was rewritten)");
    if (cp.size > 0 && !verifyConsistency(cp.size, state.size, cp.root, current, await tree.consistencyProof(cp.size)))
      add('tlog/tile', `the stored tree of ${state.size} leaves does not extend the checkpoint of ${cp.size} (a tile was rewritten)`);
  } catch (e) {
    add('tlog/tile', `the stored tree cannot be read: ${(e as Error).message}`);
  }
  let leaves: LeafEntry[];
  try {
    leaves = await readLeafEntries(ctx.content, 0, cp.size, true);
  } catch (e) {
    add('tlog/tile/entries', `the entry bundles cannot be read: ${(e as Error).message}`);
    return done();
  }
  if (!hashesEqual(rootOf(leaves.map((l) => auditLeafHash(l.hash as Digest))), cp.root))
    add('tlog/tile/entries', "the entry bundles' leaves do not hash to the checkpoint's root (a bundle was rewritten)");
  for (const f of await checkLeavesAgainstChains(ctx, leaves)) findings.push(f);
  return done();
}

/** Every leaf's entry exists in its chain and hashes to the leaf. */
async function checkLeavesAgainstChains(ctx: ServiceContext, leaves: readonly LeafEntry[]): Promise<LogFinding[]> {
  const byArtifact = new Map<string, Array<{ leaf: number; entry: LeafEntry }>>();
  leaves.forEach((entry, leaf) => {
    const list = byArtifact.get(entry.artifact_id) ?? [];
    list.push({ leaf, entry });
    byArtifact.set(entry.artifact_id, list);
  });
  const out: LogFinding[] = [];
  for (const [id, list] of byArtifact) {
    const { bySeq, hashOf } = await chainEntries(ctx, id);
    for (const { leaf, entry } of list) {
      const row = `leaf ${leaf} (${id} seq ${entry.seq})`;
      const e = bySeq.get(entry.seq);
      if (!e) out.push({ row, problem: `the log holds entry ${entry.seq} of ${id}, which its chain no longer has (entries were removed)` });
      else if (e.hash !== entry.hash || hashOf(e) !== entry.hash)
        out.push({ row, problem: `entry ${entry.seq} of ${id} is not the one the log holds (history was rewritten)` });
    }
  }
  return out;
}

export interface LogSelfCheck {
  size: number;
  ok: boolean;
  detail: string;
}

/**
 * What `alp audit verify` checks of the log without a checkpoint: the root of the stored tiles is
 * STATE's. Missing objects are not a finding (a restored installation: the next round rebuilds them).
 * Without a checkpoint this proves only that the log is self-consistent, not that it was not rewritten.
 */
export async function checkLogState(ctx: ServiceContext): Promise<LogSelfCheck> {
  const state = await readLogState(ctx);
  if (state.size === 0) return { size: 0, ok: true, detail: 'the transparency log is empty' };
  let root: Uint8Array;
  try {
    root = await new TiledTree(state.size, contentTileReader(ctx.content, true)).root();
  } catch (e) {
    return {
      size: state.size,
      ok: true,
      detail: `the log's objects cannot be read (${(e as Error).message}); the next round rebuilds them from the markers`,
    };
  }
  return hashesEqual(root, state.root)
    ? { size: state.size, ok: true, detail: `the transparency log holds ${state.size} leaves; its tiles give STATE's root` }
    : { size: state.size, ok: false, detail: "STATE's root is not the root of the stored tiles (a tile or STATE was rewritten)" };
}
