/**
 * The backup directory format (alp-backup/1), the same for every engine:
 *
 *   manifest.json   installation id, epoch, times, source, consistency, the digests and counts of the
 *                   two files below, and `manifest_digest`: sha256 of the manifest's canonical JSON
 *                   without that field. Tampering with any file is detected through it.
 *   items.jsonl     every item of the base table, one canonical JSON document per line
 *   objects.jsonl   every object the items name (references.ts refsOfItem), sorted by key:
 *                   {key, digest, size?, mutable?}; the reference source retention reads
 *   content/        (--with-content only) verified copies of the immutable objects, by key
 *
 * A backup directory is written under a temporary name beside its target and renamed when complete,
 * so a directory with the final name is always a complete backup.
 */
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { canonicalDigest, canonicalJson } from '../core/canonical-json.ts';
import { type Digest, DigestAccumulator, isDigest } from '../core/digest.ts';
import { IntegrityError, InvalidInput, NotFound } from '../core/errors.ts';
import type { Item, ItemKey } from '../store/item-store.ts';
import { isFenceShardKey } from '../system/fence-shards.ts';
import { LIVE_LOCK_KEYS } from '../system/state.ts';

export const BACKUP_FORMAT = 'alp-backup/1';
export const MANIFEST_FILE = 'manifest.json';
export const ITEMS_FILE = 'items.jsonl';
export const OBJECTS_FILE = 'objects.jsonl';
export const CONTENT_DIR = 'content';

/** Live locks, never data (system/state.ts; and the fence shards, system/fence-shards.ts): a backup leaves them out and a restore never writes them. */
export const NEVER_BACKED_UP: readonly ItemKey[] = LIVE_LOCK_KEYS;

export function isNeverBackedUp(key: ItemKey): boolean {
  return NEVER_BACKED_UP.some((k) => k.PK === key.PK && k.SK === key.SK) || isFenceShardKey(key);
}

export interface BackupObject {
  key: string;
  digest: Digest;
  size?: number;
  /** provenance/ documents: derived from the items and rewritten; not copied by --with-content. */
  mutable?: true;
  /** In retention's logical quarantine: copied and listed, but not a reference (references.ts). */
  retained?: true;
  /** An archived original whose verified copy is the reference now (issue 17 B13): listed and copied, not a reference. */
  superseded?: true;
}

export interface BackupFileInfo {
  file: string;
  count: number;
  bytes: number;
  digest: Digest;
}

export interface BackupManifest {
  format: typeof BACKUP_FORMAT;
  backup_id: string;
  installation_id: string;
  /** The installation epoch in the snapshot. */
  epoch: number;
  /** The instant the items were read (point-in-time), or the start of the fenced scan. */
  snapshot_at: string;
  completed_at: string;
  created_by: string;
  source: { engine: string; metadata: string; content: string };
  /** `point-in-time`: an online copy of the database; `fenced-scan`: a scan under the maintenance fence. */
  consistency: 'point-in-time' | 'fenced-scan';
  items: BackupFileInfo;
  objects: BackupFileInfo & { total_size: number; mutable: number };
  with_content: boolean;
  content?: { dir: string; count: number; bytes: number };
  /** Whether the source itself was a restore not yet activated. */
  source_restore_held: boolean;
  /** Keys of items left out (live locks and this backup's own registry record). */
  excluded: string[];
  manifest_digest: Digest;
}

export function manifestDigest(m: Omit<BackupManifest, 'manifest_digest'> & { manifest_digest?: unknown }): Digest {
  const { manifest_digest: _d, ...rest } = m;
  return canonicalDigest(rest);
}

/** Appends lines to a file while hashing and counting them; `finish` fsyncs and closes. */
export class JsonLinesWriter {
  private readonly acc = new DigestAccumulator();
  private buffered: Buffer[] = [];
  private bufferedBytes = 0;
  count = 0;

  private constructor(
    private readonly fh: fs.FileHandle,
    readonly file: string,
  ) {}

  static async create(file: string): Promise<JsonLinesWriter> {
    return new JsonLinesWriter(await fs.open(file, 'wx', 0o640), file);
  }

  async write(value: unknown): Promise<void> {
    const line = Buffer.from(`${canonicalJson(value)}\n`, 'utf8');
    this.acc.update(line);
    this.buffered.push(line);
    this.bufferedBytes += line.length;
    this.count++;
    if (this.bufferedBytes >= 1 << 20) await this.flush();
  }

  private async flush(): Promise<void> {
    if (this.bufferedBytes === 0) return;
    const data = Buffer.concat(this.buffered);
    this.buffered = [];
    this.bufferedBytes = 0;
    let offset = 0;
    while (offset < data.length) offset += (await this.fh.write(data, offset)).bytesWritten;
  }

  async finish(): Promise<BackupFileInfo> {
    await this.flush();
    await this.fh.sync();
    await this.fh.close();
    return { file: path.basename(this.file), count: this.count, bytes: this.acc.size, digest: this.acc.digest() };
  }

  async abort(): Promise<void> {
    await this.fh.close().catch(() => {});
  }
}

/** The lines of a JSON Lines file, parsed, streaming. */
export async function* readJsonLines<T>(file: string): AsyncIterable<T> {
  const lines = createInterface({ input: createReadStream(file, { highWaterMark: 1 << 20 }), crlfDelay: Number.POSITIVE_INFINITY });
  let n = 0;
  for await (const line of lines) {
    n++;
    if (line === '') continue;
    try {
      yield JSON.parse(line) as T;
    } catch {
      throw new IntegrityError(`${path.basename(file)} line ${n} is not JSON`);
    }
  }
}

/** Hashes and counts a JSON Lines file without parsing it. */
export async function fileInfo(file: string): Promise<{ bytes: number; digest: Digest; count: number }> {
  const acc = new DigestAccumulator();
  let count = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) {
    const buf = chunk as Buffer;
    acc.update(buf);
    for (let i = buf.indexOf(10); i !== -1; i = buf.indexOf(10, i + 1)) count++;
  }
  return { bytes: acc.size, digest: acc.digest(), count };
}

/** Reads manifest.json and checks its own digest; NotFound when the directory holds no backup. */
export async function readManifest(dir: string): Promise<BackupManifest> {
  let text: string;
  try {
    text = await fs.readFile(path.join(dir, MANIFEST_FILE), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFound(`no backup at ${dir} (no ${MANIFEST_FILE})`);
    throw e;
  }
  let m: BackupManifest;
  try {
    m = JSON.parse(text) as BackupManifest;
  } catch {
    throw new IntegrityError(`${path.join(dir, MANIFEST_FILE)} is not JSON`);
  }
  if (m === null || typeof m !== 'object' || m.format !== BACKUP_FORMAT)
    throw new InvalidInput(`${dir} is not an ${BACKUP_FORMAT} backup (format ${JSON.stringify((m as { format?: unknown })?.format)})`);
  if (!isDigest(m.manifest_digest) || manifestDigest(m) !== m.manifest_digest)
    throw new IntegrityError(`the manifest of ${dir} does not match its digest: it was edited or damaged`, { dir });
  return m;
}

/** Checks items.jsonl and objects.jsonl against the manifest (digest, size, line count). */
export async function verifyBackupFiles(dir: string, m: BackupManifest): Promise<void> {
  for (const expected of [m.items, m.objects]) {
    const file = path.join(dir, path.basename(expected.file));
    let got: Awaited<ReturnType<typeof fileInfo>>;
    try {
      got = await fileInfo(file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new IntegrityError(`backup ${dir} lacks ${expected.file}`);
      throw e;
    }
    if (got.digest !== expected.digest || got.bytes !== expected.bytes || got.count !== expected.count) {
      throw new IntegrityError(
        `${expected.file} of backup ${dir} does not match the manifest (digest ${got.digest}, ${got.count} lines; expected ${expected.digest}, ${expected.count})`,
        { dir, file: expected.file },
      );
    }
  }
}

/** A backup directory whose manifest and files verified. */
export interface VerifiedBackup {
  dir: string;
  manifest: BackupManifest;
  items(): AsyncIterable<Item>;
  objects(): AsyncIterable<BackupObject>;
}

/**
 * Opens a backup: the manifest's digest (and, when given, the digest the caller recorded for it), then
 * the digests of its files. Retention reads `objects()` of every registered backup as references.
 */
export async function openBackup(dir: string, opts: { expectedManifestDigest?: string } = {}): Promise<VerifiedBackup> {
  const abs = path.resolve(dir);
  const manifest = await readManifest(abs);
  if (opts.expectedManifestDigest !== undefined && manifest.manifest_digest !== opts.expectedManifestDigest) {
    throw new IntegrityError(
      `the backup at ${abs} has manifest digest ${manifest.manifest_digest}, not the recorded ${opts.expectedManifestDigest}`,
      { dir: abs },
    );
  }
  await verifyBackupFiles(abs, manifest);
  return {
    dir: abs,
    manifest,
    items: () => readJsonLines<Item>(path.join(abs, path.basename(manifest.items.file))),
    objects: () => readJsonLines<BackupObject>(path.join(abs, path.basename(manifest.objects.file))),
  };
}
