/**
 * JSON Schemas (TypeBox) of every path parameter, query, body and JSON response. Bodies are checked
 * strictly (no coercion, no unknown properties); path and query strings are converted to the declared
 * types first. `/openapi.json` is generated from these.
 */
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { ERROR_CODES } from '../core/errors.ts';
import { PRINCIPAL_KINDS, SIGNAL_NAME_PATTERN } from '../lifecycle/model.ts';
import { VERSION_STATES } from '../lifecycle/state-machine.ts';

const ULID = '^[0-9A-HJKMNP-TV-Z]{26}$';
export const DIGEST = '^sha256:[0-9a-f]{64}$';

const open = { additionalProperties: true } as const;
const closed = { additionalProperties: false } as const;

export const ArtifactId = Type.String({ pattern: ULID, description: 'artifact id (ULID)' });
export const RunId = Type.String({ pattern: ULID, description: 'run id (ULID)' });
export const VersionNumber = Type.Integer({ minimum: 1, maximum: 9_999_999_999, description: 'version number' });
export const Digest = Type.String({ pattern: DIGEST, description: 'sha256:{64 hex}' });
export const Timestamp = Type.String({ description: 'ISO-8601 UTC time' });
export const StateName = Type.Union(
  VERSION_STATES.map((s) => Type.Literal(s)),
  { description: 'version state' },
);
export const OutputName = Type.Union([Type.Literal('output.json'), Type.Literal('stdout.log'), Type.Literal('stderr.log')], {
  description: 'execution output',
});

export const PrincipalSchema = Type.Object(
  { id: Type.String(), kind: Type.Union(PRINCIPAL_KINDS.map((k) => Type.Literal(k))) },
  { ...open, description: 'who acted' },
);

// ---- path parameters

export const IdParams = Type.Object({ id: ArtifactId }, closed);
export const VersionParams = Type.Object({ id: ArtifactId, v: VersionNumber }, closed);
export const RunParams = Type.Object({ run: RunId }, closed);
export const OutputParams = Type.Object({ run: RunId, output: OutputName }, closed);

// ---- queries

const Cursor = Type.String({ maxLength: 4096, description: 'opaque cursor from the previous page' });
const Limit = Type.Integer({ minimum: 1, maximum: 1000, default: 50, description: 'page size' });
const Filename = Type.String({ minLength: 1, maxLength: 1024, description: 'filename to record (1–255 bytes of UTF-8)' });

export const ListQuery = Type.Object(
  {
    state: Type.Optional(Type.String({ maxLength: 32, description: 'only versions in this state' })),
    name: Type.Optional(Type.String({ maxLength: 1024, description: 'artifacts with exactly this name' })),
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
  },
  closed,
);
export const CreateQuery = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 1024, description: 'artifact name' }),
    filename: Filename,
    kind: Type.Optional(Type.String({ maxLength: 200, description: 'kind, e.g. script, config, migration, report (default file)' })),
    label: Type.Optional(
      Type.Array(Type.String({ maxLength: 2048 }), { maxItems: 64, description: 'labels, each key=value (repeatable)' }),
    ),
    quorum: Type.Optional(Type.Integer({ minimum: 1, maximum: 10, description: 'distinct human approvals needed (default 1)' })),
  },
  closed,
);
export const FilenameQuery = Type.Object({ filename: Filename }, closed);
export const CompensationQuery = Type.Object(
  { filename: Filename, reason: Type.Optional(Type.String({ maxLength: 1000, description: 'why' })) },
  closed,
);
export const ProvenanceQuery = Type.Object(
  { format: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('in-toto')], { default: 'json' })) },
  closed,
);
export const DateQuery = Type.Object(
  { date: Type.String({ maxLength: 10, description: 'YYYY-MM-DD' }), limit: Type.Optional(Limit), cursor: Type.Optional(Cursor) },
  closed,
);
export const ApproverQuery = Type.Object(
  { approver: Type.String({ maxLength: 128, description: 'principal id' }), limit: Type.Optional(Limit), cursor: Type.Optional(Cursor) },
  closed,
);
export const StateQuery = Type.Object(
  {
    state: Type.String({ maxLength: 32, description: 'state of the compensation artifact' }),
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
  },
  closed,
);

// ---- upload headers (documented; parsed by transfer.ts)

export const UploadHeaders = Type.Object(
  {
    'repr-digest': Type.Optional(Type.String({ description: 'RFC 9530, e.g. sha-256=:base64:; a mismatch stores nothing (400)' })),
    'content-digest': Type.Optional(Type.String({ description: 'RFC 9530; same as Repr-Digest (no content codings are accepted)' })),
  },
  open,
);
/** Create and version: the upload headers and `Idempotency-Key` (lifecycle/idempotency.ts). */
export const CreateHeaders = Type.Object(
  {
    ...UploadHeaders.properties,
    'idempotency-key': Type.Optional(
      Type.String({
        maxLength: 300,
        description:
          'draft-ietf-httpapi-idempotency-key-header, e.g. "8e03978e-…" (1–255 visible ASCII characters): a retry with the same key and request answers the first result (201, Idempotent-Replayed: true) and writes nothing; the same key with a different request is refused (422, code CONFLICT, details.reason idempotency_key_reused). Scoped to the caller, kept 24 h.',
      }),
    ),
  },
  open,
);

// ---- bodies

export const TransitionBody = Type.Object(
  {
    to: Type.String({ minLength: 1, maxLength: 32, description: 'target state: PROPOSED (propose) or DRAFT (withdraw)' }),
    reason: Type.Optional(Type.String({ maxLength: 1000 })),
  },
  closed,
);
export const DecisionBody = Type.Object(
  {
    decision: Type.Union([Type.Literal('APPROVE'), Type.Literal('REJECT')]),
    evidence_ref: Type.String({ minLength: 1, maxLength: 2000, description: 'ticket, review, test run' }),
    expires_at: Type.Optional(Type.String({ maxLength: 64, description: 'ISO-8601 expiry (at most 365 days ahead)' })),
    expires_in: Type.Optional(Type.String({ maxLength: 32, description: 'lifetime, e.g. 7d, 12h (default 7d)' })),
    content_hash: Type.Optional(Type.String({ maxLength: 80, description: 'the digest you reviewed (default: the version’s)' })),
    comment: Type.Optional(Type.String({ maxLength: 4000 })),
  },
  closed,
);
export const FinishBody = Type.Object(
  {
    status: Type.Union([Type.Literal('SUCCEEDED'), Type.Literal('FAILED')]),
    exit_code: Type.Integer({ minimum: -2147483648, maximum: 2147483647 }),
    signal: Type.Optional(Type.String({ pattern: SIGNAL_NAME_PATTERN, description: 'the signal that ended the command (status FAILED)' })),
  },
  closed,
);
const DigestList = Type.Array(Type.String({ maxLength: 80 }), { maxItems: 256 });
export const ProvenanceBody = Type.Object(
  {
    action: Type.String({ minLength: 1, maxLength: 200 }),
    actor: Type.Optional(Type.String({ maxLength: 200, description: 'who performed the step (default: the caller)' })),
    inputs: Type.Optional(DigestList),
    outputs: Type.Optional(DigestList),
    tool: Type.Optional(Type.String({ maxLength: 200 })),
    model: Type.Optional(Type.String({ maxLength: 200 })),
    note: Type.Optional(Type.String({ maxLength: 4000 })),
  },
  closed,
);

// ---- responses

const VersionDef = Type.Object(
  {
    artifact_id: Type.String(),
    version: Type.Integer(),
    name: Type.String(),
    kind: Type.String(),
    state: Type.String(),
    filename: Type.String(),
    content_hash: Type.String(),
    size: Type.Integer(),
    content_key: Type.Optional(Type.String()),
    metadata_key: Type.Optional(Type.String()),
    metadata_hash: Type.Optional(Type.String()),
    created_at: Type.String(),
    created_by: PrincipalSchema,
    state_changed_at: Type.Optional(Type.String()),
    compensating_from: Type.Optional(Type.String()),
    archive_key: Type.Optional(Type.String()),
  },
  { ...open, $id: 'Version', description: 'an artifact version' },
);
/** Responses reference shared schemas by $ref only (an inline copy of a schema with an $id breaks later refs). */
export const VersionSchema = Type.Unsafe<Static<typeof VersionDef>>(Type.Ref('Version'));
const VersionRef = VersionSchema;

const HeadDef = Type.Object(
  {
    artifact_id: Type.String(),
    name: Type.String(),
    kind: Type.String(),
    labels: Type.Record(Type.String(), Type.String()),
    quorum: Type.Integer(),
    latest_version: Type.Integer(),
    created_at: Type.String(),
    created_by: PrincipalSchema,
    audit_seq: Type.Integer(),
    audit_head_hash: Type.Union([Type.String(), Type.Null()]),
    compensates: Type.Optional(Type.Object({ artifact_id: Type.String(), version: Type.Integer() }, open)),
    archived: Type.Optional(Type.Object({}, open)),
  },
  { ...open, $id: 'Artifact', description: 'an artifact (its HEAD)' },
);
const HeadRef = Type.Unsafe<Static<typeof HeadDef>>(Type.Ref('Artifact'));

export const ArtifactWithVersions = Type.Object({ ...HeadDef.properties, versions: Type.Array(VersionRef) }, open);
export const Page = Type.Object(
  { items: Type.Array(Type.Object({}, open)), cursor: Type.Optional(Type.String({ description: 'pass back to get the next page' })) },
  open,
);
export const VersionList = Type.Object({ artifact_id: Type.String(), versions: Type.Array(VersionRef) }, open);
const Entry = Type.Object({ type: Type.String(), seq: Type.Optional(Type.Integer()), timestamp: Type.Optional(Type.String()) }, open);
export const History = Type.Object({ artifact_id: Type.String(), entries: Type.Array(Entry) }, open);
export const ApprovalList = Type.Object({ artifact_id: Type.String(), approvals: Type.Array(Entry) }, open);
export const DecisionResult = Type.Object({ approval: Entry, version: VersionRef }, open);
const OutputDef = Type.Object({ key: Type.String(), digest: Type.String(), size: Type.Integer() }, { ...open, $id: 'OutputRecord' });
const OutputRef = Type.Unsafe<Static<typeof OutputDef>>(Type.Ref('OutputRecord'));
export const OutputRecord = OutputRef;
const ExecutionDef = Type.Object(
  {
    run_id: Type.String(),
    artifact_id: Type.String(),
    version: Type.Integer(),
    status: Type.String(),
    started_at: Type.Optional(Type.String()),
    started_by: PrincipalSchema,
    content_hash: Type.String(),
    outputs: Type.Record(Type.String(), OutputRef),
    exit_code: Type.Optional(Type.Integer()),
    signal: Type.Optional(Type.String()),
    finished_at: Type.Optional(Type.String()),
    uploads_in_progress: Type.Optional(Type.Array(Type.String())),
  },
  { ...open, $id: 'Execution', description: 'an execution (run)' },
);
const ExecutionRef = Type.Unsafe<Static<typeof ExecutionDef>>(Type.Ref('Execution'));
export const ExecutionList = Type.Object({ artifact_id: Type.String(), executions: Type.Array(ExecutionRef) }, open);
export const ExecutionResult = ExecutionRef;
export const CompensationResult = Type.Object({ compensation: HeadRef, version: VersionRef, compensated: VersionRef }, open);
export const ProvenanceResult = Type.Object(
  {},
  { ...open, description: '{artifact_id, steps} or, with format=in-toto, an in-toto Statement v1 (SLSA Provenance v1)' },
);
export const ProvenanceStep = Type.Object(
  {
    step: Type.Integer(),
    action: Type.String(),
    actor: Type.String({ description: 'who performed the step, as the recorder states it' }),
    recorded_by: Type.Object(
      { id: Type.String(), kind: Type.String() },
      { ...open, description: 'the authenticated principal that recorded the step' },
    ),
    actor_claimed: Type.Boolean({ description: 'true when `actor` differs from `recorded_by`: the actor is only claimed' }),
  },
  open,
);
export const ArchiveResult = Type.Object(
  {
    archived: Type.Array(
      Type.Object({ original_key: Type.String(), archive_key: Type.String(), digest: Type.String(), size: Type.Integer() }, open),
    ),
  },
  open,
);
export const Verification = Type.Object(
  {
    artifact_id: Type.String(),
    ok: Type.Boolean(),
    content: Type.Object(
      {
        objects: Type.Integer(),
        bytes: Type.Integer(),
        ok: Type.Integer(),
        findings: Type.Array(Type.Object({}, open)),
        stale: Type.Array(Type.Object({}, open), {
          description: 'derived documents (provenance) that are what the committed items derive but not the recorded digest: not failures',
        }),
      },
      open,
    ),
    audit: Type.Object({ entries: Type.Integer(), ok: Type.Boolean(), findings: Type.Array(Type.Object({}, open)) }, open),
  },
  open,
);
export const WhoAmI = Type.Object({ principal: PrincipalSchema }, open);
export const Health = Type.Object({ status: Type.String() }, open);
export const Ready = Type.Object(
  { status: Type.String(), installation_id: Type.String(), metadata: Type.String(), content: Type.String() },
  open,
);

const ProblemDef = Type.Object(
  {
    type: Type.String({ description: 'urn:alp:problem:{code}' }),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    instance: Type.String({ description: 'the request path' }),
    code: Type.Union(
      ERROR_CODES.map((c) => Type.Literal(c)),
      { description: 'stable error code, the same the CLI prints' },
    ),
    request_id: Type.String(),
    details: Type.Optional(Type.Object({}, open)),
  },
  { ...open, $id: 'Problem', description: 'RFC 9457 problem details' },
);

/** Shared schemas registered with fastify.addSchema (components.schemas in the OpenAPI document). */
export const SHARED_SCHEMAS: TSchema[] = [VersionDef, HeadDef, OutputDef, ExecutionDef, ProblemDef];
