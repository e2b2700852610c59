/**
 * ContentStore on a local directory. Publishing is atomic and durable: bytes go to a temp file in the
 * target directory (O_EXCL), are hashed in the same pass, fsynced, then linked to the key (create-only
 * keys: link() fails with EEXIST instead of replacing what is there) or renamed over it (replaceable
 * keys); then one round fsyncs the target directory and the parent of every directory not yet durable
 * (fs-dirs.ts), each once, shared with concurrent publishes (docs/design.md §6, "fs publish"). A small
 * fresh key (in-place.ts) is written at the key itself and made durable in one round. Keys
 * reach the filesystem only through `resolve`, which validates them and refuses symlinks anywhere below
 * the root.
 */
import { constants as C, fstatSync, linkSync, lstatSync, renameSync, unlinkSync } from 'node:fs';
import fs, { type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Digest } from '../../core/digest.ts';
import { IntegrityError, InvalidInput, NotFound } from '../../core/errors.ts';
import { fsyncDir } from '../../core/fsync.ts';
import { randomToken } from '../../core/ids.ts';
import { validateListPrefix, validateObjectKey } from '../../core/object-keys.ts';
import {
  type Body,
  type ContentStore,
  createOnlyConflict,
  type GetOptions,
  isCreateOnlyKey,
  type ListPage,
  type ObjectInfo,
  type PutOptions,
  type PutResult,
  type StagedObject,
  type StorageClass,
} from '../content-store.ts';
import { checkRange, decodeListCursor, encodeListCursor, listLimit } from '../validate.ts';
import { writeBody } from './body-writer.ts';
import { removeInterrupted } from './fs-cleanup.ts';
import { ContentDirs, type TargetDir } from './fs-dirs.ts';
import { diskError, mapFsError, notRegular } from './fs-errors.ts';
import { reportedClass, walkListing, walkObjects } from './fs-walk.ts';
import { CREATE_FLAGS, checkWhole, settleAll, writesInPlace } from './in-place.ts';
import { closeInPool, closeSynced, fsyncFile, openTempFile } from './temp-file.ts';
import { VerifiedFileStream } from './verified-file.ts';

const TEMP_PREFIX = '.alp-tmp-';
const READ_CHUNK = 1 << 20;
const FILE_MODE = 0o640;
const DIR_MODE = 0o750;

export interface FsContentStoreOptions {
  /**
   * Fault-injection seam for tests (never set in production): runs before every fsync the store
   * issues — of a staged file before its rename, of a directory after renames, creations and deletes.
   * Throwing from it fails that fsync as a failing disk would.
   */
  fsyncHook?: (target: { kind: 'file' | 'dir'; path: string }) => void | Promise<void>;
}

export class FsContentStore implements ContentStore {
  readonly engine = 'fs';
  readonly hasStorageClasses = false;
  readonly location: string;

  private readonly staging = new Map<
    StagedObject,
    /** `writtenPath`: where the bytes were written — a temp name, or the key itself when `inPlace`. */
    { fd: number; writtenPath: string; finalPath: string; target: TargetDir; repair: boolean; inPlace: boolean }
  >();

  private readonly dirs: ContentDirs;

  private constructor(
    private readonly root: string,
    private readonly opts: FsContentStoreOptions,
  ) {
    this.location = `file:${root}`;
    this.dirs = new ContentDirs(root, (dir) => this.fsyncDirectory(dir));
  }

  static async open(root: string, opts: FsContentStoreOptions = {}): Promise<FsContentStore> {
    await fs.mkdir(root, { recursive: true, mode: DIR_MODE });
    return new FsContentStore(await fs.realpath(root), opts);
  }

  private async syncFile(fd: number, file: string): Promise<void> {
    try {
      await this.opts.fsyncHook?.({ kind: 'file', path: file });
      await fsyncFile(fd);
    } catch (e) {
      throw diskError(e);
    }
  }

  private async fsyncDirectory(dir: string): Promise<void> {
    try {
      await this.opts.fsyncHook?.({ kind: 'dir', path: dir });
      await fsyncDir(dir);
    } catch (e) {
      throw diskError(e);
    }
  }

  async put(key: string, body: Body, opts: PutOptions = {}): Promise<PutResult> {
    const staged = await this.stage(key, body, opts);
    await this.publish([staged]);
    return { digest: staged.digest, size: staged.size };
  }

  /**
   * Writes the bytes to a temp file in the target directory (O_EXCL), or for a small fresh key to the
   * key itself (O_EXCL), hashing them in the same pass (body-writer.ts).
   */
  async stage(key: string, body: Body, opts: PutOptions = {}): Promise<StagedObject> {
    const segments = validateObjectKey(key);
    const name = segments[segments.length - 1] as string;
    const { target, fd, writtenPath, inPlace } = await this.openTemp(
      segments.slice(0, -1),
      writesInPlace(key, body, opts) ? name : undefined,
    );
    const finalPath = path.join(target.dir, name);
    try {
      const { digest, size } = await writeBody(fd, body, opts, (e) => diskError(e));
      if (opts.expectedDigest && opts.expectedDigest !== digest) {
        throw new IntegrityError(`content does not match the expected digest ${opts.expectedDigest} (got ${digest})`, {
          key,
          expected: opts.expectedDigest,
          actual: digest,
        });
      }
      const staged: StagedObject = { key, digest, size };
      this.staging.set(staged, { fd, writtenPath, finalPath, target, repair: opts.repair === true, inPlace });
      return staged;
    } catch (e) {
      await closeInPool(fd);
      await fs.unlink(writtenPath).catch(() => {});
      this.dirs.removeEmpty(target.made);
      throw e;
    }
  }

  /**
   * Creates the target directory and a temp file in it — or the file `inPlaceName` itself, unless
   * something is there already (then a temp file: publish's link decides between a retry and a
   * conflict). A concurrent cleanup (a refused upload's, or cleanupInterrupted) may remove an empty
   * directory between the two steps: then both are done again, once.
   */
  private async openTemp(dirSegments: string[], inPlaceName: string | undefined) {
    for (let attempt = 0; ; attempt++) {
      let made: string[] = [];
      try {
        const target = await this.dirs.ensure(dirSegments);
        made = target.made;
        if (inPlaceName !== undefined) {
          const finalPath = path.join(target.dir, inPlaceName);
          const fd = await openTempFile(finalPath, CREATE_FLAGS, FILE_MODE).catch((e: NodeJS.ErrnoException) => {
            if (e.code === 'EEXIST') return undefined;
            throw e;
          });
          if (fd !== undefined) return { target, fd, writtenPath: finalPath, inPlace: true };
        }
        const tmpPath = path.join(target.dir, `${TEMP_PREFIX}${process.pid}-${randomToken(9)}`);
        const fd = await openTempFile(tmpPath, CREATE_FLAGS, FILE_MODE);
        return { target, fd, writtenPath: tmpPath, inPlace: false };
      } catch (e) {
        const vanished = (e as NodeJS.ErrnoException).code === 'ENOENT' || e instanceof NotFound;
        if (!vanished || attempt > 0) {
          this.dirs.removeEmpty(made);
          throw mapFsError(e, dirSegments.join('/'));
        }
      }
    }
  }

  /**
   * Two rounds: fsyncs every staged file at once; publishes each at its key (link for create-only keys,
   * rename otherwise); then fsyncs every directory whose entries changed or are not yet durable, each
   * once. A crash before the links leaves temp files only; before the second round ends, unreferenced
   * whole objects at most. Objects written in place (fresh keys) are at their keys already: when every
   * object of the publish is, the directories are fsynced in the same round as the files — a crash
   * before it ends leaves unreferenced (maybe partial) bytes at keys nothing names (docs/design.md §6).
   */
  async publish(staged: StagedObject[]): Promise<void> {
    const states = staged.map((s) => {
      const state = this.staging.get(s);
      if (!state) throw new InvalidInput(`${s.key} was not staged here, or was published already`);
      return state;
    });
    for (const s of staged) this.staging.delete(s);
    const syncDirs = () =>
      this.dirs.syncAll(
        states.flatMap((s) => [s.target.dir, ...s.target.parents]),
        states.flatMap((s) => s.target.fresh),
      );
    const oneRound = states.every((s) => s.inPlace);
    let published = 0;
    let closed = false;
    try {
      // Settled, not raced: a descriptor is closed (on failure) only once no fsync of it is in flight.
      await settleAll([...states.map((s) => this.syncFile(s.fd, s.writtenPath)), ...(oneRound ? [syncDirs()] : [])]);
      // A torn write (the file on disk shorter or longer than the bytes that were hashed) is never
      // published: one fstat per file, after the fsync, before the link.
      for (const [i, s] of states.entries()) checkWhole(staged[i] as StagedObject, fstatSync(s.fd).size);
      // Closing changes nothing on disk, and after the fsync it is a microsecond syscall (temp-file.ts).
      closed = true;
      for (const s of states) closeSynced(s.fd);
      for (const [i, s] of states.entries()) {
        if (!s.inPlace) await this.publishOne(staged[i] as StagedObject, s);
        published++;
      }
      // One round for every directory whose entries changed: the targets (the links) and the parents of
      // directories not yet durable. Nothing names the keys before this round has succeeded.
      if (!oneRound) await syncDirs();
    } catch (e) {
      // Not yet published: a temp file, or bytes in place at a fresh key that nothing names — both ours to remove.
      for (const s of states.slice(published)) {
        if (!closed) await closeInPool(s.fd);
        await fs.unlink(s.writtenPath).catch(() => {});
        this.dirs.removeEmpty(s.target.made);
      }
      throw diskError(e);
    }
  }

  /**
   * A create-only key is linked, never renamed over: link() fails with EEXIST when anything is at the
   * key, so committed bytes are never replaced, whatever a late writer does. The same bytes already
   * there are success (a retry); other bytes are CONFLICT. `repair` (restore) replaces bytes that do not
   * match the digest being written — damaged bytes, never a good copy.
   */
  private async publishOne(staged: StagedObject, s: { writtenPath: string; finalPath: string; repair: boolean }): Promise<void> {
    if (!isCreateOnlyKey(staged.key)) {
      renameSync(s.writtenPath, s.finalPath);
      return;
    }
    try {
      linkSync(s.writtenPath, s.finalPath);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      // A planted symlink was never an object the engine wrote: it is replaced (the link itself, never
      // what it points at), as before the create-only rule.
      const planted = lstatSync(s.finalPath, { throwIfNoEntry: false })?.isSymbolicLink() === true;
      const same = !planted && (await this.holds(staged));
      if (!same && !s.repair && !planted) throw createOnlyConflict(staged.key);
      if (!same) {
        renameSync(s.writtenPath, s.finalPath);
        return;
      }
    }
    unlinkSync(s.writtenPath);
  }

  /** Whether the key holds exactly these bytes (verified by hashing them). */
  private async holds(staged: StagedObject): Promise<boolean> {
    try {
      const stream = await this.get(staged.key, staged.digest, { expectedSize: staged.size });
      for await (const _ of stream);
      return true;
    } catch (e) {
      if (e instanceof IntegrityError || e instanceof NotFound) return false;
      throw e;
    }
  }

  async discard(staged: StagedObject[]): Promise<void> {
    for (const s of staged) {
      const state = this.staging.get(s);
      if (!state) continue;
      this.staging.delete(s);
      await closeInPool(state.fd);
      await fs.unlink(state.writtenPath).catch(() => {});
      this.dirs.removeEmpty(state.target.made);
    }
  }

  async get(key: string, expectedDigest: Digest, opts: GetOptions = {}): Promise<Readable> {
    const { fh, size } = await this.openObject(key);
    try {
      checkRange(opts, size);
      return new VerifiedFileStream(fh, size, { key, expectedDigest, expectedSize: opts.expectedSize, start: opts.start, end: opts.end });
    } catch (e) {
      await fh.close().catch(() => {});
      throw e;
    }
  }

  async readRaw(key: string): Promise<Readable> {
    const { fh, size } = await this.openObject(key);
    return fh.createReadStream({ highWaterMark: readChunk(size), autoClose: true });
  }

  /**
   * The one way an existing object is opened. O_NONBLOCK: opening a FIFO (or a device) planted at an
   * object's path must not wait for a writer — a blocked open holds a thread of Node's I/O pool, and
   * four of them stall every upload and download of the process. O_NOFOLLOW: never a symlink. Anything
   * but a regular file is INTEGRITY, at once. (O_NONBLOCK changes nothing for reads of regular files.)
   */
  private async openObject(key: string): Promise<{ fh: FileHandle; size: number }> {
    const file = this.dirs.existing(key);
    let fh: FileHandle;
    try {
      fh = await fs.open(file, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
    } catch (e) {
      throw mapFsError(e, key);
    }
    try {
      const stat = await fh.stat();
      // A directory at the path is "no object there", as on S3 (its keys are below it).
      if (stat.isDirectory()) throw new NotFound(`no object at ${key}`);
      if (!stat.isFile()) throw notRegular(key, stat);
      return { fh, size: stat.size };
    } catch (e) {
      await fh.close().catch(() => {});
      throw mapFsError(e, key);
    }
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    let file: string;
    try {
      file = this.dirs.existing(key);
    } catch (e) {
      if (e instanceof NotFound) return undefined;
      throw e;
    }
    const stat = await fs.lstat(file).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return undefined;
      throw e;
    });
    if (!stat) return undefined;
    if (stat.isSymbolicLink()) throw new InvalidInput(`refusing symlink at ${key}`);
    if (!stat.isFile()) return undefined;
    return { key, size: stat.size, storageClass: reportedClass(key) };
  }

  /** No storage classes on a file system: nothing to report (head's storageClass is a stand-in). */
  async storageClass(_key: string): Promise<string | undefined> {
    return undefined;
  }

  async listPage(prefix: string, opts: { cursor?: string; limit?: number } = {}): Promise<ListPage> {
    validateListPrefix(prefix);
    const limit = listLimit(opts.limit);
    const after = opts.cursor === undefined ? undefined : decodeListCursor(opts.cursor, prefix);
    const objects: ObjectInfo[] = [];
    let more = false;
    for await (const batch of this.walk(prefix, after)) {
      const room = limit - objects.length;
      objects.push(...batch.slice(0, room));
      if (batch.length > room) {
        more = true;
        break;
      }
    }
    const page: ListPage = { objects };
    if (more) page.cursor = encodeListCursor((objects[objects.length - 1] as ObjectInfo).key);
    return page;
  }

  /** One walk of the whole prefix (fs-walk.ts walkListing), not a walk per page; a large one goes on in a worker thread. */
  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    validateListPrefix(prefix);
    for await (const batch of this.walk(prefix, undefined, true)) yield* batch;
  }

  async copy(sourceKey: string, targetKey: string, opts: { expectedDigest: Digest; storageClass?: StorageClass }): Promise<PutResult> {
    const source = await this.get(sourceKey, opts.expectedDigest);
    return this.put(targetKey, source, { expectedDigest: opts.expectedDigest });
  }

  async delete(key: string): Promise<boolean> {
    let file: string;
    try {
      file = this.dirs.existing(key);
    } catch (e) {
      if (e instanceof NotFound) return false;
      throw e;
    }
    try {
      await fs.unlink(file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw e;
    }
    await this.dirs.sync(path.dirname(file));
    return true;
  }

  /**
   * Removes the temp files of dead writers, then the empty directories below artifacts/ and
   * executions/ (those of refused or interrupted uploads; never the root or a top-level directory).
   * rmdir fails harmlessly on a directory a live writer just put something in, and a live writer whose
   * fresh directory vanishes before its temp file is open creates it again (openTemp).
   */
  async cleanupInterrupted(): Promise<number> {
    return removeInterrupted(this.root, TEMP_PREFIX);
  }

  async close(): Promise<void> {}

  /** The walk of fs-walk.ts from the prefix's directory (symlink-checked), in batches. */
  private async *walk(prefix: string, after: string | undefined, worker = false): AsyncGenerator<ObjectInfo[]> {
    const slash = prefix.lastIndexOf('/');
    const dirKey = slash >= 0 ? prefix.slice(0, slash + 1) : '';
    let dirPath: string;
    try {
      dirPath = dirKey === '' ? this.root : path.dirname(this.dirs.existing(`${dirKey}x`));
    } catch (e) {
      if (e instanceof NotFound) return;
      throw e;
    }
    const scope = { dirKey, dirPath, prefix, ...(after !== undefined ? { after } : {}), tempPrefix: TEMP_PREFIX };
    yield* worker ? walkListing(scope) : walkObjects(scope);
  }
}

/** 1 MiB reads for large objects; small ones get a buffer of their own size (plus one byte for EOF). */
function readChunk(size: number): number {
  return Math.min(READ_CHUNK, Math.max(16 * 1024, size + 1));
}
