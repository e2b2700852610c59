/**
 * The directories of the fs content engine: resolved for reads and made on demand for writes below the
 * root (never through a symlink),
 * fsynced once per publish round and shared between concurrent publishes (dir-sync.ts), and tracked
 * until their own entry is durable: a directory this process made is *undurable* until a fsync of its
 * parent, issued after the mkdir, has succeeded. Every stage into an undurable directory fsyncs that
 * parent again, whoever made the directory — so an object published before the one whose stage made
 * its directory cannot be committed while the directory itself could still vanish in a crash.
 */
import { lstatSync, rmdirSync, type Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { InvalidInput, NotFound } from '../../core/errors.ts';
import { validateObjectKey } from '../../core/object-keys.ts';
import { DirSyncer } from './dir-sync.ts';

const DIR_MODE = 0o750;

/** What a stage needs from the directory walk: where to write and what its publish must fsync. */
export interface TargetDir {
  /** The directory the object's key is in. */
  dir: string;
  /** Directories whose entries changed or may not be durable yet: fsynced in the publish's directory round. */
  parents: string[];
  /** Directories this walk made, below the top level: a refused write removes them again (while empty). */
  made: string[];
  /** Directories made (by anyone in this process) whose entries the fsync of `parents` makes durable, with the mark of the mkdir seen. */
  fresh: Array<{ dir: string; mark: number }>;
}

export class ContentDirs {
  private readonly syncer: DirSyncer;
  /** Directories made here whose entry no fsync has made durable yet → the mark of that mkdir (a directory removed and made again gets a new one). */
  private readonly undurable = new Map<string, number>();
  private marks = 0;

  constructor(
    private readonly root: string,
    fsyncDir: (dir: string) => Promise<void>,
  ) {
    this.syncer = new DirSyncer(fsyncDir);
  }

  /**
   * Creates missing directories, refusing symlinks on the way. Existing ones are checked with one
   * synchronous lstat each (microseconds, less than a trip through the I/O pool); the missing rest is
   * made by one recursive mkdir in the pool (a new inode costs ~0.2 ms under load: not on the event
   * loop, and one trip for `{id}/v1/` rather than one per level). What that mkdir made is a directory.
   */
  async ensure(dirSegments: string[]): Promise<TargetDir> {
    const levels = dirSegments.map((_, i) => path.join(this.root, ...dirSegments.slice(0, i + 1)));
    const parentOf = (i: number) => (i === 0 ? this.root : (levels[i - 1] as string));
    const target: TargetDir = { dir: this.root, parents: [], made: [], fresh: [] };
    let missing = levels.length;
    for (const [i, dir] of levels.entries()) {
      const stat = lstatSync(dir, { throwIfNoEntry: false });
      if (!stat) {
        missing = i;
        break;
      }
      this.check(dir, stat);
      const mark = this.undurable.get(dir);
      if (mark !== undefined) {
        target.parents.push(parentOf(i));
        target.fresh.push({ dir, mark });
      }
    }
    target.dir = levels[levels.length - 1] ?? this.root;
    if (missing === levels.length) return target;
    const first = await fs.mkdir(target.dir, { recursive: true, mode: DIR_MODE });
    // Normally `first` is the first missing level. A concurrent writer may have made some of them
    // (then they are checked, and their parents fsynced by this publish too: they may not be durable
    // yet); a concurrent rmdir may have removed a level above, which this mkdir made again.
    const own = first === undefined ? levels.length : Math.max(0, levels.indexOf(first));
    for (let i = Math.min(own, missing); i < levels.length; i++) {
      const dir = levels[i] as string;
      if (i >= own) {
        const mark = ++this.marks;
        this.undurable.set(dir, mark);
        target.fresh.push({ dir, mark });
        if (i > 0) target.made.push(dir);
      } else {
        this.check(dir, lstatSync(dir));
      }
      target.parents.push(parentOf(i));
    }
    return target;
  }

  /**
   * The path of an existing key's file, refusing any symlinked directory on the way; NotFound when a
   * directory is missing or is not one. Synchronous: one metadata syscall of microseconds costs less
   * than a trip through the I/O pool.
   */
  existing(key: string): string {
    const segments = validateObjectKey(key);
    let current = this.root;
    for (const seg of segments.slice(0, -1)) {
      current = path.join(current, seg);
      let stat: Stats | undefined;
      try {
        stat = lstatSync(current, { throwIfNoEntry: false });
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOTDIR') throw e;
      }
      if (!stat) throw new NotFound(`no object at ${key}`);
      if (stat.isSymbolicLink()) throw this.symlink(current);
      if (!stat.isDirectory()) throw new NotFound(`no object at ${key}`);
    }
    return path.join(current, segments[segments.length - 1] as string);
  }

  private symlink(dir: string): InvalidInput {
    return new InvalidInput(`refusing symlink inside the content root at ${path.relative(this.root, dir)}`);
  }

  private check(dir: string, stat: Stats): void {
    if (stat.isSymbolicLink()) throw this.symlink(dir);
    if (!stat.isDirectory()) throw new InvalidInput(`${path.relative(this.root, dir)} is not a directory`);
  }

  /** One fsync of each directory, concurrently, shared with concurrent publishes; then their fresh children are durable. */
  async syncAll(dirs: Iterable<string>, fresh: TargetDir['fresh']): Promise<void> {
    await Promise.all([...new Set(dirs)].map((d) => this.syncer.sync(d)));
    for (const { dir, mark } of fresh) if (this.undurable.get(dir) === mark) this.undurable.delete(dir);
  }

  /** One fsync of `dir`, shared with concurrent publishes (dir-sync.ts). */
  sync(dir: string): Promise<void> {
    return this.syncer.sync(dir);
  }

  /**
   * Removes directories a refused write made, deepest first, while they are empty. Never recursive:
   * rmdir fails (harmlessly, and then the parents are not empty either) once another writer put
   * something there.
   */
  removeEmpty(made: string[]): void {
    for (const dir of [...made].reverse()) {
      try {
        rmdirSync(dir);
        this.undurable.delete(dir);
      } catch {
        return;
      }
    }
  }
}
