/**
 * Small artifacts as JSON (issue 19 A6): `POST /v1/artifacts` and `…/versions` with
 * `Content-Type: application/json` carry `{name, filename, content, encoding: utf8|base64, …}`, so a
 * tool-calling agent needs no raw body. The document is read whole (it is bounded: JSON_BODY_LIMIT),
 * checked against its schema, and its decoded content (at most JSON_CONTENT_LIMIT bytes) goes to the
 * same service call as a raw upload, with the same digest rule: `content_hash` (or `Repr-Digest`)
 * must match the bytes, or nothing is stored. Everything larger stays a raw, streamed upload.
 */
import { Readable } from 'node:stream';
import type { Static, TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import type { FastifyRequest } from 'fastify';
import type { Digest } from '../core/digest.ts';
import { InvalidInput, TooLarge } from '../core/errors.ts';
import { JSON_BODY_LIMIT, JSON_CONTENT_LIMIT, type JsonVersionBody } from './schemas.ts';
import { clientDigest, type UploadInput } from './transfer.ts';

export function isJsonRequest(request: FastifyRequest): boolean {
  const type = request.headers['content-type'];
  return typeof type === 'string' && /^application\/json\s*(;|$)/i.test(type.trim());
}

async function readWhole(request: FastifyRequest, limit: number): Promise<Buffer> {
  const declared = Number(request.headers['content-length']);
  if (declared > limit) throw new TooLarge(`a JSON body is at most ${limit} bytes; send larger content as a raw body`, { limit });
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.raw) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new TooLarge(`a JSON body is at most ${limit} bytes; send larger content as a raw body`, { limit });
    parts.push(chunk as Buffer);
  }
  return Buffer.concat(parts);
}

const checkers = new WeakMap<TSchema, ReturnType<typeof TypeCompiler.Compile>>();

/** The request's JSON document, checked against `schema` (400 naming the first wrong field). */
export async function readJsonBody<S extends TSchema>(request: FastifyRequest, schema: S): Promise<Static<S>> {
  const text = (await readWhole(request, JSON_BODY_LIMIT)).toString('utf8');
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new InvalidInput('the body is not valid JSON');
  }
  let check = checkers.get(schema);
  if (!check) {
    check = TypeCompiler.Compile(schema);
    checkers.set(schema, check);
  }
  if (!check.Check(doc)) {
    const first = check.Errors(doc).First();
    throw new InvalidInput(`body${first?.path ? first.path.replace(/\//g, '.') : ''}: ${first?.message ?? 'invalid'}`);
  }
  return doc as Static<S>;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The decoded content of a JSON body as an upload (the digest from `content_hash` and the digest headers, which must agree). */
export function jsonUploadInput(request: FastifyRequest, body: Static<typeof JsonVersionBody>, maxBytes: number): UploadInput {
  if (body.encoding === 'base64' && !BASE64.test(body.content)) throw new InvalidInput('content is not valid base64');
  const bytes = Buffer.from(body.content, body.encoding === 'base64' ? 'base64' : 'utf8');
  const limit = Math.min(JSON_CONTENT_LIMIT, maxBytes);
  if (bytes.length > limit) throw new TooLarge(`JSON content is at most ${limit} bytes once decoded; send it as a raw body`, { limit });
  const header = clientDigest(request.headers['repr-digest'], request.headers['content-digest']);
  const given = body.content_hash as Digest | undefined;
  if (header && given && header !== given) throw new InvalidInput('content_hash and the Repr-Digest header disagree');
  return { body: Readable.from([bytes]), expectedDigest: given ?? header, maxBytes: limit, size: bytes.length, dispose: () => {} };
}
