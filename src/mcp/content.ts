/**
 * Content in and out of the MCP tools. In: text inline (utf8 or base64, at most MCP_MAX_INLINE_BYTES
 * once decoded), or — over stdio only, where the server runs on the agent's side — a file path,
 * streamed like `alp artifact create --file`. Out: a version's verified bytes (the same verified read
 * as `alp artifact get` and the HTTP download), at most MCP_MAX_READ_BYTES, as text when they are
 * UTF-8 or as base64.
 */
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { Body } from '../content/content-store.ts';
import { sendChunks } from '../content/direct-read.ts';
import { type Digest, parseDigest } from '../core/digest.ts';
import { InvalidInput, NotFound, TooLarge } from '../core/errors.ts';

/** Largest inline content (decoded bytes) a tool accepts: 1 MiB, the HTTP API's JSON body limit. */
export const MCP_MAX_INLINE_BYTES = 1024 * 1024;
/** Largest content get_content returns (bytes before encoding); bigger versions: the HTTP download. */
export const MCP_MAX_READ_BYTES = 1024 * 1024;
/** The longest inline string the schemas let through (base64 of MCP_MAX_INLINE_BYTES); bytes are checked after. */
export const MCP_MAX_INLINE_CHARS = Math.ceil(MCP_MAX_INLINE_BYTES / 3) * 4;

export type InlineEncoding = 'utf8' | 'base64';

export interface ContentArgs {
  content?: string | undefined;
  encoding?: InlineEncoding | undefined;
  path?: string | undefined;
  digest?: string | undefined;
}

export interface ContentBody {
  body: Body;
  size: number;
  /** The name of the file given by path (the default filename). */
  basename?: string;
  expectedDigest?: Digest;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The decoded bytes of inline content, refused past `maxBytes` or when base64 is malformed. */
export function decodeInline(content: string, encoding: InlineEncoding, maxBytes = MCP_MAX_INLINE_BYTES): Buffer {
  if (encoding === 'base64' && !BASE64.test(content)) {
    throw new InvalidInput('content is not valid base64 (RFC 4648, with padding, no line breaks)');
  }
  const bytes = Buffer.from(content, encoding);
  if (bytes.length > maxBytes) {
    throw new TooLarge(
      `inline content is ${bytes.length} bytes; at most ${maxBytes} bytes inline (larger files: path over stdio, or the HTTP upload)`,
      {
        size: bytes.length,
        limit: maxBytes,
      },
    );
  }
  return bytes;
}

/**
 * The body a tool stores: exactly one of `content` and `path` (path only when the transport allows
 * it: the server reads the file from its own filesystem).
 */
export async function contentBody(args: ContentArgs, allowPaths: boolean): Promise<ContentBody> {
  const expected = args.digest === undefined ? {} : { expectedDigest: parseDigest(args.digest) };
  if ((args.content === undefined) === (args.path === undefined)) {
    throw new InvalidInput(allowPaths ? 'give exactly one of content and path' : 'content is required (inline, utf8 or base64)');
  }
  if (args.path !== undefined) {
    if (!allowPaths) throw new InvalidInput('path is accepted over stdio only; send the content inline');
    return { ...(await openFile(args.path)), ...expected };
  }
  const bytes = decodeInline(args.content as string, args.encoding ?? 'utf8');
  return { body: [bytes], size: bytes.length, ...expected };
}

/** Runs `store` on the body; a file stream the store did not read to its end is closed either way. */
export async function storing<T>(c: ContentBody, store: (c: ContentBody) => Promise<T>): Promise<T> {
  try {
    return await store(c);
  } finally {
    if (c.body instanceof Readable) c.body.destroy();
  }
}

/** The filename to record: the one given, else the file name of `path`. */
export function filenameOf(given: string | undefined, c: ContentBody): string {
  const name = given ?? c.basename;
  if (name === undefined) throw new InvalidInput('filename is required with inline content');
  return name;
}

async function openFile(file: string): Promise<{ body: Readable; size: number; basename: string }> {
  const resolved = path.resolve(file);
  const stat = await fs.stat(resolved).catch(() => undefined);
  if (!stat) throw new NotFound(`no such file: ${file}`);
  if (!stat.isFile()) throw new InvalidInput(`not a regular file: ${file}`);
  return { body: createReadStream(resolved, { highWaterMark: 1 << 20 }), size: stat.size, basename: path.basename(resolved) };
}

export type ReadEncoding = 'auto' | 'utf8' | 'base64';

/**
 * Reads a verified stream whole (its size is known and bounded by the caller) and encodes it: `auto`
 * gives text when the bytes are valid UTF-8, else base64. A mismatch fails the read (IntegrityError)
 * before anything is returned.
 */
export async function readVerified(stream: Readable, wanted: ReadEncoding): Promise<{ encoding: InlineEncoding; content: string }> {
  const chunks: Buffer[] = [];
  // Direct reads reuse a chunk's memory once the write settled: keep a copy.
  await sendChunks(stream, async (chunk, reused) => {
    chunks.push(reused ? Buffer.from(chunk) : chunk);
  });
  const bytes = Buffer.concat(chunks);
  if (wanted === 'base64') return { encoding: 'base64', content: bytes.toString('base64') };
  const text = utf8Text(bytes);
  if (text !== undefined) return { encoding: 'utf8', content: text };
  if (wanted === 'utf8') throw new InvalidInput('the content is not valid UTF-8; ask for encoding base64 (or auto)');
  return { encoding: 'base64', content: bytes.toString('base64') };
}

function utf8Text(bytes: Buffer): string | undefined {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** Refuses a read past `maxBytes` before any byte is opened. */
export function assertReadSize(size: number, maxBytes: number, where: string): void {
  if (size > maxBytes) {
    throw new TooLarge(`the content is ${size} bytes; get_content returns at most ${maxBytes} bytes (download it: GET ${where})`, {
      size,
      limit: maxBytes,
    });
  }
}
