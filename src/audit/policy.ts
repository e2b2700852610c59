/**
 * The policy of an artifact: the HEAD fields that decide outcomes (name, kind, labels, quorum). They
 * are bound into the audit chain: every creation transition records them in its hashed `policy`
 * field (version 1's when the artifact is created, every later version's as it stands then). No ALP
 * command changes a policy after creation, so every chained record must be the same, and the HEAD must
 * equal it; a future policy change must append a chained record of its own.
 *
 * Checked by `alp audit verify` / reconcile (audit/verify.ts), by `alp verify` and the verification
 * route (lifecycle/verify-content.ts: the HEAD and each version's metadata.json snapshot against the
 * chained policy), and at decision time: commitAudited refuses a move to APPROVED or EXECUTING when
 * the HEAD it decided on differs from the chained policy.
 *
 * Chains written before policies were chained have no `policy` record: their reference is version
 * 1's metadata.json snapshot (name, kind, labels; digest-bound by the creation transition), and their
 * quorum cannot be checked.
 */
import { canonicalJson } from '../core/canonical-json.ts';
import { IntegrityError } from '../core/errors.ts';
import { artifactPk } from '../core/keys.ts';
import type { HeadItem } from '../core/model.ts';
import { type Item, queryAll } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import { auditHash } from './hash.ts';

export const POLICY_FIELDS = ['name', 'kind', 'labels', 'quorum'] as const;
export type PolicyField = (typeof POLICY_FIELDS)[number];
export type Policy = { name: string; kind: string; labels: Record<string, string>; quorum: number };
/** What a reference knows (a metadata.json snapshot has no quorum). */
export type PartialPolicy = Partial<Policy>;

export function policyOf(head: Pick<HeadItem, PolicyField>): Policy {
  return { name: head.name, kind: head.kind, labels: head.labels, quorum: head.quorum };
}

export function isPolicy(v: unknown): v is Policy {
  return typeof v === 'object' && v !== null && POLICY_FIELDS.every((f) => f in (v as object));
}

/** The fields where `actual` differs from the reference, each with a sentence naming it. */
export function policyDifferences(actual: PartialPolicy, reference: PartialPolicy): Array<{ field: PolicyField; detail: string }> {
  const out: Array<{ field: PolicyField; detail: string }> = [];
  for (const f of POLICY_FIELDS) {
    if (reference[f] === undefined || actual[f] === undefined) continue;
    if (canonicalJson(actual[f]) !== canonicalJson(reference[f]))
      out.push({ field: f, detail: `${f} ${canonicalJson(actual[f])} differs from ${canonicalJson(reference[f])}` });
  }
  return out;
}

/** The policy recorded by the first chained entry that carries one (undefined for older chains). */
export function firstChainedPolicy(entries: Item[]): Policy | undefined {
  const e = entries.find((x) => isPolicy(x.policy));
  return e ? (e.policy as Policy) : undefined;
}

/**
 * The chained policy read the cheap way: the hot creation transitions of the partition (each checked
 * against its own hash); undefined when none is hot and carries one (packed or older history).
 */
export async function hotChainedPolicy(ctx: ServiceContext, artifactId: string): Promise<Policy | undefined> {
  const transitions = await queryAll(ctx.items, { pk: artifactPk(artifactId), sk: { beginsWith: 'TRANS#' }, consistent: true });
  const bound = transitions
    .filter((t) => isPolicy(t.policy) && auditHash(t) === t.hash)
    .sort((a, b) => (a.seq as number) - (b.seq as number));
  return bound[0]?.policy as Policy | undefined;
}

/**
 * Decision-time check: the HEAD a decision read must carry the chained policy. Throws IntegrityError
 * naming the edited field(s).
 */
export async function assertPolicyBound(ctx: ServiceContext, head: HeadItem): Promise<void> {
  const chained = await hotChainedPolicy(ctx, head.artifact_id);
  if (!chained) return;
  const diff = policyDifferences(policyOf(head), chained);
  if (diff.length > 0)
    throw new IntegrityError(
      `artifact ${head.artifact_id}: the HEAD's policy is not the one its audit chain records (${diff.map((d) => d.detail).join('; ')}); nothing was decided — run alp audit verify`,
      { fields: diff.map((d) => d.field) },
    );
}

const MAX_SNAPSHOT_BYTES = 1024 * 1024;

/**
 * The policy fields a version's metadata.json snapshot records (name, kind, labels), read verified
 * against its digest; undefined when it cannot be read (missing or corrupt objects are `alp verify`'s
 * findings, not repeated here).
 */
export async function snapshotPolicy(ctx: ServiceContext, key: unknown, digest: unknown): Promise<PartialPolicy | undefined> {
  if (typeof key !== 'string' || typeof digest !== 'string') return undefined;
  try {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of await ctx.content.get(key, digest as never)) {
      size += (c as Buffer).length;
      if (size > MAX_SNAPSHOT_BYTES) return undefined;
      chunks.push(c as Buffer);
    }
    const snap = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    return { name: snap.name as string, kind: snap.kind as string, labels: snap.labels as Record<string, string> };
  } catch {
    return undefined;
  }
}

export interface PolicyProblem {
  row: string;
  problem: string;
}

/** Chained policy records that differ from the first one (no command changes a policy). */
export function chainedPolicyProblems(entries: Item[]): PolicyProblem[] {
  const chained = firstChainedPolicy(entries);
  const out: PolicyProblem[] = [];
  for (const e of entries) {
    if (!isPolicy(e.policy) || !chained) continue;
    for (const d of policyDifferences(e.policy, chained))
      out.push({ row: `${e.PK} ${e.SK}`, problem: `policy changed without a policy record: ${d.detail} (the creation record)` });
  }
  return out;
}

/**
 * Every way the HEAD, the versions and their metadata.json snapshots disagree with the chained
 * policy (or, for older chains, with version 1's snapshot).
 */
export async function policyProblems(
  ctx: ServiceContext,
  head: HeadItem,
  chained: Policy | undefined,
  versions: Item[],
): Promise<PolicyProblem[]> {
  const out: PolicyProblem[] = [];
  const sorted = [...versions].sort((a, b) => (a.version as number) - (b.version as number));
  const first = sorted[0];
  const reference: PartialPolicy | undefined =
    chained ?? (first && first.version === 1 ? await snapshotPolicy(ctx, first.metadata_key, first.metadata_hash) : undefined);
  if (!reference) return out;
  const source = chained ? 'the audit chain' : 'version 1’s metadata.json (this chain predates chained policies)';
  for (const d of policyDifferences(policyOf(head), reference))
    out.push({ row: `${head.PK} ${head.SK}`, problem: `HEAD ${d.detail}: not the policy ${source} records` });
  for (const v of sorted) {
    const row = `${v.PK} ${v.SK}`;
    for (const d of policyDifferences({ name: v.name as string, kind: v.kind as string }, reference))
      out.push({ row, problem: `version ${d.detail}: not the policy ${source} records` });
    const snap = await snapshotPolicy(ctx, v.metadata_key, v.metadata_hash);
    if (snap)
      for (const d of policyDifferences(snap, reference))
        out.push({ row, problem: `metadata.json ${d.detail}: not the policy ${source} records` });
  }
  return out;
}
