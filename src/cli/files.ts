import { constants as C, createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { NotFound, UsageError } from '../core/errors.ts';
import { randomToken } from '../core/ids.ts';

/** A readable for `--file PATH` (or `-` for stdin), with the filename to record. */
export async function openInputFile(file: string, filename: string | undefined): Promise<{ body: Readable; filename: string }> {
  if (file === '-') {
    if (!filename) throw new UsageError('--filename is required when reading from stdin');
    return { body: process.stdin, filename };
  }
  const stat = await fs.stat(file).catch(() => undefined);
  if (!stat) throw new NotFound(`no such file: ${file}`);
  if (!stat.isFile()) throw new UsageError(`not a regular file: ${file}`);
  return { body: createReadStream(file, { highWaterMark: 1 << 20 }), filename: filename ?? path.basename(file) };
}

/**
 * Writes a verified stream to `out` (or stdout for `-`). A file appears at `out` only when the whole
 * stream verified: bytes go to a temp file beside it that is renamed at the end, removed on failure.
 */
export async function writeVerifiedOutput(stream: Readable, out: string): Promise<void> {
  if (out === '-') {
    await pipeline(stream, process.stdout, { end: false });
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
    for await (const chunk of stream) {
      const buf = chunk as Buffer;
      let offset = 0;
      while (offset < buf.length) offset += (await fh.write(buf, offset, buf.length - offset)).bytesWritten;
    }
    await fh.sync();
    await fh.close();
    await fs.rename(tmp, target);
  } catch (e) {
    await fh.close().catch(() => {});
    await fs.unlink(tmp).catch(() => {});
    throw e;
  }
}
