/**
 * Issue 14 item 3: a crash between a provenance append's commit and the HEAD's record of the derived
 * document's digest must not look like corruption, and the three checks must agree. The crash state
 * is built deterministically: the steps commit and the newer document is written, and the HEAD's
 * record is set back to what it was before (the update the crash lost).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { readHead } from '../../src/audit/chain.ts';
import { sha256 } from '../../src/core/digest.ts';
import { HEAD_SK } from '../../src/core/keys.ts';
import { provenanceKey } from '../../src/core/object-keys.ts';
import { createArtifact } from '../../src/lifecycle/artifacts.ts';
import { addProvenance, buildProvenanceDocument } from '../../src/lifecycle/provenance.ts';
import { attachAuditSinks } from '../../src/runtime/sinks.ts';
import { initInstallation } from '../../src/system/installation.ts';
import { embeddedContext } from '../helpers/context.ts';
import { distributedInstallation, stopDistributedServers } from '../helpers/distributed.ts';
import { bytesOf } from '../helpers/tmp.ts';
import { agent } from '../helpers/walk.ts';
import { allChecks, cli, distributedProfile, embeddedProfile, type Profile } from './checks.ts';

after(stopDistributedServers);

const profiles: Array<[string, () => Promise<Profile>]> = [
  ['SQLite + directory', async () => embeddedProfile(await embeddedContext())],
  ['DynamoDB Local + s3rver', async () => distributedProfile(await distributedInstallation())],
];

async function withSteps(p: Profile, n: number): Promise<string> {
  // As every entry point does: the audit sink keeps the installation-wide append counter (item 12)
  // that the CLI's init records a baseline of and reconcile checks.
  await attachAuditSinks(p.ctx);
  await initInstallation(p.ctx);
  const { version } = await createArtifact(p.ctx, agent, { name: 'prov', filename: 'f.sh', body: bytesOf('echo\n') });
  const id = version.artifact_id;
  for (let i = 1; i <= n; i++) await addProvenance(p.ctx, agent, id, { action: `step-${i}` });
  return id;
}

/** The HEAD's record of the document as it was before the last append recorded it. */
async function loseHeadRecord(p: Profile, id: string, before: Record<string, unknown>): Promise<void> {
  const head = await readHead(p.ctx, id);
  await p.ctx.items.update({ PK: head.PK, SK: HEAD_SK }, { set: before });
}

for (const [profile, open] of profiles) {
  describe(`issue 14 item 3: a crash looks like corruption (${profile})`, () => {
    it('issue 14 item 3: a correct document the HEAD does not record is stale for verify --all, the verification route and reconcile; start and the next append re-derive it', async () => {
      const p = await open();
      const id = await withSteps(p, 2);
      const two = await readHead(p.ctx, id);
      const recordedTwo = {
        provenance_hash: two.provenance_hash,
        provenance_doc_steps: two.provenance_doc_steps,
      };
      await addProvenance(p.ctx, agent, id, { action: 'step-3' });
      // The crash: step 3 committed and its document was written; the HEAD update recording it was lost.
      await loseHeadRecord(p, id, recordedTwo);

      const crashed = await allChecks(p, id);
      assert.equal(crashed.verifyAll.code, 0, `verify --all: ${JSON.stringify(crashed.verifyAll.report)}`);
      const stale = crashed.verifyAll.report.stale as Array<Record<string, unknown>>;
      assert.deepEqual(
        stale.map((s) => [s.key, s.steps]),
        [[provenanceKey(id), 3]],
      );
      assert.equal(crashed.http.ok, true, JSON.stringify(crashed.http));
      assert.equal((crashed.http.content as { stale: unknown[] }).stale.length, 1);
      assert.equal(crashed.reconcile.status, 'VERIFIED', JSON.stringify(crashed.reconcile.findings));
      assert.ok(crashed.reconcile.findings.some((f) => f.kind === 'derived' && f.problem === 'stale' && f.key === provenanceKey(id)));

      // reconcile re-derived it; the crash again, then the start pass (alp init) re-derives it.
      const want = await buildProvenanceDocument(p.ctx, id);
      assert.equal((await readHead(p.ctx, id)).provenance_hash, sha256(want.bytes), 'reconcile recorded the derived document');
      await loseHeadRecord(p, id, recordedTwo);
      const init = await cli(p, ['init']);
      assert.equal(init.code, 0, init.stderr);
      assert.equal(JSON.parse(init.stdout).provenance_documents_repaired, 1);
      const repaired = await readHead(p.ctx, id);
      assert.deepEqual([repaired.provenance_hash, repaired.provenance_doc_steps], [sha256(want.bytes), 3]);

      // An older writer's late overwrite (a document behind the committed steps) is stale too, and
      // the next append re-derives the document from every committed step.
      const behind = await buildProvenanceDocument(p.ctx, id);
      await addProvenance(p.ctx, agent, id, { action: 'step-4' });
      await p.ctx.content.put(provenanceKey(id), [behind.bytes]);
      const late = await allChecks(p, id);
      assert.equal(late.verifyAll.code, 0);
      assert.equal(late.http.ok, true);
      assert.equal(late.reconcile.status, 'VERIFIED');
      await p.ctx.content.put(provenanceKey(id), [behind.bytes]);
      await addProvenance(p.ctx, agent, id, { action: 'step-5' });
      const clean = await allChecks(p, id);
      assert.deepEqual(clean.verifyAll.report.stale, []);
      assert.equal((await readHead(p.ctx, id)).provenance_doc_steps, 5);
    });

    it('issue 14 item 3: a really corrupted document is CORRUPT for all three checks', async () => {
      const p = await open();
      const id = await withSteps(p, 2);
      const doc = await buildProvenanceDocument(p.ctx, id);
      // A forged step: well-formed, but not what the committed steps derive.
      const forged = Buffer.from(doc.bytes.toString('utf8').replace('step-2', 'step-X'));
      assert.notDeepEqual(forged, doc.bytes);
      await p.ctx.content.put(provenanceKey(id), [forged]);

      const checks = await allChecks(p, id);
      assert.equal(checks.verifyAll.code, 5, 'verify --all exits INTEGRITY');
      const findings = checks.verifyAll.report.findings as Array<Record<string, unknown>>;
      assert.deepEqual(
        findings.map((f) => [f.key, f.problem]),
        [[provenanceKey(id), 'corrupt']],
      );
      assert.equal(checks.http.ok, false);
      assert.equal(checks.reconcile.status, 'FAILED');
      assert.ok(checks.reconcile.findings.some((f) => f.kind === 'object' && f.problem === 'corrupt' && f.key === provenanceKey(id)));
    });
  });
}
