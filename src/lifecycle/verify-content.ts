/**
 * Re-hashes every object the metadata names and reports what is missing or corrupt. Provenance
 * documents (derived from the committed steps) are judged by provenance.ts judgeProvenanceDocument:
 * a stale one is listed under `stale` (re-derivable, not a failure), a corrupt one is a finding.
 */

import { readHead } from '../audit/chain.ts';
import { loadChain } from '../audit/history.ts';
import { firstChainedPolicy, hotChainedPolicy, policyProblems } from '../audit/policy.ts';
import { AlpError, IntegrityError, NotFound } from '../core/errors.ts';
import { forEachLimited } from '../core/limit.ts';
import type { ServiceContext } from '../system/context.ts';
import { assertReadable } from '../system/fence.ts';
import { allHeads } from './artifacts.ts';
import { judgeProvenanceDocument, provenanceArtifactId } from './provenance.ts';
import { type ObjectRef, refsOfArtifact } from './references.ts';
import { listVersions } from './versions.ts';

export interface VerifyFinding {
  key: string;
  digest: string;
  source: string;
  /** `policy`: the HEAD or a metadata.json snapshot differs from the policy the audit chain records. */
  problem: 'missing' | 'corrupt' | 'error' | 'policy';
  detail: string;
}

/** A derived document that does not match its recorded digest but is what the committed items derive. */
export interface StaleDocument {
  key: string;
  digest: string;
  source: string;
  /** How many committed steps the document derives. */
  steps: number;
  detail: string;
}

export interface VerifyReport {
  objects: number;
  bytes: number;
  ok: number;
  findings: VerifyFinding[];
  /** Derived documents to re-derive (not failures: the committed items are intact). */
  stale: StaleDocument[];
}

export interface Progress {
  total?(n: number): void;
  tick?(bytes: number): void;
}

export async function collectRefs(ctx: ServiceContext, artifactId?: string): Promise<ObjectRef[]> {
  // `alp verify` and the verification route read every object (content, metadata, outputs, compensations, provenance document) next.
  await assertReadable(ctx, artifactId === undefined ? { kind: 'installation' } : { kind: 'artifacts', ids: [artifactId] });
  if (artifactId !== undefined) {
    await readHead(ctx, artifactId);
    return refsOfArtifact(ctx.items, artifactId);
  }
  const refs: ObjectRef[] = [];
  for await (const head of allHeads(ctx)) refs.push(...(await refsOfArtifact(ctx.items, head.artifact_id)));
  return refs;
}

/**
 * `policies` (default true): also check, for every artifact whose metadata.json is among `refs`, that
 * its HEAD and snapshots carry the policy its audit chain records (reconcile has audit verify do it).
 */
export async function verifyObjects(
  ctx: ServiceContext,
  refs: ObjectRef[],
  progress: Progress = {},
  opts: { policies?: boolean } = {},
): Promise<VerifyReport> {
  progress.total?.(refs.length);
  // Cold archive copies (S3 GLACIER) are checked by S3's checksum, never read (verifyColdByChecksum).
  const { rest, cold } = await verifyColdByChecksum(ctx, refs);
  const report: VerifyReport = { objects: refs.length, bytes: 0, ok: cold.ok, findings: [...cold.findings], stale: [] };
  progress.tick?.(cold.objects);
  for (const ref of rest) {
    const derivedFrom = provenanceArtifactId(ref.key);
    if (derivedFrom !== undefined) {
      await judgeDerived(ctx, ref, derivedFrom, report);
      progress.tick?.(1);
      continue;
    }
    try {
      const stream = await ctx.content.get(ref.key, ref.digest, ref.size === undefined ? {} : { expectedSize: ref.size });
      for await (const chunk of stream) report.bytes += (chunk as Buffer).length;
      report.ok++;
    } catch (e) {
      const problem = e instanceof NotFound ? 'missing' : e instanceof IntegrityError ? 'corrupt' : 'error';
      report.findings.push({
        key: ref.key,
        digest: ref.digest,
        source: ref.source,
        problem,
        detail: e instanceof AlpError ? e.message : String(e),
      });
    }
    progress.tick?.(1);
  }
  if (opts.policies !== false) for (const id of artifactsWithSnapshots(refs)) await checkPolicy(ctx, id, report);
  return report;
}

function artifactsWithSnapshots(refs: ObjectRef[]): string[] {
  const ids = new Set<string>();
  for (const r of refs) {
    const m = /^ART#(\S+) V#\d+ metadata$/.exec(r.source);
    if (m) ids.add(m[1] as string);
  }
  return [...ids];
}

async function checkPolicy(ctx: ServiceContext, artifactId: string, report: VerifyReport): Promise<void> {
  const head = await readHead(ctx, artifactId);
  const chained =
    (await hotChainedPolicy(ctx, artifactId)) ?? firstChainedPolicy((await loadChain(ctx, artifactId, { tolerant: true })).entries);
  const problems = await policyProblems(ctx, head, chained, await listVersions(ctx.items, artifactId));
  for (const p of problems)
    report.findings.push({ key: p.row, digest: '', source: `${artifactId} policy`, problem: 'policy', detail: p.problem });
}

async function judgeDerived(ctx: ServiceContext, ref: ObjectRef, artifactId: string, report: VerifyReport): Promise<void> {
  try {
    const judged = await judgeProvenanceDocument(ctx, artifactId, ref.digest);
    if (judged.verdict === 'current') report.ok++;
    else if (judged.verdict === 'stale')
      report.stale.push({ key: ref.key, digest: ref.digest, source: ref.source, steps: judged.steps, detail: judged.detail });
    else report.findings.push({ key: ref.key, digest: ref.digest, source: ref.source, problem: 'corrupt', detail: judged.detail });
  } catch (e) {
    report.findings.push({
      key: ref.key,
      digest: ref.digest,
      source: ref.source,
      problem: 'error',
      detail: e instanceof AlpError ? e.message : String(e),
    });
  }
}

/**
 * The check of cold objects (alp verify and reconcile; content/cold.ts): archive copies in S3 GLACIER are never read
 * (a GetObject answers 403 InvalidObjectState until restored). Each is checked by HeadObject instead:
 * S3's SHA-256 checksum (CopyObject computed it when archive wrote the copy) must equal the digest the
 * items record, and the size the recorded size. A cold copy without a checksum (written before copies
 * carried one) cannot be checked unread: it goes to the verifying read, which real S3 refuses
 * (ARCHIVED_COLD, reported as an error saying how to restore it) — never passed unchecked.
 */
const ARCHIVE_PREFIX = 'archive/';
const HEAD_CONCURRENCY = 16;

/** Splits off the cold references and checks them by checksum; the rest are verified by reading. */
async function verifyColdByChecksum(ctx: ServiceContext, refs: ObjectRef[]): Promise<{ rest: ObjectRef[]; cold: VerifyReport }> {
  const cold: VerifyReport = { objects: 0, bytes: 0, ok: 0, findings: [], stale: [] };
  if (!ctx.content.hasStorageClasses) return { rest: refs, cold };
  const handled = new Set<ObjectRef>();
  await forEachLimited(
    refs.filter((r) => r.key.startsWith(ARCHIVE_PREFIX)),
    HEAD_CONCURRENCY,
    async (r) => {
      const info = await ctx.content.head(r.key);
      // Without a checksum to trust the copy is left to the verifying read: a store that serves it
      // (s3rver) is checked by its bytes; real S3 refuses the GET, reported as ARCHIVED_COLD (restore it).
      if (info?.storageClass !== 'GLACIER' || info.sha256 === undefined) return;
      handled.add(r);
      cold.objects++;
      const sizeOk = r.size === undefined || r.size < 0 || info.size === r.size;
      if (info.sha256 === r.digest && sizeOk) {
        cold.ok++;
        return;
      }
      cold.findings.push({
        key: r.key,
        digest: r.digest,
        source: r.source,
        problem: 'corrupt',
        detail: `cold (GLACIER): S3's checksum ${info.sha256} (${info.size} bytes) is not the recorded ${r.digest}${r.size === undefined ? '' : ` (${r.size} bytes)`}`,
      });
    },
  );
  return { rest: refs.filter((r) => !handled.has(r)), cold };
}
