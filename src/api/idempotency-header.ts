/**
 * The `Idempotency-Key` request header (draft-ietf-httpapi-idempotency-key-header): a Structured
 * Field String (`Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`); a bare value without the
 * quotes is accepted too. The rule is the service's (lifecycle/idempotency.ts); a replay answers as
 * the first request did (201) with `Idempotent-Replayed: true`.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { InvalidInput } from '../core/errors.ts';
import { IDEMPOTENCY_KEY_REUSED, validateIdempotencyKey } from '../lifecycle/idempotency.ts';
import { HttpProblem } from './problem.ts';

export const IDEMPOTENCY_HEADER = 'idempotency-key';
export const REPLAYED_HEADER = 'idempotent-replayed';

export function idempotencyKeyOf(request: FastifyRequest): string | undefined {
  const raw = request.headers[IDEMPOTENCY_HEADER];
  if (raw === undefined) return undefined;
  if (Array.isArray(raw)) throw new InvalidInput('send one Idempotency-Key header');
  const v = raw.trim();
  const quoted = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/.exec(v);
  return validateIdempotencyKey(quoted ? (quoted[1] as string).replace(/\\(["\\])/g, '$1') : v);
}

export function markReplayed(reply: FastifyReply, replayed: boolean): void {
  if (replayed) reply.header(REPLAYED_HEADER, 'true');
}

/** The draft's status for a key reused with a different request: 422 (code CONFLICT, as on the CLI). */
export async function asIdempotencyProblem<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    const details = (e as { details?: Record<string, unknown> }).details;
    if (e instanceof Error && details?.reason === IDEMPOTENCY_KEY_REUSED) {
      throw new HttpProblem(422, 'CONFLICT', e.message, { details, title: 'Idempotency key reused for a different request', cause: e });
    }
    throw e;
  }
}
