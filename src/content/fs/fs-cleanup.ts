/** What a dead writer left in the content root: its temp files and the empty directories of its uploads. */
import type { Dirent } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { processAlive } from '../../core/process.ts';

/** Top-level directories whose empty subdirectories are removed. */
const PRUNED_PREFIXES = ['artifacts', 'executions'];

/**
 * Removes the temp files (`{tempPrefix}{pid}-…`) of dead writers below `root`, then the empty
 * directories below artifacts/ and executions/ (never the root or a top-level directory).
 */
export async function removeInterrupted(root: string, tempPrefix: string): Promise<number> {
  let removed = 0;
  const visit = async (dir: string, depth: number, prunable: boolean): Promise<void> => {
    const entries = await fs.readdir(dir, { withFileTypes: true }).catch(() => [] as Dirent[]);
    for (const e of entries) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) await visit(p, depth + 1, depth === 0 ? PRUNED_PREFIXES.includes(e.name) : prunable);
      else if (e.isFile() && e.name.startsWith(tempPrefix)) {
        const pid = Number(e.name.slice(tempPrefix.length).split('-')[0]);
        if (pid !== process.pid && !processAlive(pid)) {
          await fs.unlink(p).catch(() => {});
          removed++;
        }
      }
    }
    if (prunable && depth >= 2) await fs.rmdir(dir).catch(() => {});
  };
  await visit(root, 0, false);
  return removed;
}
