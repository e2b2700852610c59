/**
 * The transparency log over HTTP (issue 20 item 1): its signed checkpoint (a C2SP signed note, text),
 * RFC 9162 inclusion and consistency proofs (hashes base64) and where an audit entry is in it. The
 * schemas live beside the routes, as the policy routes' do.
 */
import { Type } from '@sinclair/typebox';
import { installationLogIds } from '../../audit/tlog/chains.ts';
import { consistencyBetween, inclusionAt, locateEntry, logCheckpoint } from '../../audit/tlog/proofs.ts';
import { type AnyRouteDef, type Api, defineRoute } from '../define.ts';
import { Digest } from '../schemas.ts';

/** A chain of the log: an artifact id, or an installation log's partition (audit/tlog/chains.ts). */
const ChainId = Type.String({
  pattern: `^(?:[0-9A-HJKMNP-TV-Z]{26}|${installationLogIds().join('|')})$`,
  description: "the chain: an artifact id (ULID), or an installation log's partition (KEYS, TOKENS, WEBHOOKS, APPROVAL_POLICY)",
});

const closed = { additionalProperties: false } as const;
const B64Hash = Type.String({ pattern: '^[A-Za-z0-9+/]{43}=$', description: 'a SHA-256 hash, base64' });
// A function, not a spread of one schema: spreading a TypeBox schema copies its symbol keys into an
// object type the declaration build (tsconfig.build.json) cannot name (TS4023).
const size = (description: string) => Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description });

export const LogInclusionQuery = Type.Object(
  {
    leaf: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'leaf index' }),
    size: Type.Optional(size('tree size (default: the committed size)')),
  },
  closed,
);
export const LogInclusion = Type.Object(
  {
    leaf_index: Type.Integer({ minimum: 0 }),
    tree_size: Type.Integer({ minimum: 1 }),
    root: B64Hash,
    leaf_hash: B64Hash,
    proof: Type.Array(B64Hash),
    entry: Type.Object({ artifact_id: ChainId, seq: Type.Integer({ minimum: 1 }), hash: Digest }, closed),
  },
  { ...closed, description: 'RFC 9162 §2.1.3 inclusion proof; leaf hash = SHA-256(0x00 || the entry hash’s 32 bytes)' },
);
export const LogConsistencyQuery = Type.Object(
  {
    from: size('the older size'),
    to: Type.Optional(size('the newer size (default: the committed size)')),
  },
  closed,
);
export const LogConsistency = Type.Object(
  {
    from: Type.Integer({ minimum: 1 }),
    to: Type.Integer({ minimum: 1 }),
    from_root: B64Hash,
    to_root: B64Hash,
    proof: Type.Array(B64Hash),
  },
  { ...closed, description: 'RFC 9162 §2.1.4 consistency proof' },
);
export const LogEntryQuery = Type.Object(
  {
    artifact: ChainId,
    seq: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'the entry’s seq in its chain' }),
  },
  closed,
);
export const LogEntry = Type.Object(
  {
    artifact_id: ChainId,
    seq: Type.Integer({ minimum: 1 }),
    hash: Digest,
    leaf_index: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
    pending: Type.Boolean({ description: 'true while the entry waits for the sequencer’s next round (leaf_index null)' }),
  },
  closed,
);

export const LOG_CONTRACT = {
  logCheckpoint: { schema: {}, produces: 'text/plain; charset=utf-8' },
  logInclusion: { schema: { querystring: LogInclusionQuery, response: { 200: LogInclusion } } },
  logConsistency: { schema: { querystring: LogConsistencyQuery, response: { 200: LogConsistency } } },
  logEntry: { schema: { querystring: LogEntryQuery, response: { 200: LogEntry } } },
} as const;

export function logRoutes(api: Api): AnyRouteDef[] {
  const { ctx } = api;
  return [
    defineRoute({
      id: 'logCheckpoint',
      summary: 'The transparency log’s signed checkpoint (C2SP signed note: origin, size, root)',
      description:
        'Verify it with the verifier key of GET /v1/keys (pinned out of band). 404 NOT_FOUND (reason NO_CHECKPOINT) before the first signed round.',
      tags: ['log'],
      schema: LOG_CONTRACT.logCheckpoint.schema,
      handler: async (_req, reply) => reply.type('text/plain; charset=utf-8').send((await logCheckpoint(ctx)).checkpoint),
    }),
    defineRoute({
      id: 'logInclusion',
      summary: 'RFC 9162 inclusion proof of a leaf in the tree of a size',
      tags: ['log'],
      schema: LOG_CONTRACT.logInclusion.schema,
      handler: async (req) => inclusionAt(ctx, req.query.leaf, req.query.size),
    }),
    defineRoute({
      id: 'logConsistency',
      summary: 'RFC 9162 consistency proof between two tree sizes',
      tags: ['log'],
      schema: LOG_CONTRACT.logConsistency.schema,
      handler: async (req) => consistencyBetween(ctx, req.query.from, req.query.to),
    }),
    defineRoute({
      id: 'logEntry',
      summary: 'Where an audit entry is in the transparency log (its leaf index, or pending)',
      tags: ['log'],
      schema: LOG_CONTRACT.logEntry.schema,
      handler: async (req) => locateEntry(ctx, req.query.artifact, req.query.seq),
    }),
  ];
}
