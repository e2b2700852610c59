/**
 * The local backend: the commands' calls as the services over the opened installation, answered with
 * the same views the HTTP routes serve (versionView, headView, executionView, entryView…), so local and
 * remote output are one shape. Views are the services' `Record<string, unknown>`; `view()` gives them
 * the contract's type (test/client/contract.test.ts checks the routes' answers, these same views,
 * against those schemas).
 */
import { readHead } from '../audit/chain.ts';
import { entryView, history } from '../audit/history.ts';
import { installationKeys } from '../audit/installation-keys.ts';
import { checkpointNow } from '../audit/tlog/checkpoint-now.ts';
import { inclusionAt, locateEntry, logCheckpoint } from '../audit/tlog/proofs.ts';
import type * as T from '../client/types.ts';
import { NotFound } from '../core/errors.ts';
import { listAliases, removeAlias, setAlias } from '../lifecycle/aliases.ts';
import { approvalPolicyLog, readApprovalPolicy, setApprovalPolicy } from '../lifecycle/approval-policy.ts';
import { decide } from '../lifecycle/approvals.ts';
import { archiveArtifact } from '../lifecycle/archive.ts';
import { headView, listArtifacts, openVersionContent, parseState, resolveVersion, showArtifact } from '../lifecycle/artifacts.ts';
import { decisionAttestations, signedProvenance } from '../lifecycle/attestations.ts';
import { compensate } from '../lifecycle/compensation.ts';
import { executionView, finishExecution, readExecution, startExecution, uploadOutput } from '../lifecycle/executions.ts';
import { addVersionOnce, createArtifactOnce } from '../lifecycle/idempotency.ts';
import { addProvenance, inTotoStatement, provenanceStepView } from '../lifecycle/provenance.ts';
import { queryIndex } from '../lifecycle/queries.ts';
import { provenanceOf } from '../lifecycle/reads.ts';
import { reviewPolicy } from '../lifecycle/review-policy.ts';
import { searchArtifacts } from '../lifecycle/search.ts';
import { transition, withdraw } from '../lifecycle/transitions.ts';
import { collectRefs, verifyObjects } from '../lifecycle/verify-content.ts';
import { latestVersion, listVersions, readVersion, versionView } from '../lifecycle/versions.ts';
import type { Item } from '../store/item-store.ts';
import type { ServiceContext } from '../system/context.ts';
import type { Backend, ContentSource, TargetLookup } from './backend.ts';
import { openInputFile, writeVerifiedOutput } from './files.ts';
import { progressBar } from './progress.ts';
import type { Runtime } from './runtime.ts';

/** A service's view as the contract's type (the same object the HTTP route would serialize). */
const view = <V>(v: object): V => v as unknown as V;

async function contentOf(source: ContentSource) {
  const { body, filename, size } = await openInputFile(source.file, source.filename);
  return { body, filename, size, expectedDigest: source.digest };
}

/** The lookups of targets.ts (names, default versions) on the installation. */
export function localLookup(ctx: ServiceContext): TargetLookup {
  return {
    artifactExists: (id) =>
      readHead(ctx, id).then(
        () => true,
        (e: unknown) => {
          if (e instanceof NotFound) return false;
          throw e;
        },
      ),
    artifactsNamed: async (name, limit) => view(await listArtifacts(ctx, { name, limit })),
    versionState: async (id, n) => (await readVersion(ctx.items, id, n)).state,
    versions: async (id) => (await listVersions(ctx.items, id)).map((v) => view(versionView(v))),
    latestVersion: async (id) => view(versionView(await latestVersion(ctx.items, id))),
    aliasedVersion: async (id, ref) => view(versionView(await resolveVersion(ctx, id, ref))),
  };
}

export function localBackend(rt: Runtime): Backend {
  const { ctx } = rt;
  const actor = rt.caller.principal;
  return {
    ...localLookup(ctx),

    async createArtifact(input) {
      const content = await contentOf(input);
      const { version } = await createArtifactOnce(
        ctx,
        actor,
        { name: input.name, kind: input.kind, labels: input.labels, quorum: input.quorum, ...content },
        input.idempotencyKey,
      );
      return view(versionView(version));
    },
    async addVersion(id, input) {
      const { version } = await addVersionOnce(ctx, actor, id, await contentOf(input), input.idempotencyKey);
      return view(versionView(version));
    },
    async showArtifact(id) {
      const { head, versions } = await showArtifact(ctx, id);
      return view({ ...headView(head), versions: versions.map(versionView) });
    },
    listArtifacts: async (input) => view(await listArtifacts(ctx, input)),
    async saveContent(id, n, out) {
      const { version, stream } = await openVersionContent(ctx, id, n);
      await writeVerifiedOutput(stream, out);
      return view(versionView(version));
    },

    transition: async (id, n, to, reason) => view(versionView(await transition(ctx, actor, id, n, parseState(to), reason))),
    withdraw: async (id, n, reason) => view(versionView(await withdraw(ctx, actor, id, n, reason))),
    async decide(id, n, d) {
      const { approval, version } = await decide(ctx, actor, id, n, {
        decision: d.decision,
        evidenceRef: d.evidenceRef,
        expiresInMs: d.expiresInMs,
        contentHash: d.contentHash,
        comment: d.comment,
      });
      return view({ approval: entryView(approval as unknown as Item), version: versionView(version) });
    },
    archive: async (id) => view(await archiveArtifact(ctx, actor, id)),
    async compensate(id, n, input) {
      const { body, filename, size, expectedDigest } = await contentOf(input);
      const r = await compensate(ctx, actor, id, n, {
        filename,
        body,
        size,
        expectedDigest,
        ...(input.reason !== undefined ? { reason: input.reason } : {}),
      });
      return view({ compensation: headView(r.compensation), version: versionView(r.version), compensated: versionView(r.compensated) });
    },

    startExecution: async (id, n) => view(executionView(await startExecution(ctx, actor, id, n))),
    async uploadOutput(run, output, source) {
      const { body, size, expectedDigest } = await contentOf(source);
      return uploadOutput(ctx, actor, run, output, body, { size, ...(expectedDigest ? { expectedDigest } : {}) });
    },
    finishExecution: async (run, input) =>
      view(
        executionView(
          await finishExecution(ctx, actor, run, {
            status: input.status,
            exitCode: input.exitCode,
            ...(input.signal !== undefined ? { signal: input.signal } : {}),
          }),
        ),
      ),
    showExecution: async (run) => view(executionView(await readExecution(ctx, run))),

    history: async (id) => view({ artifact_id: id, entries: await history(ctx, id) }),
    addProvenance: async (id, step) => view(provenanceStepView(await addProvenance(ctx, actor, id, step))),
    provenance: async (id) => view({ artifact_id: id, steps: await provenanceOf(ctx, id) }),
    inToto: async (id) => view(await inTotoStatement(ctx, id)),
    signedProvenance: async (id) => view(await signedProvenance(ctx, id)),
    attestations: async (id, n) => view({ artifact_id: id, version: n, attestations: await decisionAttestations(ctx, id, n) }),
    keys: async () => view(await installationKeys(ctx)),
    async logEntry(id, seq) {
      const at = await locateEntry(ctx, id, seq);
      if (!at.pending) return view(at);
      // No server sequences for a local command: take the lease for a round, as alp audit checkpoint does.
      await checkpointNow(ctx).catch(() => undefined);
      return view(await locateEntry(ctx, id, seq));
    },
    logInclusion: async (leaf, size) => view(await inclusionAt(ctx, leaf, size)),
    logCheckpoint: async () => (await logCheckpoint(ctx)).checkpoint,
    query: async (kind, key, page) => view(await queryIndex(ctx, kind, key, page)),
    listAliases: async (id) => view({ artifact_id: id, aliases: await listAliases(ctx, id) }),
    setAlias: async (id, name, version, reason) => view(await setAlias(ctx, actor, id, name, version, reason)),
    removeAlias: async (id, name, reason) => view(await removeAlias(ctx, actor, id, name, reason)),
    search: async (input) => view(await searchArtifacts(ctx, input)),
    async verifyContent(id) {
      const bar = progressBar('verify', rt.opts.json);
      return view(await verifyObjects(ctx, await collectRefs(ctx, id), bar).finally(() => bar.stop()));
    },
    async policy(review) {
      const state = await readApprovalPolicy(ctx);
      return view(review ? { ...state, review: await reviewPolicy(ctx, actor, review.artifactId, review.version) } : state);
    },
    setPolicy: async (policy, o) =>
      view(await setApprovalPolicy(ctx, actor, policy, { expectedVersion: o.expectedVersion, reason: o.reason })),
    policyLog: async () => view({ events: await approvalPolicyLog(ctx) }),
  };
}

/** The verification report of every artifact (`verify --all`): local only, there is no HTTP route for it. */
export async function verifyAllContent(rt: Runtime): Promise<T.Verification['content']> {
  const bar = progressBar('verify', rt.opts.json);
  return view(await verifyObjects(rt.ctx, await collectRefs(rt.ctx, undefined), bar).finally(() => bar.stop()));
}
