/**
 * JSON Schemas (TypeBox) of every path parameter, query, body and JSON response. Bodies are checked
 * strictly (no coercion, no unknown properties); path and query strings are converted to the declared
 * types first. `/openapi.json` is generated from these, and the typed client (src/client/) takes its
 * types from them through the route contract (contract.ts). Responses are as tight as their shape is
 * known: enums for states and statuses, digest patterns, `date-time` formats, non-negative sizes, closed
 * objects; audit entries stay open (each entry type carries its own fields) with their common fields
 * typed. Browser-safe: nothing here imports Node.
 */
import { FormatRegistry, type Static, type TSchema, Type } from '@sinclair/typebox';
import { ERROR_CODES } from '../core/errors.ts';
import { ALIAS_NAME_PATTERN, ALIAS_REF_PATTERN, PRINCIPAL_KINDS, SIGNAL_NAME_PATTERN } from '../lifecycle/model.ts';
import { VERSION_STATES } from '../lifecycle/states.ts';

const ULID = '^[0-9A-HJKMNP-TV-Z]{26}$';
export const DIGEST = '^sha256:[0-9a-f]{64}$';
/** RFC 3339 date-time (what `Date.toISOString()` writes, and any offset form). */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

// TypeBox refuses a format it does not know; `date-time` is declared once here for every checker that
// uses these schemas (fastify's serializer and ajv know it themselves).
if (!FormatRegistry.Has('date-time')) {
  FormatRegistry.Set('date-time', (v) => DATE_TIME.test(v) && !Number.isNaN(Date.parse(v)));
}

const open = { additionalProperties: true } as const;
const closed = { additionalProperties: false } as const;

export const ArtifactId = Type.String({ pattern: ULID, description: 'artifact id (ULID)' });
export const RunId = Type.String({ pattern: ULID, description: 'run id (ULID)' });
export const VersionNumber = Type.Integer({ minimum: 1, maximum: 9_999_999_999, description: 'version number' });
export const Digest = Type.String({ pattern: DIGEST, description: 'sha256:{64 hex}' });
export const Timestamp = Type.String({ format: 'date-time', description: 'RFC 3339 / ISO-8601 UTC time' });
const Count = Type.Integer({ minimum: 0 });
export const StateName = Type.Union(
  VERSION_STATES.map((s) => Type.Literal(s)),
  { description: 'version state' },
);
export const OutputName = Type.Union([Type.Literal('output.json'), Type.Literal('stdout.log'), Type.Literal('stderr.log')], {
  description: 'execution output',
});

export const PrincipalKindSchema = Type.Union(
  PRINCIPAL_KINDS.map((k) => Type.Literal(k)),
  { description: 'human, agent or service' },
);
export const PrincipalSchema = Type.Object(
  { id: Type.String({ minLength: 1, maxLength: 256 }), kind: PrincipalKindSchema },
  { ...closed, description: 'who acted' },
);

// ---- path parameters

export const IdParams = Type.Object({ id: ArtifactId }, closed);
export const AliasName = Type.String({ pattern: ALIAS_NAME_PATTERN, description: 'alias name (lowercase; without @)' });
// In paths the alias's own rule is the service's (lifecycle/aliases.ts), which answers a near miss
// (`@Prod`) with the name meant; the schema only bounds the text.
const AliasNameParam = Type.String({ minLength: 1, maxLength: 64, description: `alias name, ${ALIAS_NAME_PATTERN} (without @)` });
/** A version in a path: its number, or `@` and one of the artifact's aliases (`@prod`). */
export const VersionRefParam = Type.Union(
  [VersionNumber, Type.String({ pattern: '^@', maxLength: 65, description: `@alias, the alias ${ALIAS_REF_PATTERN}` })],
  { description: 'version number, or @alias' },
);
export const VersionParams = Type.Object({ id: ArtifactId, v: VersionRefParam }, closed);
export const AliasParams = Type.Object({ id: ArtifactId, name: AliasNameParam }, closed);
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
const ArtifactName = Type.String({ minLength: 1, maxLength: 1024, description: 'artifact name' });
const RAW_ONLY = ' (required with a raw body; a JSON body carries it itself)';
export const CreateQuery = Type.Object(
  {
    name: Type.Optional(Type.String({ ...ArtifactName, description: `artifact name${RAW_ONLY}` })),
    filename: Type.Optional(Type.String({ ...Filename, description: `filename to record${RAW_ONLY}` })),
    kind: Type.Optional(Type.String({ maxLength: 200, description: 'kind, e.g. script, config, migration, report (default file)' })),
    label: Type.Optional(
      Type.Array(Type.String({ maxLength: 2048 }), { maxItems: 64, description: 'labels, each key=value (repeatable)' }),
    ),
    quorum: Type.Optional(Type.Integer({ minimum: 1, maximum: 10, description: 'distinct human approvals needed (default 1)' })),
  },
  closed,
);
export const SearchQuery = Type.Object(
  {
    name_prefix: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'artifacts whose name starts with this' })),
    label: Type.Optional(
      Type.Array(Type.String({ maxLength: 2048 }), { maxItems: 32, description: 'key=value; repeatable, every one must match' }),
    ),
    state: Type.Optional(Type.String({ maxLength: 32, description: 'versions in this state (one hit per version)' })),
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
  },
  closed,
);
export const FilenameQuery = Type.Object(
  { filename: Type.Optional(Type.String({ ...Filename, description: `filename to record${RAW_ONLY}` })) },
  closed,
);
export const CompensationQuery = Type.Object(
  { filename: Filename, reason: Type.Optional(Type.String({ maxLength: 1000, description: 'why' })) },
  closed,
);
export const ProvenanceQuery = Type.Object(
  {
    format: Type.Optional(
      Type.Union([Type.Literal('json'), Type.Literal('in-toto'), Type.Literal('dsse')], {
        default: 'json',
        description: 'json: the steps; in-toto: the SLSA statement; dsse: that statement in a DSSE envelope signed by the installation key',
      }),
    ),
  },
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

/** Decoded bytes a JSON body may carry (`content`); anything larger is a raw, streamed upload. */
export const JSON_CONTENT_LIMIT = 1024 * 1024;
/** The JSON document itself: base64 of the limit, plus the other fields. */
export const JSON_BODY_LIMIT = Math.ceil(JSON_CONTENT_LIMIT / 3) * 4 + 64 * 1024;
const jsonContentFields = {
  filename: Filename,
  content: Type.String({
    maxLength: Math.ceil(JSON_CONTENT_LIMIT / 3) * 4,
    description: `the bytes, at most ${JSON_CONTENT_LIMIT} once decoded`,
  }),
  encoding: Type.Optional(
    Type.Union([Type.Literal('utf8'), Type.Literal('base64')], { description: 'how `content` is written (default utf8)' }),
  ),
  content_hash: Type.Optional(
    Type.String({ pattern: DIGEST, description: 'sha256 of the decoded bytes: a mismatch stores nothing (400, code INTEGRITY)' }),
  ),
};
/** `POST /v1/artifacts` with `Content-Type: application/json`: a small artifact in one document. */
export const JsonCreateBody = Type.Object(
  {
    name: ArtifactName,
    ...jsonContentFields,
    kind: Type.Optional(Type.String({ maxLength: 200 })),
    labels: Type.Optional(Type.Record(Type.String({ maxLength: 1024 }), Type.String({ maxLength: 1024 }))),
    quorum: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 })),
  },
  { ...closed, description: 'a small artifact as JSON (raw bodies stream; this form is for tool-calling agents)' },
);
/** `POST /v1/artifacts/{id}/versions` with `Content-Type: application/json`. */
export const JsonVersionBody = Type.Object(jsonContentFields, { ...closed, description: 'a small version as JSON' });

export const AliasBody = Type.Object(
  {
    version: Type.Union([VersionNumber, Type.String({ pattern: '^@', maxLength: 65 })], {
      description: 'the version (APPROVED or EXECUTED), or another alias',
    }),
    reason: Type.Optional(Type.String({ maxLength: 1000 })),
  },
  closed,
);
export const AliasRemoveQuery = Type.Object({ reason: Type.Optional(Type.String({ maxLength: 1000, description: 'why' })) }, closed);

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

const ContentKey = Type.String({ minLength: 1, maxLength: 2048, description: 'object key in the content store' });
const PositiveInt = Type.Integer({ minimum: 1 });

const VersionDef = Type.Object(
  {
    artifact_id: ArtifactId,
    version: VersionNumber,
    name: Type.String(),
    kind: Type.String(),
    state: StateName,
    filename: Type.String(),
    content_hash: Digest,
    size: Count,
    content_key: Type.Optional(ContentKey),
    metadata_key: Type.Optional(ContentKey),
    metadata_hash: Type.Optional(Digest),
    created_at: Timestamp,
    created_by: PrincipalSchema,
    state_changed_at: Type.Optional(Timestamp),
    compensating_from: Type.Optional(StateName),
    archive_key: Type.Optional(ContentKey),
  },
  { ...closed, $id: 'Version', description: 'an artifact version' },
);
/** Responses reference shared schemas by $ref only (an inline copy of a schema with an $id breaks later refs). */
export const VersionSchema = Type.Unsafe<Static<typeof VersionDef>>(Type.Ref('Version'));
const VersionRef = VersionSchema;

const ArchivedObjectSchema = Type.Object(
  { original_key: ContentKey, archive_key: ContentKey, digest: Digest, size: Count },
  { ...closed, description: 'an object copied (and verified) under archive/' },
);

const AliasRecordSchema = Type.Object(
  {
    version: VersionNumber,
    content_hash: Digest,
    set_by: PrincipalSchema,
    seq: Type.Integer({ minimum: 1, description: 'the audit entry that set it' }),
  },
  { ...closed, description: 'where an alias points, and who set it' },
);

const HeadDef = Type.Object(
  {
    artifact_id: ArtifactId,
    name: Type.String(),
    kind: Type.String(),
    labels: Type.Record(Type.String(), Type.String()),
    quorum: PositiveInt,
    latest_version: Count,
    created_at: Timestamp,
    created_by: PrincipalSchema,
    audit_seq: Count,
    audit_head_hash: Type.Union([Digest, Type.Null()]),
    compensates: Type.Optional(Type.Object({ artifact_id: ArtifactId, version: VersionNumber }, closed)),
    aliases: Type.Optional(
      Type.Record(Type.String({ pattern: ALIAS_NAME_PATTERN }), AliasRecordSchema, { description: 'the artifact’s aliases by name' }),
    ),
    // The HEAD's archive mark (lifecycle/archive.ts ArchiveMark): `objects` lists at most a few, `object_count` all of them.
    archived: Type.Optional(
      Type.Object(
        {
          at: Timestamp,
          status: Type.Optional(Type.Union([Type.Literal('ARCHIVING'), Type.Literal('ARCHIVED')])),
          objects: Type.Array(ArchivedObjectSchema),
          object_count: Type.Optional(Count),
        },
        closed,
      ),
    ),
  },
  { ...closed, $id: 'Artifact', description: 'an artifact (its HEAD)' },
);
const HeadRef = Type.Unsafe<Static<typeof HeadDef>>(Type.Ref('Artifact'));
export const ArtifactSchema = HeadRef;

const NextCursor = Type.Optional(Type.String({ minLength: 1, description: 'pass back to get the next page' }));
export const ArtifactWithVersions = Type.Object({ ...HeadDef.properties, versions: Type.Array(VersionRef) }, closed);
/** `GET /v1/artifacts`: versions (by state), or artifacts (by name). */
export const ArtifactPage = Type.Object({ items: Type.Array(Type.Union([VersionRef, HeadRef])), cursor: NextCursor }, closed);
export const VersionList = Type.Object({ artifact_id: ArtifactId, versions: Type.Array(VersionRef) }, closed);

const AliasViewSchema = Type.Object(
  { name: AliasName, ...AliasRecordSchema.properties, state: Type.Union([StateName, Type.Literal('unknown')]) },
  { ...closed, description: 'an alias, with its version’s current state' },
);
export const AliasList = Type.Object({ artifact_id: ArtifactId, aliases: Type.Array(AliasViewSchema) }, closed);
export const AliasChangeResult = Type.Object(
  { alias: Type.Union([AliasViewSchema, Type.Null()]), changed: Type.Boolean({ description: 'false when it already pointed there' }) },
  closed,
);
export const AliasRemoveResult = Type.Object(
  { removed: Type.Object({ name: AliasName, ...AliasRecordSchema.properties }, closed) },
  closed,
);
const SearchHitSchema = Type.Object(
  {
    artifact_id: ArtifactId,
    name: Type.String(),
    kind: Type.String(),
    created_at: Timestamp,
    labels: Type.Optional(Type.Record(Type.String(), Type.String())),
    version: Type.Optional(VersionNumber),
    state: Type.Optional(StateName),
  },
  { ...closed, description: 'an artifact, or (with state) one of its versions in that state' },
);
export const SearchPage = Type.Object(
  {
    items: Type.Array(SearchHitSchema),
    cursor: NextCursor,
    scanned: Type.Integer({ minimum: 0, description: 'index items read for this page (at most 1000)' }),
  },
  closed,
);

/** What every audit entry has; the rest depends on its type (docs/audit-format.md). */
const entryFields = {
  type: Type.String({
    minLength: 1,
    description: 'transition, approval, execution, execution_output, execution_finish, provenance, compensation, alias',
  }),
  seq: Type.Integer({ minimum: 1 }),
  timestamp: Timestamp,
  hash: Type.Optional(Digest),
};
const Entry = Type.Object(entryFields, { ...open, description: 'an audit entry' });
export const History = Type.Object({ artifact_id: ArtifactId, entries: Type.Array(Entry) }, closed);
/** A query page's items: audit entries (and runs) with the artifact they belong to. */
export const QueryPage = Type.Object({ items: Type.Array(Type.Object({ artifact_id: ArtifactId }, open)), cursor: NextCursor }, closed);
/** @deprecated the list routes now have their own page types (ArtifactPage, QueryPage). */
export const Page = Type.Object({ items: Type.Array(Type.Object({}, open)), cursor: NextCursor }, closed);

const Approval = Type.Object(
  {
    ...entryFields,
    type: Type.Literal('approval'),
    version: VersionNumber,
    decision: Type.Union([Type.Literal('APPROVE'), Type.Literal('REJECT')]),
    actor: PrincipalSchema,
    evidence_ref: Type.String(),
    content_hash: Digest,
    expires_at: Timestamp,
    round: Count,
    counted: Type.Boolean(),
    not_counted_reason: Type.Optional(Type.String()),
    comment: Type.Optional(Type.String()),
  },
  { ...open, description: 'an approval or rejection (an audit entry)' },
);
export const ApprovalList = Type.Object({ artifact_id: ArtifactId, approvals: Type.Array(Approval) }, closed);
export const DecisionResult = Type.Object({ approval: Approval, version: VersionRef }, closed);

const OutputDef = Type.Object({ key: ContentKey, digest: Digest, size: Count }, { ...closed, $id: 'OutputRecord' });
const OutputRef = Type.Unsafe<Static<typeof OutputDef>>(Type.Ref('OutputRecord'));
export const OutputRecord = OutputRef;
const ExecutionDef = Type.Object(
  {
    run_id: RunId,
    artifact_id: ArtifactId,
    version: VersionNumber,
    status: Type.Union([Type.Literal('RUNNING'), Type.Literal('SUCCEEDED'), Type.Literal('FAILED')]),
    started_at: Type.Optional(Timestamp),
    started_by: PrincipalSchema,
    content_hash: Digest,
    outputs: Type.Object(
      { 'output.json': Type.Optional(OutputRef), 'stdout.log': Type.Optional(OutputRef), 'stderr.log': Type.Optional(OutputRef) },
      closed,
    ),
    exit_code: Type.Optional(Type.Integer()),
    signal: Type.Optional(Type.String({ pattern: SIGNAL_NAME_PATTERN })),
    finished_at: Type.Optional(Timestamp),
    uploads_in_progress: Type.Optional(Type.Array(OutputName)),
  },
  { ...closed, $id: 'Execution', description: 'an execution (run)' },
);
const ExecutionRef = Type.Unsafe<Static<typeof ExecutionDef>>(Type.Ref('Execution'));
export const ExecutionList = Type.Object({ artifact_id: ArtifactId, executions: Type.Array(ExecutionRef) }, closed);
export const ExecutionResult = ExecutionRef;
export const CompensationResult = Type.Object({ compensation: HeadRef, version: VersionRef, compensated: VersionRef }, closed);

export const ProvenanceStep = Type.Object(
  {
    ...entryFields,
    type: Type.Literal('provenance'),
    step: Type.Integer({ minimum: 1 }),
    action: Type.String(),
    actor: Type.String({ description: 'who performed the step, as the recorder states it' }),
    recorded_by: Type.Object(
      { id: Type.String(), kind: PrincipalKindSchema },
      { ...open, description: 'the authenticated principal that recorded the step' },
    ),
    actor_claimed: Type.Boolean({ description: 'true when `actor` differs from `recorded_by`: the actor is only claimed' }),
    inputs: Type.Array(Digest),
    outputs: Type.Array(Digest),
    tool: Type.Optional(Type.String()),
    model: Type.Optional(Type.String()),
    note: Type.Optional(Type.String()),
  },
  { ...open, description: 'a provenance step (hash-chained)' },
);
export const ProvenanceChain = Type.Object({ artifact_id: ArtifactId, steps: Type.Array(ProvenanceStep) }, closed);
const DigestSet = Type.Object({ sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }) }, closed);
const ResourceDescriptor = Type.Object({ uri: Type.String(), digest: DigestSet }, open);
export const InTotoStatement = Type.Object(
  {
    _type: Type.Literal('https://in-toto.io/Statement/v1'),
    subject: Type.Array(Type.Object({ name: Type.String(), digest: DigestSet, annotations: Type.Optional(Type.Object({}, open)) }, open)),
    predicateType: Type.Literal('https://slsa.dev/provenance/v1'),
    predicate: Type.Object(
      {
        buildDefinition: Type.Object(
          {
            buildType: Type.String(),
            externalParameters: Type.Object({}, open),
            internalParameters: Type.Optional(Type.Object({}, open)),
            resolvedDependencies: Type.Optional(Type.Array(ResourceDescriptor)),
          },
          open,
        ),
        runDetails: Type.Object(
          {
            builder: Type.Object({ id: Type.String() }, open),
            metadata: Type.Optional(Type.Object({}, open)),
            byproducts: Type.Optional(Type.Array(ResourceDescriptor)),
          },
          open,
        ),
      },
      open,
    ),
  },
  { ...closed, description: 'an in-toto Statement v1 with an SLSA Provenance v1 predicate' },
);
const Base64 = Type.String({ pattern: '^[A-Za-z0-9+/_-]*={0,2}$', description: 'base64' });
export const DsseEnvelope = Type.Object(
  {
    payload: Base64,
    payloadType: Type.Literal('application/vnd.in-toto+json'),
    signatures: Type.Array(
      Type.Object(
        {
          keyid: Type.String({ description: 'a hint: the fingerprint of the signing key (GET /v1/keys)' }),
          sig: Type.String({ description: 'base64 Ed25519 signature of PAE(payloadType, payload)' }),
        },
        closed,
      ),
      { minItems: 1 },
    ),
  },
  { ...closed, description: 'a DSSE v1 envelope whose payload is an in-toto Statement v1, signed by the installation key' },
);
export const ProvenanceResult = Type.Union([ProvenanceChain, InTotoStatement, DsseEnvelope], {
  description:
    '{artifact_id, steps}; with format=in-toto an in-toto Statement v1 (SLSA Provenance v1); with format=dsse that statement in a signed DSSE envelope',
});
export const PublicKey = Type.Object(
  {
    name: Type.String({ description: 'the key name and log origin, alp.local/{installation id}' }),
    algorithm: Type.Literal('ed25519'),
    verifier_key: Type.String({ description: 'C2SP signed-note verifier key: name+hash+base64(0x01 || key)' }),
    public_key: Type.String({ description: 'the raw 32-byte Ed25519 public key, base64' }),
    fingerprint: Type.String({ pattern: DIGEST, description: 'sha256 of the raw public key; the keyid of the envelopes it signs' }),
    status: Type.Union([Type.Literal('current'), Type.Literal('retired')], {
      description: 'current: signs now; retired: rotated out, listed so that what it signed stays verifiable',
    }),
    activated_at: Type.Optional(Type.String({ description: 'when the key log recorded it' })),
    retired_at: Type.Optional(Type.String({ description: 'when the key log recorded its successor' })),
    recorded_by: Type.Optional(
      Type.Object(
        {
          seq: Type.Integer({ minimum: 1 }),
          action: Type.Union([Type.Literal('KEY_ACTIVATED'), Type.Literal('KEY_ROTATED')]),
          cross_signed: Type.Boolean({ description: 'whether the previous key signed the statement naming this one' }),
        },
        { ...closed, description: 'the key log entry that recorded the key' },
      ),
    ),
  },
  { ...closed, description: 'a public key of the installation' },
);
export const KeyLogEntry = Type.Object(
  {
    seq: Type.Integer({ minimum: 1 }),
    timestamp: Type.String(),
    action: Type.Union([Type.Literal('KEY_ACTIVATED'), Type.Literal('KEY_ROTATED')]),
    key_name: Type.String(),
    verifier_key: Type.String(),
    public_key: Type.String({ description: 'the new key, raw 32 bytes, base64' }),
    fingerprint: Type.String({ pattern: DIGEST }),
    previous_fingerprint: Type.Union([Type.String({ pattern: DIGEST }), Type.Null()]),
    by: Type.Object({ id: Type.String(), kind: Type.String() }, closed),
    reason: Type.Optional(Type.String()),
    statement: Type.String({ description: 'the canonical JSON statement the keys signed (UTF-8 bytes, pure Ed25519)' }),
    cross_signed: Type.Boolean(),
    old_key_signature: Type.Optional(Type.String({ description: 'the previous key over the statement, base64 (when cross_signed)' })),
    new_key_signature: Type.String({ description: 'the new key over the statement, base64' }),
    prev_hash: Type.Union([Type.String({ pattern: DIGEST }), Type.Null()]),
    hash: Type.String({ pattern: DIGEST }),
  },
  { ...closed, description: 'an entry of the installation key log (hash-chained; docs/audit-format.md)' },
);
export const KeyList = Type.Object(
  {
    keys: Type.Array(PublicKey, { description: 'the current key first, then the retired ones, newest first' }),
    history: Type.Array(KeyLogEntry, { description: 'the key log, oldest first: every activation and rotation' }),
  },
  closed,
);
export const AttestationList = Type.Object(
  {
    artifact_id: ArtifactId,
    version: VersionNumber,
    attestations: Type.Array(
      Type.Object(
        {
          seq: Type.Integer({ minimum: 1, description: 'the decision’s audit entry in the artifact’s chain' }),
          decision: Type.Union([Type.Literal('APPROVE'), Type.Literal('REJECT')]),
          actor: PrincipalSchema,
          timestamp: Timestamp,
          envelope: DsseEnvelope,
        },
        closed,
      ),
    ),
  },
  { ...closed, description: 'every decision on the version, oldest first, each as a signed in-toto statement' },
);
export const ArchiveResult = Type.Object({ archived: Type.Array(ArchivedObjectSchema) }, closed);
const Finding = Type.Object({}, { ...open, description: 'what did not verify, and why' });
export const Verification = Type.Object(
  {
    artifact_id: ArtifactId,
    ok: Type.Boolean(),
    content: Type.Object(
      {
        objects: Count,
        bytes: Count,
        ok: Count,
        findings: Type.Array(Finding),
        stale: Type.Array(Finding, {
          description: 'derived documents (provenance) that are what the committed items derive but not the recorded digest: not failures',
        }),
      },
      open,
    ),
    audit: Type.Object({ entries: Count, ok: Type.Boolean(), findings: Type.Array(Finding) }, open),
  },
  closed,
);
export const WhoAmI = Type.Object({ principal: PrincipalSchema }, closed);
export const Health = Type.Object({ status: Type.Literal('ok') }, closed);
export const Ready = Type.Object(
  { status: Type.Literal('ready'), installation_id: Type.String({ pattern: ULID }), metadata: Type.String(), content: Type.String() },
  closed,
);

const ProblemDef = Type.Object(
  {
    type: Type.String({ pattern: '^urn:alp:problem:[a-z_]+$', description: 'urn:alp:problem:{code}' }),
    title: Type.String(),
    status: Type.Integer({ minimum: 400, maximum: 599 }),
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
export type ProblemDocument = Static<typeof ProblemDef>;

/** Shared schemas registered with fastify.addSchema (components.schemas in the OpenAPI document). */
export const SHARED_SCHEMAS: TSchema[] = [VersionDef, HeadDef, OutputDef, ExecutionDef, ProblemDef];
