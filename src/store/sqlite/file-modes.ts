/**
 * The embedded installation is private to its OS user and group: directories 0750, the database and
 * its -wal / -shm 0640, whatever the umask. A mode given to mkdir/open is masked by the umask, which
 * can only remove bits, so creating with these modes is never more open than intended; SQLite creates
 * -wal and -shm with the database file's own mode, so a private database keeps them private.
 * An existing installation made under a looser umask is tightened by `tightenInstallation` (alp
 * start, serve and init call it and warn).
 */
import fs from 'node:fs';
import path from 'node:path';

const PRIVATE_DIR_MODE = 0o750;
const PRIVATE_FILE_MODE = 0o640;

/** Creates `dir` (and missing parents) private; directories that already existed are left alone. */
export function ensurePrivateDir(dir: string): void {
  const first = fs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  if (first === undefined) return;
  // mkdir's mode applies after the umask; remove anything beyond 0750 from what this call created.
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    tighten(d, PRIVATE_DIR_MODE);
    if (d === path.resolve(first) || d === path.dirname(d)) break;
  }
}

/** Creates the database file empty and private before SQLite opens it (its -wal/-shm follow its mode). */
export function ensurePrivateFile(file: string): void {
  try {
    fs.closeSync(fs.openSync(file, 'wx', PRIVATE_FILE_MODE));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    return;
  }
  tighten(file, PRIVATE_FILE_MODE);
}

export interface Tightened {
  path: string;
  from: number;
  to: number;
}

/** Removes the mode bits beyond `max` (never adds any); returns what changed, if anything. */
function tighten(p: string, max: number): Tightened | undefined {
  let mode: number;
  try {
    mode = fs.statSync(p).mode & 0o7777;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  if ((mode & ~max) === 0) return undefined;
  const to = mode & max;
  fs.chmodSync(p, to);
  return { path: p, from: mode, to };
}

/**
 * Tightens an existing installation: the database, its -wal and -shm, and the data directory when
 * it is one (the directory holding the database is only touched when asked: a `sqlite:PATH` may
 * live in a shared directory that is not ALP's to change).
 */
export function tightenInstallation(dbFile: string, dataDirs: string[]): Tightened[] {
  const changed = [
    ...dataDirs.map((d) => tighten(d, PRIVATE_DIR_MODE)),
    ...[dbFile, `${dbFile}-wal`, `${dbFile}-shm`].map((f) => tighten(f, PRIVATE_FILE_MODE)),
  ];
  return changed.filter((c): c is Tightened => c !== undefined);
}
