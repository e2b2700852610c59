/**
 * A scratch working set on disk (issue 17 "bounded memory"): a temporary SQLite database in its own
 * directory under the OS temp dir (or `dir`), for maintenance that must hold state proportional to the
 * installation (reference sets, object listings, manifests) without holding it in the heap. Nothing in
 * it is durable or shared: journaling and fsync are off, the page cache is capped (so RSS stays flat
 * whatever the installation's size), and close() deletes the directory. Not an ItemStore engine: the
 * installation's own state never lives here.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { positiveEnv } from '../core/config.ts';

/**
 * Page cache per scratch database: what bounds its memory (SQLite's cache_size, in KiB when negative).
 * ALP_SCRATCH_CACHE_KIB overrides it (a larger cache trades memory for fewer page reads at scale).
 */
export const SCRATCH_CACHE_KIB = positiveEnv(process.env.ALP_SCRATCH_CACHE_KIB) ?? 8 * 1024;

export interface Scratch {
  readonly db: Database.Database;
  readonly dir: string;
  /** Closes the database and deletes its directory; idempotent. */
  close(): void;
}

export function openScratch(label: string, opts: { dir?: string } = {}): Scratch {
  const parent = opts.dir ?? os.tmpdir();
  fs.mkdirSync(parent, { recursive: true });
  const dir = fs.mkdtempSync(path.join(parent, `alp-${label.replace(/[^a-z0-9-]/gi, '-')}-`));
  const db = new Database(path.join(dir, 'scratch.db'));
  db.pragma('journal_mode = OFF');
  db.pragma('synchronous = OFF');
  db.pragma('temp_store = FILE');
  db.pragma(`cache_size = -${SCRATCH_CACHE_KIB}`);
  db.pragma('locking_mode = EXCLUSIVE');
  let closed = false;
  return {
    db,
    dir,
    close() {
      if (closed) return;
      closed = true;
      try {
        db.close();
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
