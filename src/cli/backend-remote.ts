/**
 * The remote backend: the commands' calls as requests to an `alp serve`, through the typed client
 * (`alp/client`, src/client/) — never a second HTTP client. Files are hashed first and sent with
 * `Repr-Digest` (the server keeps nothing unless the bytes match; `--digest` is sent as given, so a
 * wrong one is the server's INTEGRITY refusal as it is locally); stdin is streamed and its digest
 * compared with the one recorded; downloads are re-hashed and a file appears only once verified. A
 * problem answer is the client's AlpHttpError: an AlpError with the server's stable code, which the
 * CLI prints and maps to its exit code like any other (run.ts).
 */
import type { UploadSource } from '../client/body.ts';
import type { AlpClient } from '../client/client.ts';
import type { Digest } from '../client/digest.ts';
import { createNodeClient, fileBody, streamBody, toNodeReadable } from '../client/node.ts';
import type * as T from '../client/types.ts';
import { AlpError, NotFound } from '../core/errors.ts';
import { isUlid } from '../core/ids.ts';
import type { Backend, ContentSource, PageInput } from './backend.ts';
import { checkInputFile, writeVerifiedOutput } from './files.ts';
import type { RemoteTarget } from './remote.ts';
import { ALP_VERSION } from './version.ts';

/** An upload of `--file PATH` (hashed first, re-sendable) or of stdin (streamed once). */
async function uploadOf(source: ContentSource): Promise<{ body: UploadSource; filename: string }> {
  const { filename } = await checkInputFile(source.file, source.filename);
  if (source.file === '-') return { body: streamBody(process.stdin, source.digest ? { digest: source.digest } : {}), filename };
  const body = await fileBody(source.file);
  return { body: source.digest ? { ...body, digest: source.digest } : body, filename };
}

/**
 * An id the route's path schema would refuse (400) names nothing: NOT_FOUND, with the services' own
 * words, as the same command says locally.
 */
function artifactId(id: string): string {
  if (!isUlid(id)) throw new NotFound(`no artifact ${id.slice(0, 40)}`);
  return id;
}
function runId(run: string): string {
  if (!isUlid(run)) throw new NotFound(`no run ${run.slice(0, 40)}`);
  return run;
}

const page = (p: PageInput) => ({
  ...(p.limit !== undefined ? { limit: p.limit } : {}),
  ...(p.cursor !== undefined ? { cursor: p.cursor } : {}),
});

export function remoteClient(target: RemoteTarget): AlpClient {
  return createNodeClient({ url: target.url, token: target.token, headers: { 'user-agent': `alp-cli/${ALP_VERSION}` } });
}

export function remoteBackend(target: RemoteTarget): Backend {
  const alp = remoteClient(target);
  const versions = async (id: string) => (await alp.listVersions(id)).versions;
  return {
    artifactExists: (id) =>
      alp.showArtifact(id).then(
        () => true,
        (e: unknown) => {
          if (e instanceof AlpError && e.code === 'NOT_FOUND') return false;
          throw e;
        },
      ),
    artifactsNamed: (name, limit) => alp.listArtifacts({ name, limit }),
    versionState: async (id, n) => (await alp.showVersion(id, n)).state,
    versions,
    async latestVersion(id) {
      const latest = (await versions(id)).at(-1);
      if (!latest) throw new NotFound(`artifact ${id} has no versions`);
      return latest;
    },
    aliasedVersion: (id, ref) => alp.showVersion(id, ref),

    async createArtifact(input) {
      const { body, filename } = await uploadOf(input);
      return alp.createArtifact(
        {
          name: input.name,
          filename,
          kind: input.kind,
          labels: input.labels,
          ...(input.quorum !== undefined ? { quorum: input.quorum } : {}),
          idempotencyKey: input.idempotencyKey,
        },
        body,
      );
    },
    async addVersion(id, input) {
      const { body, filename } = await uploadOf(input);
      return alp.addVersion(id, { filename, idempotencyKey: input.idempotencyKey }, body);
    },
    showArtifact: (id) => alp.showArtifact(id),
    listArtifacts: (input) =>
      alp.listArtifacts({
        ...page(input),
        ...(input.state !== undefined ? { state: input.state } : {}),
        ...(input.name !== undefined ? { name: input.name } : {}),
      }),
    async saveContent(id, n, out) {
      const v = await alp.showVersion(id, n);
      // Re-hashed as it arrives: a byte that does not match fails the write before the file appears.
      const download = await alp.getContent(id, n, { expectedDigest: v.content_hash as Digest });
      await writeVerifiedOutput(toNodeReadable(download), out);
      return v;
    },

    transition: (id, n, to, reason) => alp.transition(id, n, { to, ...(reason !== undefined ? { reason } : {}) }),
    withdraw: (id, n, reason) => alp.withdraw(id, n, reason),
    decide: (id, n, d) =>
      alp.decide(id, n, {
        decision: d.decision,
        evidence_ref: d.evidenceRef,
        expires_in: d.expiresIn,
        ...(d.contentHash !== undefined ? { content_hash: d.contentHash } : {}),
        ...(d.comment !== undefined ? { comment: d.comment } : {}),
      }),
    archive: (id) => alp.archive(id),
    async compensate(id, n, input) {
      const { body, filename } = await uploadOf(input);
      return alp.compensate(id, n, { filename, ...(input.reason !== undefined ? { reason: input.reason } : {}) }, body);
    },

    startExecution: (id, n) => alp.startExecution(id, n),
    async uploadOutput(run, output, source) {
      const { body } = await uploadOf(source);
      return alp.uploadOutput(runId(run), output as T.OutputName, body);
    },
    finishExecution: (run, input) =>
      alp.finishExecution(runId(run), {
        status: input.status as T.FinishBody['status'],
        exit_code: input.exitCode,
        ...(input.signal !== undefined ? { signal: input.signal } : {}),
      }),
    showExecution: async (run) => alp.showExecution(runId(run)),

    history: (id) => alp.history(id),
    addProvenance: (id, step) => alp.addProvenance(id, step),
    provenance: (id) => alp.getProvenance(id),
    inToto: (id) => alp.getProvenanceInToto(id),
    signedProvenance: (id) => alp.getProvenanceEnvelope(id),
    attestations: (id, n) => alp.listAttestations(id, n),
    keys: () => alp.keys(),
    logEntry: (id, seq) => alp.logEntry(id, seq),
    logInclusion: (leaf, size) => alp.logInclusion(leaf, size),
    logCheckpoint: () => alp.logCheckpoint(),
    query(kind, key, p) {
      switch (kind) {
        case 'transitions':
          return alp.queryTransitions({ date: key, ...page(p) });
        case 'approvals':
          return alp.queryApprovals({ approver: key, ...page(p) });
        case 'runs':
          return alp.queryRuns({ date: key, ...page(p) });
        case 'provenance':
          return alp.queryProvenance({ date: key, ...page(p) });
        case 'compensations':
          return alp.queryCompensations({ state: key, ...page(p) });
      }
    },
    verifyContent: async (id) => (await alp.verification(artifactId(id))).content,
    listAliases: (id) => alp.listAliases(id),
    setAlias: (id, name, version, reason) => alp.setAlias(id, name, version, reason),
    removeAlias: (id, name, reason) => alp.removeAlias(id, name, reason),
    search: (input) =>
      alp.search({
        ...page(input),
        labels: input.labels,
        ...(input.namePrefix !== undefined ? { name_prefix: input.namePrefix } : {}),
        ...(input.state !== undefined ? { state: input.state } : {}),
      }),
    policy: (review) => alp.policy(review ? { artifactId: artifactId(review.artifactId), version: review.version } : undefined),
    // The server validates the document (a schema refusal is INVALID, as validateApprovalPolicy's is locally).
    setPolicy: (policy, o) =>
      alp.setPolicy(policy as T.ApprovalPolicyInput, {
        expectedVersion: o.expectedVersion,
        ...(o.reason !== undefined ? { reason: o.reason } : {}),
      }),
    policyLog: () => alp.policyLog(),
  };
}
