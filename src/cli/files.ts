import { constants as C, createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { sendChunks } from '../content/direct-read.ts';
import { NotFound, UsageError } from '../core/errors.ts';
import { WritebackAhead } from '../core/fsync.ts';
import { randomToken } from '../core/ids.ts';

/** A readable for `--file PATH` (or `-` for stdin), with the filename to record and the file's size (none for stdin). */
export async function openInputFile(
  file: string,
  filename: string | undefined,
): Promise<{ body: Readable; filename: string; size?: number | undefined }> {
  const checked = await checkInputFile(file, filename);
  if (file === '-') return { body: process.stdin, filename: checked.filename };
  return { body: createReadStream(file, { highWaterMark: 1 << 20 }), ...checked };
}

/**
 * What `--file PATH` (or `-` for stdin) will be read as, checked before anything is sent or stored:
 * the filename to record and the file's size (none for stdin). The same refusals everywhere.
 */
export async function checkInputFile(file: string, filename: string | undefined): Promise<{ filename: string; size?: number | undefined }> {
  if (file === '-') {
    if (!filename) throw new UsageError('--filename is required when reading from stdin');
    return { filename };
  }
  const stat = await fs.stat(file).catch(() => undefined);
  // `--file rollback-x.sql` meant as the name to record is a common mix-up: say which flag does what.
  if (!stat)
    throw new NotFound(
      `no such file: ${file}${filename === undefined ? ' (--file reads the content from this path; --filename sets the name recorded)' : ''}`,
    );
  if (!stat.isFile()) throw new UsageError(`not a regular file: ${file}`);
  return { filename: filename ?? path.basename(file), size: stat.size };
}

/**
 * Writes a verified stream to `out` (or stdout for `-`). A file appears at `out` only when the whole
 * stream verified: bytes go to a temp file beside it that is renamed at the end, removed on failure.
 * A stream with the direct capability (content/direct-read.ts) hands its chunks straight to the writes.
 */
export async function writeVerifiedOutput(stream: Readable, out: string): Promise<void> {
  if (out === '-') {
    // A closed pipe (EPIPE) is this command's error, not an uncaught one: the write callbacks report it.
    const ignore = () => {};
    process.stdout.on('error', ignore);
    try {
      await sendChunks(
        stream,
        (chunk) => new Promise((resolve, reject) => process.stdout.write(chunk, (e) => (e ? reject(e) : resolve()))),
      );
    } finally {
      process.stdout.off('error', ignore);
    }
    return;
  }
  if (out === '') throw new UsageError('--out needs a file path (or - for stdout)');
  const target = path.resolve(out);
  // Checked before any byte is written: the temp file goes beside the target, so a directory given
  // as the target would put it in the directory's parent.
  const existing = await fs.lstat(target).catch(() => undefined);
  if (existing?.isDirectory()) throw new UsageError(`--out ${out} is a directory; give a file path`);
  const tmp = path.join(path.dirname(target), `.${path.basename(target)}.alp-partial-${randomToken(6)}`);
  const fh = await fs.open(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL, 0o644);
  try {
    // Each chunk at its own offset: the writes of consecutive chunks may overlap.
    let position = 0;
    const writeback = new WritebackAhead(() => fh.datasync());
    try {
      await sendChunks(stream, async (chunk) => {
        const at = position;
        position += chunk.length;
        let offset = 0;
        while (offset < chunk.length) offset += (await fh.write(chunk, offset, chunk.length - offset, at + offset)).bytesWritten;
        writeback.wrote(chunk.length);
      });
    } catch (e) {
      // The descriptor is closed below only once no sync of it is in flight.
      await writeback.settle().catch(() => {});
      throw e;
    }
    await writeback.settle();
    await fh.sync();
    await fh.close();
    await fs.rename(tmp, target);
  } catch (e) {
    stream.destroy();
    await fh.close().catch(() => {});
    await fs.unlink(tmp).catch(() => {});
    throw e;
  }
}

const MAX_TEXT_FILE_BYTES = 256 * 1024 * 1024;

/**
 * The text of a small file the user names (`--checkpoint FILE`): a missing file is NOT_FOUND, anything
 * but a regular file or one too large a usage error — never a raw errno. Opened without blocking, so a
 * FIFO is refused instead of waited on.
 */
export async function readUserTextFile(file: string, option: string): Promise<string> {
  if (file === '') throw new UsageError(`${option} needs a file path`);
  const fh = await fs.open(file, C.O_RDONLY | C.O_NONBLOCK).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT' || e.code === 'ENOTDIR') throw new NotFound(`${option}: no such file: ${file}`);
    throw new UsageError(`${option}: cannot open ${file} (${e.code ?? e.message})`);
  });
  try {
    const stat = await fh.stat();
    if (!stat.isFile()) throw new UsageError(`${option}: not a regular file: ${file}`);
    if (stat.size > MAX_TEXT_FILE_BYTES) throw new UsageError(`${option}: ${file} is larger than ${MAX_TEXT_FILE_BYTES} bytes`);
    return await fh.readFile('utf8');
  } finally {
    await fh.close();
  }
}

/** Writes a new file (`--out FILE`, mode 0600, never over an existing one), with usage errors for bad paths. */
export async function writeNewUserFile(file: string, option: string, text: string): Promise<void> {
  if (file === '') throw new UsageError(`${option} needs a file path`);
  await fs.writeFile(file, text, { flag: 'wx', mode: 0o600 }).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'EEXIST') throw new UsageError(`${option}: ${file} exists already; give a new file`);
    if (e.code === 'ENOENT' || e.code === 'ENOTDIR') throw new NotFound(`${option}: no such directory for ${file}`);
    throw new UsageError(`${option}: cannot write ${file} (${e.code ?? e.message})`);
  });
}
