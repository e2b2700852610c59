/**
 * Provenance: ordered, hash-chained steps (PROV#{step}, GSI1 PROV#{date}) — who did what, with which
 * inputs and outputs (by digest), using which tool or model. `provenance/{id}.json` is derived from
 * the items after every append and its digest recorded on the HEAD, so it can always be rebuilt and
 * verified. Exportable as an in-toto Statement v1 with an SLSA Provenance v1 predicate.
 */
import { assertNotFenced, fenceKey, readHead, runAudited } from '../audit/chain.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import { isoDate } from '../core/clock.ts';
import { digestHex, parseDigest } from '../core/digest.ts';
import { InvalidInput } from '../core/errors.ts';
import { artifactPk, eventGsiSk, HEAD_SK, provenanceGsiPk, provenanceSk } from '../core/keys.ts';
import { provenanceKey } from '../core/object-keys.ts';
import { cond, type Item, queryAll } from '../store/item-store.ts';
import type { ServiceContext } from './context.ts';
import type { HeadItem, Principal } from './model.ts';
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
  const action = validateText('action', input.action, { max: 200 });
  const fields = {
    action,
    actor: input.actor === undefined ? caller.id : validateText('actor', input.actor, { max: 200 }),
    recorded_by: caller,
    inputs: digests('inputs', input.inputs),
    outputs: digests('outputs', input.outputs),
    ...(input.tool === undefined ? {} : { tool: validateText('tool', input.tool, { max: 200 }) }),
    ...(input.model === undefined ? {} : { model: validateText('model', input.model, { max: 200 }) }),
    ...(input.note === undefined ? {} : { note: validateText('note', input.note, { min: 0, max: 4000 }) }),
  };
  await assertNotFenced(ctx);
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
                GSI1PK: provenanceGsiPk(isoDate(new Date(ts))),
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

export function provenanceStepView(i: Item): Record<string, unknown> {
  const { PK: _pk, SK: _sk, GSI1PK: _g, GSI1SK: _h, ...rest } = i;
  return rest;
}

/** The derived document: every step in order. Deterministic: the same steps give the same bytes. */
export async function buildProvenanceDocument(ctx: ServiceContext, artifactId: string): Promise<{ steps: number; bytes: Buffer }> {
  const steps = await listProvenance(ctx, artifactId);
  const doc = { artifact_id: artifactId, steps: steps.map(provenanceStepView) };
  return { steps: steps.length, bytes: Buffer.from(`${canonicalJson(doc)}\n`) };
}

/**
 * Rewrites provenance/{id}.json until the document written covers every step recorded: a slower
 * concurrent writer that overwrote a newer document notices the newer step count and writes again.
 */
export async function publishProvenanceDocument(ctx: ServiceContext, artifactId: string): Promise<void> {
  for (let attempt = 0; attempt < 10; attempt++) {
    // A fence taken since the step committed: leave the (derivable) document for the next publisher.
    if ((await ctx.items.get(fenceKey, { consistent: true }))?.holder !== undefined) return;
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

/** An in-toto Statement v1 with an SLSA Provenance v1 predicate; subjects are the artifact's versions. */
export async function inTotoStatement(ctx: ServiceContext, artifactId: string): Promise<Record<string, unknown>> {
  const head = await readHead(ctx, artifactId);
  const versions = await listVersions(ctx.items, artifactId);
  const steps = await listProvenance(ctx, artifactId);
  const dependencies = new Map<string, Record<string, unknown>>();
  const byproducts = new Map<string, Record<string, unknown>>();
  for (const s of steps) {
    for (const d of s.inputs as string[]) dependencies.set(d, { uri: `urn:alp:digest:${d}`, digest: { sha256: digestHex(d as never) } });
    for (const d of s.outputs as string[]) byproducts.set(d, { uri: `urn:alp:digest:${d}`, digest: { sha256: digestHex(d as never) } });
  }
  const first = steps[0];
  const last = steps[steps.length - 1];
  return {
    _type: 'https://in-toto.io/Statement/v1',
    subject: versions.map((v) => ({
      name: `${head.name}@v${v.version}/${v.filename}`,
      digest: { sha256: digestHex(v.content_hash) },
      annotations: { artifact_id: artifactId, version: v.version, state: v.state },
    })),
    predicateType: 'https://slsa.dev/provenance/v1',
    predicate: {
      buildDefinition: {
        buildType: 'https://alp.dev/provenance/steps/v1',
        externalParameters: { artifact_id: artifactId, name: head.name, kind: head.kind },
        internalParameters: {
          steps: steps.map((s) => ({
            step: s.step,
            action: s.action,
            actor: s.actor,
            tool: s.tool,
            model: s.model,
            timestamp: s.timestamp,
            hash: s.hash,
          })),
        },
        resolvedDependencies: [...dependencies.values()],
      },
      runDetails: {
        builder: { id: 'https://alp.dev/builder/alp' },
        metadata: {
          invocationId: `${artifactId}#${steps.length}`,
          ...(first ? { startedOn: first.timestamp } : {}),
          ...(last ? { finishedOn: last.timestamp } : {}),
        },
        byproducts: [...byproducts.values()],
      },
    },
  };
}
