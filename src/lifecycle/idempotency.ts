/**
 * Idempotent creates (issue 16 item 7; draft-ietf-httpapi-idempotency-key-header). A create or a new
 * version sent with an idempotency key records the key in an item written in the same audit
 * transaction as the creation: `IDEM#{principal}#{sha256(key)}` / `IDEM` (core/keys.ts), holding the
 * operation, a fingerprint of the request (its parameters and the content's digest and size), the
 * result (artifact id, version) and an expiry (`expires_at`, and `ttl` in epoch seconds for a DynamoDB
 * TTL setting). Keys are scoped per principal: two principals' same key are unrelated.
 *
 * - A retry with the same key and the same request returns the first result (the version as it stands
 *   now; `replayed: true`) and writes nothing: its body is hashed, not stored.
 * - The same key with a different request (parameters or content) is refused: CONFLICT with
 *   `details.reason` = `idempotency_key_reused` (HTTP answers it 422, as the draft says).
 * - Two requests with the same key racing: both may store their bytes, only one commit can write the
 *   key item (put if absent); the other's transaction fails and it answers the winner's result (or
 *   the refusal above). Its stored bytes stay unreferenced (reclaimable by retention), its reserved
 *   version number (addVersion) a gap, as with any create that fails after storing.
 * - A record past its expiry (IDEMPOTENCY_TTL_MS, 24 h) counts as absent and is overwritten by the
 *   next use of the key.
 * Without a key nothing changes.
 */
import { createHash } from 'node:crypto';
import { readHead } from '../audit/chain.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import { type Digest, digestHex, sha256 } from '../core/digest.ts';
import { AlpError, Conflict, IntegrityError, InvalidInput, TooLarge } from '../core/errors.ts';
import { IDEMPOTENCY_SK, idempotencyPk } from '../core/keys.ts';
import { validateFilename } from '../core/object-keys.ts';
import { cond, type Item, type TransactOp } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { addVersion, type ContentInput, type CreateArtifactInput, createArtifact } from './artifacts.ts';
import type { HeadItem, Principal, VersionItem } from './model.ts';
import { validateKind, validateLabels, validateName, validateQuorum } from './validation.ts';
import { readVersion } from './versions.ts';

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
export const IDEMPOTENCY_KEY_REUSED = 'idempotency_key_reused';
const KEY_RE = /^[\x21-\x7e]{1,255}$/;

type Operation = 'createArtifact' | 'addVersion';

export function validateIdempotencyKey(raw: unknown): string {
  if (typeof raw !== 'string' || !KEY_RE.test(raw)) {
    throw new InvalidInput('an idempotency key is 1–255 visible ASCII characters (no spaces)');
  }
  return raw;
}

function recordKey(actor: Principal, key: string) {
  return { PK: idempotencyPk(actor.id, digestHex(sha256(key))), SK: IDEMPOTENCY_SK };
}

function fingerprint(operation: Operation, params: Record<string, unknown>, content: { digest: Digest; size: number }): string {
  return digestHex(sha256(canonicalJson({ operation, params, content_hash: content.digest, size: content.size })));
}

interface Request {
  operation: Operation;
  params: Record<string, unknown>;
  input: ContentInput;
}

/** The record a creation writes in its own transaction: put if absent or expired. */
function recordOp(ctx: ServiceContext, actor: Principal, key: string, req: Request, v: VersionItem): TransactOp {
  const now = ctx.clock.now();
  const expires = new Date(now.getTime() + IDEMPOTENCY_TTL_MS);
  return {
    op: 'put',
    item: {
      ...recordKey(actor, key),
      type: 'idempotency',
      principal_id: actor.id,
      operation: req.operation,
      fingerprint: fingerprint(req.operation, req.params, { digest: v.content_hash, size: v.size }),
      result: { artifact_id: v.artifact_id, version: v.version },
      created_at: now.toISOString(),
      expires_at: expires.toISOString(),
      ttl: Math.floor(expires.getTime() / 1000),
    },
    condition: cond.or(cond.notExists(), cond.le('expires_at', now.toISOString())),
  };
}

async function liveRecord(ctx: ServiceContext, actor: Principal, key: string): Promise<Item | undefined> {
  const item = await ctx.items.get(recordKey(actor, key), { consistent: true });
  if (!item || (item.expires_at as string) <= ctx.clock.now().toISOString()) return undefined;
  return item;
}

/** Hashes a retried request's body without storing it (the size limit and client digest still hold). */
async function hashBody(input: ContentInput): Promise<{ digest: Digest; size: number }> {
  const h = createHash('sha256');
  let size = 0;
  for await (const chunk of input.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (input.maxBytes !== undefined && size > input.maxBytes) {
      throw new TooLarge(`content exceeds the limit of ${input.maxBytes} bytes`, { limit: input.maxBytes });
    }
    h.update(chunk);
  }
  const digest = `sha256:${h.digest('hex')}` as Digest;
  if (input.expectedDigest && input.expectedDigest !== digest) {
    throw new IntegrityError(`content does not match the expected digest ${input.expectedDigest} (got ${digest})`, {
      expected: input.expectedDigest,
    });
  }
  return { digest, size };
}

/** The first result of the key, if the request is the same one; else IDEMPOTENCY_KEY_REUSED. */
async function replay(
  ctx: ServiceContext,
  record: Item,
  req: Request,
  content: { digest: Digest; size: number },
): Promise<{ head: HeadItem; version: VersionItem }> {
  if (record.operation !== req.operation || record.fingerprint !== fingerprint(req.operation, req.params, content)) {
    throw new Conflict('this idempotency key was used for a different request; use a new key for a new request', {
      reason: IDEMPOTENCY_KEY_REUSED,
      operation: record.operation,
    });
  }
  const result = record.result as { artifact_id: string; version: number };
  return { head: await readHead(ctx, result.artifact_id), version: await readVersion(ctx.items, result.artifact_id, result.version) };
}

/**
 * Runs a creation once per (principal, key): a live record answers (after hashing the body), else the
 * creation commits with the record; a creation that lost the race for the key answers the winner's.
 */
async function once(
  ctx: ServiceContext,
  actor: Principal,
  key: string,
  req: Request,
  create: (extraOps: (v: VersionItem) => TransactOp[]) => Promise<{ head?: HeadItem; version: VersionItem }>,
): Promise<{ head?: HeadItem; version: VersionItem; replayed: boolean }> {
  const prior = await liveRecord(ctx, actor, key);
  if (prior) return { ...(await replay(ctx, prior, req, await hashBody(req.input))), replayed: true };
  let stored: VersionItem | undefined;
  try {
    const created = await create((v) => {
      stored = v;
      return [recordOp(ctx, actor, key, req, v)];
    });
    return { ...created, replayed: false };
  } catch (e) {
    if (!stored || !(e instanceof AlpError) || e.code !== 'CONFLICT') throw e;
    const winner = await liveRecord(ctx, actor, key);
    if (!winner) throw e;
    return { ...(await replay(ctx, winner, req, { digest: stored.content_hash, size: stored.size })), replayed: true };
  }
}

/** createArtifact, once per idempotency key (without a key: createArtifact itself). */
export async function createArtifactOnce(
  ctx: ServiceContext,
  actor: Principal,
  input: CreateArtifactInput,
  idempotencyKey?: string,
): Promise<{ head?: HeadItem; version: VersionItem; replayed: boolean }> {
  if (idempotencyKey === undefined) return { ...(await createArtifact(ctx, actor, input)), replayed: false };
  const key = validateIdempotencyKey(idempotencyKey);
  const params = {
    name: validateName(input.name),
    kind: validateKind(input.kind ?? 'file'),
    labels: validateLabels(input.labels ?? {}),
    quorum: validateQuorum(input.quorum ?? 1),
    filename: validateFilename(input.filename),
  };
  return once(ctx, actor, key, { operation: 'createArtifact', params, input }, (extraOps) =>
    createArtifact(ctx, actor, input, { extraOps }),
  );
}

/** addVersion, once per idempotency key (without a key: addVersion itself). */
export async function addVersionOnce(
  ctx: ServiceContext,
  actor: Principal,
  artifactId: string,
  input: ContentInput,
  idempotencyKey?: string,
): Promise<{ version: VersionItem; replayed: boolean }> {
  if (idempotencyKey === undefined) return { version: await addVersion(ctx, actor, artifactId, input), replayed: false };
  const key = validateIdempotencyKey(idempotencyKey);
  const params = { artifact_id: artifactId, filename: validateFilename(input.filename) };
  const r = await once(ctx, actor, key, { operation: 'addVersion', params, input }, async (extraOps) => ({
    version: await addVersion(ctx, actor, artifactId, input, { extraOps }),
  }));
  return { version: r.version, replayed: r.replayed };
}
