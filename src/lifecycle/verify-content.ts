/**
 * Re-hashes every object the metadata names and reports what is missing or corrupt.
 */

import { readHead } from '../audit/chain.ts';
import { AlpError, IntegrityError, NotFound } from '../core/errors.ts';
import { allHeads } from './artifacts.ts';
import type { ServiceContext } from './context.ts';
import { type ObjectRef, refsOfArtifact } from './references.ts';

export interface VerifyFinding {
  key: string;
  digest: string;
  source: string;
  problem: 'missing' | 'corrupt' | 'error';
  detail: string;
}

export interface VerifyReport {
  objects: number;
  bytes: number;
  ok: number;
  findings: VerifyFinding[];
}

export interface Progress {
  total?(n: number): void;
  tick?(bytes: number): void;
}

export async function collectRefs(ctx: ServiceContext, artifactId?: string): Promise<ObjectRef[]> {
  if (artifactId !== undefined) {
    await readHead(ctx, artifactId);
    return refsOfArtifact(ctx.items, artifactId);
  }
  const refs: ObjectRef[] = [];
  for await (const head of allHeads(ctx)) refs.push(...(await refsOfArtifact(ctx.items, head.artifact_id)));
  return refs;
}

export async function verifyObjects(ctx: ServiceContext, refs: ObjectRef[], progress: Progress = {}): Promise<VerifyReport> {
  const report: VerifyReport = { objects: refs.length, bytes: 0, ok: 0, findings: [] };
  progress.total?.(refs.length);
  for (const ref of refs) {
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
  return report;
}
