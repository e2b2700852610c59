/**
 * Provenance: ordered, hash-chained steps (PROV#{step}, GSI1 PROV#{date}) — who did what, with which
 * inputs and outputs (by digest), using which tool or model. `provenance/{id}.json` is derived from
 * the items after every append and its digest recorded on the HEAD, so it can always be rebuilt and
 * verified. Exportable as an in-toto Statement v1 with an SLSA Provenance v1 predicate, signed as a DSSE
 * envelope by lifecycle/attestations.ts.
 *
 * The committed steps are the truth. Writing the document and recording its digest are two steps
 * after the commit, so a crash (or a slower concurrent writer) can leave a document that does not
 * match the recorded digest but is exactly what the committed steps (or a prefix of them) derive:
 * that document is STALE, not corrupt (judgeProvenanceDocument, the one judgement `alp verify`,
 * `GET …/verification` and `alp reconcile` share). It is re-derived by the next append, by the
 * repair pass of `alp start` / `alp init` (repairProvenanceDocuments) and by reconcile. Bytes that
 * no prefix of the committed steps derives are CORRUPT.
 */
import { readHead, runAudited } from '../audit/chain.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import { isoDate } from '../core/clock.ts';
import { type Digest, digestHex, parseDigest, sha256 } from '../core/digest.ts';
import { InvalidInput, NotFound } from '../core/errors.ts';
import { artifactPk, eventGsiSk, HEAD_SK, indexShard, provenanceGsiPk, provenanceSk } from '../core/keys.ts';
import { provenanceKey } from '../core/object-keys.ts';
import { cond, type Item, queryAll } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertNotFenced, isFenced } from '../system/fence.ts';
import { readInstallation } from '../system/installation.ts';
import { assertActor } from './access.ts';
import { allHeads } from './artifacts.ts';
import { ALP_STEPS_BUILD_TYPE, alpBuilderId, digestUri, IN_TOTO_STATEMENT_V1, SLSA_PROVENANCE_V1 } from './attestation-types.ts';
import type { HeadItem, Principal, VersionItem } from './model.ts';
import { validateText } from './validation.ts';
import { listVersions } from './versions.ts';

export interface ProvenanceInput {
  action: string;
  /** Who performed the step, when it is not the caller (e.g. a model acting for an agent). */
  actor?: string | undefined;
  inputs?: string[] | undefined;
  outputs?: string[] | undefined;
  tool?: string | undefined;
  model?: string | undefined;
  note?: string | undefined;
}

export const MAX_PROVENANCE_DIGESTS = 256;

function digests(field: string, list: string[] | undefined): string[] {
  const out = (list ?? []).map((d) => parseDigest(d));
  if (out.length > MAX_PROVENANCE_DIGESTS) throw new InvalidInput(`at most ${MAX_PROVENANCE_DIGESTS} ${field}`);
  return out;
}

export async function addProvenance(ctx: ServiceContext, caller: Principal, artifactId: string, input: ProvenanceInput): Promise<Item> {
  assertActor('addProvenance', caller);
  const action = validateText('action', input.action, { max: 200 });
  const actor = input.actor === undefined ? caller.id : validateText('actor', input.actor, { max: 200 });
  const fields = {
    action,
    actor,
    // Who actually recorded the step (authenticated), and whether `actor` is only their claim.
    recorded_by: caller,
    actor_claimed: actor !== caller.id,
    inputs: digests('inputs', input.inputs),
    outputs: digests('outputs', input.outputs),
    ...(input.tool === undefined ? {} : { tool: validateText('tool', input.tool, { max: 200 }) }),
    ...(input.model === undefined ? {} : { model: validateText('model', input.model, { max: 200 }) }),
    ...(input.note === undefined ? {} : { note: validateText('note', input.note, { min: 0, max: 4000 }) }),
  };
  await assertNotFenced(ctx, { kind: 'artifacts', ids: [artifactId] });
  const result = await runAudited(ctx, [artifactId], (heads) => {
    const head = heads[artifactId] as HeadItem;
    const step = ((head.provenance_steps as number | undefined) ?? 0) + 1;
    return {
      chains: [
        {
          artifactId,
          headSet: { provenance_steps: step },
          entries: [
            {
              type: 'provenance',
              keys: (_seq, ts) => ({
                SK: provenanceSk(step),
                GSI1PK: provenanceGsiPk(isoDate(new Date(ts)), indexShard(artifactId, ctx.layout.index_shards)),
                GSI1SK: eventGsiSk(ts, artifactId),
              }),
              fields: { step, ...fields },
            },
          ],
        },
      ],
    };
  });
  // The document is derived from the committed steps and rewritten by every later step (reconcile
  // reports a stale one as `derived`): failing to write it now does not undo the step that committed.
  await publishProvenanceDocument(ctx, artifactId).catch(() => {});
  return result.items[0] as Item;
}

export async function listProvenance(ctx: ServiceContext, artifactId: string): Promise<Item[]> {
  return queryAll(ctx.items, { pk: artifactPk(artifactId), sk: { beginsWith: 'PROV#' }, consistent: true });
}

/** A step as the derived document holds it: the stored fields (the document's bytes depend on these only). */
function documentStepView(i: Item): Record<string, unknown> {
  const { PK: _pk, SK: _sk, GSI1PK: _g, GSI1SK: _h, ...rest } = i;
  return rest;
}

/**
 * Whether the step's actor is only claimed: it differs from the authenticated principal that recorded
 * it. Stored on steps since issue 14; derived for older steps (which all carry recorded_by).
 */
export function actorClaimed(i: Item): boolean {
  if (typeof i.actor_claimed === 'boolean') return i.actor_claimed;
  const by = i.recorded_by as { id?: unknown } | undefined;
  return by?.id !== i.actor;
}

/** A step as the API, the CLI and the web UI show it: always who recorded it, and a claimed actor marked. */
export function provenanceStepView(i: Item): Record<string, unknown> {
  return { ...documentStepView(i), actor_claimed: actorClaimed(i) };
}

/** The derived document: every step in order. Deterministic: the same steps give the same bytes. */
export async function buildProvenanceDocument(ctx: ServiceContext, artifactId: string): Promise<{ steps: number; bytes: Buffer }> {
  const steps = await listProvenance(ctx, artifactId);
  return { steps: steps.length, bytes: documentBytes(artifactId, steps) };
}

function documentBytes(artifactId: string, steps: Item[]): Buffer {
  const doc = { artifact_id: artifactId, steps: steps.map(documentStepView) };
  return Buffer.from(`${canonicalJson(doc)}\n`);
}

const PROVENANCE_PREFIX = 'provenance/';
const PROVENANCE_SUFFIX = '.json';

/** The artifact a provenance document key belongs to, or undefined for any other key. */
export function provenanceArtifactId(key: string): string | undefined {
  if (!key.startsWith(PROVENANCE_PREFIX) || !key.endsWith(PROVENANCE_SUFFIX)) return undefined;
  const id = key.slice(PROVENANCE_PREFIX.length, -PROVENANCE_SUFFIX.length);
  return provenanceKey(id) === key ? id : undefined;
}

/** A derived document larger than this is not read back whole to judge it (it is judged corrupt). */
const MAX_JUDGED_DOCUMENT_BYTES = 64 * 1024 * 1024;

export type DocumentJudgement =
  /** The bytes hash to the recorded digest. */
  | { verdict: 'current' }
  /** Not the recorded digest, but exactly what the first `steps` committed steps derive (or absent): re-derivable. */
  | { verdict: 'stale'; steps: number; detail: string }
  /** Bytes that no prefix of the committed steps derives. */
  | { verdict: 'corrupt'; detail: string };

/**
 * The one judgement of a provenance document against its recorded digest and the committed steps,
 * shared by every check that reads it (verify, the verification route, reconcile).
 */
export async function judgeProvenanceDocument(ctx: ServiceContext, artifactId: string, recorded: Digest): Promise<DocumentJudgement> {
  const bytes = await readDocument(ctx, provenanceKey(artifactId));
  if (bytes === undefined)
    return { verdict: 'stale', steps: 0, detail: 'the document is missing; it is re-derived from the committed steps' };
  if (bytes === null) return { verdict: 'corrupt', detail: `the document is larger than ${MAX_JUDGED_DOCUMENT_BYTES} bytes` };
  if (sha256(bytes) === recorded) return { verdict: 'current' };
  const committed = await listProvenance(ctx, artifactId);
  const claimed = claimedStepCount(bytes);
  if (claimed !== undefined && claimed <= committed.length && documentBytes(artifactId, committed.slice(0, claimed)).equals(bytes)) {
    const when = claimed === committed.length ? 'ahead of the recorded digest' : `behind the ${committed.length} committed steps`;
    return {
      verdict: 'stale',
      steps: claimed,
      detail: `the document derives the first ${claimed} committed step(s) (${when}): stale, not corrupt`,
    };
  }
  return {
    verdict: 'corrupt',
    detail: `the document hashes to ${sha256(bytes)}, neither the recorded ${recorded} nor what the committed steps derive`,
  };
}

/** The raw bytes at `key`; undefined when absent, null when too large to judge. */
async function readDocument(ctx: ServiceContext, key: string): Promise<Buffer | undefined | null> {
  let stream: AsyncIterable<unknown>;
  try {
    stream = await ctx.content.readRaw(key);
  } catch (e) {
    if (e instanceof NotFound) return undefined;
    throw e;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of stream) {
    size += (c as Buffer).length;
    if (size > MAX_JUDGED_DOCUMENT_BYTES) return null;
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}

function claimedStepCount(bytes: Buffer): number | undefined {
  try {
    const doc = JSON.parse(bytes.toString('utf8')) as { steps?: unknown };
    return Array.isArray(doc.steps) ? doc.steps.length : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The repair pass of `alp start` / `alp init`: re-derives every provenance document whose recording
 * lags the committed steps (a writer died between its commit and recording the document). Reads only
 * the HEAD items; a stale document whose counters agree (an older writer's late overwrite) is found
 * and repaired by reconcile, and by the next append.
 */
export async function repairProvenanceDocuments(ctx: ServiceContext): Promise<number> {
  let repaired = 0;
  for await (const head of allHeads(ctx)) {
    const steps = (head.provenance_steps as number | undefined) ?? 0;
    if (steps === 0 || (head.provenance_doc_steps === steps && typeof head.provenance_hash === 'string')) continue;
    await publishProvenanceDocument(ctx, head.artifact_id);
    repaired++;
  }
  return repaired;
}

/**
 * Rewrites provenance/{id}.json until the document written covers every step recorded: a slower
 * concurrent writer that overwrote a newer document notices the newer step count and writes again.
 */
export async function publishProvenanceDocument(ctx: ServiceContext, artifactId: string): Promise<void> {
  for (let attempt = 0; attempt < 10; attempt++) {
    // A fence taken since the step committed: leave the (derivable) document for the next publisher.
    if (await isFenced(ctx, { kind: 'artifacts', ids: [artifactId] })) return;
    const { steps, bytes } = await buildProvenanceDocument(ctx, artifactId);
    const put = await ctx.content.put(provenanceKey(artifactId), [bytes]);
    const head = await readHead(ctx, artifactId);
    if (((head.provenance_steps as number | undefined) ?? 0) > steps) continue;
    await ctx.items
      .update(
        { PK: head.PK, SK: HEAD_SK },
        { set: { provenance_key: provenanceKey(artifactId), provenance_hash: put.digest, provenance_doc_steps: steps } },
        { condition: cond.eq('provenance_steps', steps) },
      )
      .catch(() => {});
    const after = await readHead(ctx, artifactId);
    if (after.provenance_hash === put.digest) return;
  }
}

/**
 * An in-toto Statement v1 with an SLSA Provenance v1 predicate. The subjects are what the steps
 * produced (every output digest, once, in the order first recorded), named after the version of this
 * artifact that holds those bytes when one does; the inputs are the resolved dependencies. An artifact
 * without steps, or whose steps produced nothing, has no statement (NOT_FOUND): a statement needs a
 * subject, and versions nobody recorded a step for were not built by anything ALP can vouch for.
 */
export async function inTotoStatement(ctx: ServiceContext, artifactId: string): Promise<Record<string, unknown>> {
  const head = await readHead(ctx, artifactId);
  const steps = await listProvenance(ctx, artifactId);
  if (steps.length === 0)
    throw new NotFound(`artifact ${artifactId} has no provenance steps: there is no SLSA provenance statement`, {
      reason: 'NO_PROVENANCE',
    });
  const outputs = firstSeen(steps, 'outputs');
  if (outputs.size === 0)
    throw new NotFound(`no provenance step of artifact ${artifactId} recorded an output: an SLSA provenance statement needs a subject`, {
      reason: 'NO_PROVENANCE_OUTPUTS',
    });
  const installation = await readInstallation(ctx);
  if (!installation) throw new NotFound('no installation record: run `alp init`');
  const versionOf = versionsByDigest(await listVersions(ctx.items, artifactId));
  const first = steps[0] as Item;
  const last = steps[steps.length - 1] as Item;
  return {
    _type: IN_TOTO_STATEMENT_V1,
    subject: [...outputs].map(([d, producedBy]) => {
      const v = versionOf.get(d);
      return {
        name: v ? `${head.name}@v${v.version}/${v.filename}` : digestUri(d),
        digest: { sha256: digestHex(d as Digest) },
        annotations: { artifact_id: artifactId, ...(v ? { version: v.version } : {}), steps: producedBy },
      };
    }),
    predicateType: SLSA_PROVENANCE_V1,
    predicate: {
      buildDefinition: {
        buildType: ALP_STEPS_BUILD_TYPE,
        externalParameters: { artifact_id: artifactId, name: head.name, kind: head.kind },
        internalParameters: { steps: steps.map(statementStep) },
        resolvedDependencies: [...firstSeen(steps, 'inputs').keys()].map((d) => ({
          uri: digestUri(d),
          digest: { sha256: digestHex(d as Digest) },
        })),
      },
      runDetails: {
        builder: { id: alpBuilderId(installation.installation_id) },
        metadata: { invocationId: `${artifactId}#${steps.length}`, startedOn: first.timestamp, finishedOn: last.timestamp },
      },
    },
  };
}

/** Every digest of the steps' `field`, once, in the order first recorded, with the steps that recorded it. */
function firstSeen(steps: Item[], field: 'inputs' | 'outputs'): Map<string, number[]> {
  const seen = new Map<string, number[]>();
  for (const s of steps)
    for (const d of s[field] as string[]) {
      const list = seen.get(d) ?? [];
      if (!list.includes(s.step as number)) list.push(s.step as number);
      seen.set(d, list);
    }
  return seen;
}

/** The earliest version holding each content digest. */
function versionsByDigest(versions: VersionItem[]): Map<string, VersionItem> {
  const out = new Map<string, VersionItem>();
  for (const v of versions) if (!out.has(v.content_hash)) out.set(v.content_hash, v);
  return out;
}

function statementStep(s: Item): Record<string, unknown> {
  return {
    step: s.step,
    action: s.action,
    actor: s.actor,
    recorded_by: s.recorded_by,
    actor_claimed: actorClaimed(s),
    tool: s.tool,
    model: s.model,
    timestamp: s.timestamp,
    hash: s.hash,
  };
}
